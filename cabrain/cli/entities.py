"""Entity commands against a running API: ``entities`` (list, with mention counts), ``entities rename``
and ``entities merge`` (revertible judgments: ``cabrain revert --judgment ID`` undoes one)."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from cabrain.cli.common import EXIT_OK, REMOTE_NOTE, Subparsers, json_flag, remote
from cabrain.errors import UsageError
from cabrain.settings import Settings

ACTIONS = ("list", "rename", "merge")


class _AnyName(dict[str, argparse.ArgumentParser]):
    """Parsers by name that let argparse pass any first word on to :class:`_ListByDefault`."""

    def __contains__(self, name: object) -> bool:
        return True


class _ListByDefault(argparse._SubParsersAction):
    """``cabrain entities NAMESPACE`` is ``cabrain entities list NAMESPACE``, as it was before the
    entities had actions of their own (its parsers by name are an :class:`_AnyName` once added)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        if values and not dict.__contains__(self._name_parser_map, values[0]):
            values = ["list", *values]
        super().__call__(parser, namespace, values, option_string)


def cmd_entities(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import to_json

    if getattr(args, "namespace", None) is None:
        raise UsageError("give a namespace: cabrain entities NAMESPACE (or entities rename / merge, see --help)")
    if not 1 <= args.limit <= 200:
        raise UsageError(f"--limit must be between 1 and 200, got {args.limit}")
    with remote(settings) as client:
        page = client.entities(args.namespace, query=args.query, limit=args.limit, cursor=args.cursor, sort=args.sort)
    if args.json:
        print(json.dumps(to_json(page), ensure_ascii=False, indent=2))
        return EXIT_OK
    for e in page.entities:
        about = " ".join(e.summary.split()) if e.summary else "(no summary you may read)"
        own = f" +{e.own_private_mentions} yours" if e.own_private_mentions else ""
        print(f"{e.name:<32} {e.mentions:>6}{own} mentions  {about[:200]}")
    if not page.entities:
        print("no entities" + (f" matching {args.query!r}" if args.query else ""))
    if page.next_cursor:
        print(
            f"more: cabrain entities {shlex.quote(args.namespace)} --cursor {shlex.quote(page.next_cursor)}"
            + (f" --query {shlex.quote(args.query)}" if args.query else "")
            + (" --sort mentions" if args.sort == "mentions" else "")
        )
    return EXIT_OK


def _done(args: argparse.Namespace, judgment: dict[str, Any], what: str) -> int:
    if args.json:
        print(json.dumps(judgment, ensure_ascii=False, indent=2))
        return EXIT_OK
    print(f"{what}; judgment {judgment['id']} (undo: cabrain revert --judgment {judgment['id']})")
    return EXIT_OK


def cmd_rename(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        judgment = client.rename_entity(args.namespace, args.name, args.new_name, reason=args.reason)
    return _done(args, judgment, f"renamed {args.name!r} to {args.new_name!r}")


def cmd_merge(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        judgment = client.merge_entity(args.namespace, args.name, args.into, reason=args.reason)
    return _done(args, judgment, f"merged {args.name!r} into {args.into!r}")


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("namespace")
    parser.add_argument("--query", "-q", default=None, help="only names containing this (any case)")
    parser.add_argument("--limit", type=int, default=50, help="entities per page (1-200, default 50)")
    parser.add_argument("--cursor", default=None, help="the next page (printed under a full page)")
    parser.add_argument(
        "--sort", choices=("name", "mentions"), default="name", help="name order (default) or the most mentioned first"
    )
    parser.set_defaults(func=cmd_entities)


def add_entities(sub: Subparsers) -> None:
    entities = sub.add_parser(
        "entities",
        help="list what a namespace's memories are about (with mention counts); rename or merge entities",
        description="List the entities (people, projects, tools, files ...) a namespace's memories mention, "
        "with how many current memories you may read mention each and what sleep summarised of it "
        "(`cabrain entities NAMESPACE` or `entities list NAMESPACE`); rename one, or merge one into "
        "another (each a judgment `cabrain revert --judgment ID` undoes)." + REMOTE_NOTE,
    )
    entities.set_defaults(func=cmd_entities)
    actions = entities.add_subparsers(dest="entities_action", metavar="ACTION", action=_ListByDefault)
    listing = actions.add_parser(
        "list",
        help="list entities with their mention counts (the default)",
        description="List a namespace's entities, in name order or the most mentioned first." + REMOTE_NOTE,
        parents=[json_flag("print the answer as JSON")],
    )
    _list_arguments(listing)
    rename = actions.add_parser(
        "rename",
        help="rename an entity (its key follows; a name taken is refused: merge instead)",
        description="Rename an entity of a namespace. Writers of the namespace only; recorded as a judgment "
        "that `cabrain revert --judgment ID` undoes." + REMOTE_NOTE,
        parents=[json_flag("print the judgment as JSON")],
    )
    rename.add_argument("namespace")
    rename.add_argument("name", help="the entity's name or id")
    rename.add_argument("new_name", help="its new name")
    rename.add_argument("--reason", default=None, help="why (kept with the judgment)")
    rename.set_defaults(func=cmd_rename)
    merge = actions.add_parser(
        "merge",
        help="merge an entity into another (its memories then mention the other)",
        description="Merge entity NAME into INTO: every memory that mentions NAME mentions INTO instead; NAME "
        "is kept, marked merged. Writers of the namespace only; recorded as a judgment that "
        "`cabrain revert --judgment ID` undoes exactly." + REMOTE_NOTE,
        parents=[json_flag("print the judgment as JSON")],
    )
    merge.add_argument("namespace")
    merge.add_argument("name", help="the entity merged away (name or id)")
    merge.add_argument("into", help="the entity it is merged into (name or id)")
    merge.add_argument("--reason", default=None, help="why (kept with the judgment)")
    merge.set_defaults(func=cmd_merge)
    actions._name_parser_map = actions.choices = _AnyName(actions._name_parser_map)  # see _ListByDefault


__all__ = ["ACTIONS", "add_entities"]
