"""Memory commands against a running API: ``remember``, ``recall``, ``get``, ``entities``, ``entity``,
``forget``, ``judgments`` and ``revert``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from cabrain.cli.common import EXIT_OK, REMOTE_NOTE, Subparsers, json_flag, namespace_option, remote
from cabrain.errors import UsageError
from cabrain.settings import Settings


# --- remember, recall, get ---------------------------------------------------------------------------------
def cmd_remember(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import MemoryInput, Network, Visibility  # lazy, here and below: start-up time

    content = sys.stdin.read() if args.content == "-" else args.content
    item = MemoryInput(
        content,
        args.namespace,
        visibility=Visibility(args.visibility),
        network=Network(args.network),
        source_kind=args.source_kind or "manual",
        metadata={k: v for k, v in (("thread", args.thread), ("speaker", args.speaker)) if v},
    )
    with remote(settings) as client:
        result = client.retain(item)
    print(f"{result.decision.value} {result.memory_id or '-'} (importance {result.importance:.2f}) {result.reason}")
    return EXIT_OK


def cmd_recall(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import (
        ArchiveHit,
        ArchiveQuery,
        ArchiveResult,
        Hit,
        RecallQuery,
        RecallResult,
        to_json,
    )

    if not args.archive and (args.valid_from or args.valid_to):
        raise UsageError("--from and --to go with --archive", hint="add --archive to search the cold tier by time")
    if args.archive and (args.as_of or args.context or args.explain or args.why_not):
        raise UsageError("--as-of, --context, --explain and --why-not are for hot recall", hint="leave out --archive")
    if args.explain or args.why_not:
        return _explain(settings, args)
    result: RecallResult | ArchiveResult
    with remote(settings) as client:
        if args.archive:
            result = client.recall_archive(
                ArchiveQuery(args.query, args.namespace, k=args.k, valid_from=args.valid_from, valid_to=args.valid_to)
            )
        else:
            query = RecallQuery(args.query, args.namespace, k=args.k, as_of=args.as_of, context=tuple(args.context))
            result = client.recall(query)
    if args.json:
        answer = to_json(result)
        print(json.dumps(answer, ensure_ascii=False, indent=2))
        return EXIT_OK
    hits: Sequence[Hit | ArchiveHit] = result.hits
    for i, hit in enumerate(hits, 1):
        when = f" {hit.memory.valid_at:%Y-%m-%d}" if args.archive else ""
        gone = " (superseded)" if hit.memory.invalid_at else ""
        print(f"{i:>2}. [{hit.score:.3f}]{when} {hit.memory.content}{gone}  ({hit.memory.id})")
    if not hits:
        scanned = f" ({result.scanned} archived memories searched)" if isinstance(result, ArchiveResult) else ""
        print("no memories matched" + scanned)
    return EXIT_OK


def _explain(settings: Settings, args: argparse.Namespace) -> int:
    """``recall --explain``: the recall taken apart, not counted as a use (Brain.explain_recall)."""
    from cabrain.types import RecallQuery

    query = RecallQuery(args.query, args.namespace, k=args.k, as_of=args.as_of, context=tuple(args.context))
    with remote(settings) as client:
        explained = client.explain_recall(query, why_not=args.why_not)
    if args.json:
        print(json.dumps(explained, ensure_ascii=False, indent=2))
        return EXIT_OK

    def place(p: dict | None) -> str:
        return "not searched" if p is None else f"#{p['rank']} {p['score']:.4f}" if p["rank"] else "-"

    print(f"not counted as a use; {explained['fusion']}; rerank: {explained['rerank']}")
    for hit in explained["hits"]:
        memory = hit["memory"]
        gone = f" (superseded by {memory['superseded_by']})" if memory["superseded_by"] else ""
        gone = gone or (" (forgotten)" if memory["invalid_at"] else "")
        print(f"{hit['rank']:>2}. [{hit['score']:.4f}] {memory['content']}{gone}  ({memory['id']})")
        print(f"    vector {place(hit['dense'])}, keyword {place(hit['keyword'])}, fused {place(hit['fused'])}")
        for term in hit["terms"]:
            print(f"    {term['name']} = {term['expression']} = {term['value']:.4f}")
        print(f"    {hit['formula']}; {hit['score_formula']}")
    why = explained["why_not"]
    if why is not None:
        print(f"why not {why['memory_id']}:")
        for reason in why["reasons"]:
            print(f"  {reason}")
    return EXIT_OK


def _timestamp(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date or time (e.g. 2026-01-31)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def cmd_get(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import to_json

    with remote(settings) as client:
        print(json.dumps(to_json(client.get(args.memory_id, as_of=args.as_of)), ensure_ascii=False, indent=2))
    return EXIT_OK


def add_remember(sub: Subparsers) -> None:
    remember = sub.add_parser(
        "remember",
        help="retain a memory",
        description="Retain one memory." + REMOTE_NOTE,
        parents=[namespace_option()],
    )
    remember.add_argument("content", help="the memory ('-' reads standard input)")
    remember.add_argument("--visibility", default="private", choices=["private", "team", "global"])
    remember.add_argument("--network", default="experience", choices=["fact", "experience", "observation", "belief"])
    remember.add_argument("--source-kind", default=None)
    remember.add_argument("--thread", default=None, help="the conversation it is a turn of (metadata.thread)")
    remember.add_argument("--speaker", default=None, help="who said it (metadata.speaker)")
    remember.set_defaults(func=cmd_remember)


def add_recall(sub: Subparsers) -> None:
    recall = sub.add_parser(
        "recall",
        help="recall memories",
        description="Hybrid recall." + REMOTE_NOTE,
        parents=[namespace_option(), json_flag("print the full answer as JSON")],
    )
    recall.add_argument("query")
    recall.add_argument("-k", type=int, default=5)
    recall.add_argument(
        "--archive", action="store_true", help="search the cold tier (memories the sleep cycle demoted) instead"
    )
    recall.add_argument(
        "--from",
        dest="valid_from",
        type=_timestamp,
        default=None,
        metavar="WHEN",
        help="with --archive: only memories valid from WHEN (ISO 8601, e.g. 2026-01-01)",
    )
    recall.add_argument(
        "--to",
        dest="valid_to",
        type=_timestamp,
        default=None,
        metavar="WHEN",
        help="with --archive: only memories valid before WHEN",
    )
    recall.add_argument(
        "--as-of",
        type=_timestamp,
        default=None,
        metavar="WHEN",
        help="what was true at WHEN (ISO 8601; without an offset: UTC): the versions valid then, "
        "not yet superseded or forgotten",
    )
    recall.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="TURN",
        help="an earlier turn of the conversation the query continues (repeat it, oldest first)",
    )
    recall.add_argument(
        "--explain",
        action="store_true",
        help="take the recall apart, as the console's playground does: each hit's rank and score in the "
        "vector list, the keyword list and after fusion, and the formula of its score; not counted as a use",
    )
    recall.add_argument(
        "--why-not",
        default=None,
        metavar="MEMORY_ID",
        help="with --explain (implied): where this memory stood in each list and what kept it out of the hits",
    )
    recall.set_defaults(func=cmd_recall)


def add_get(sub: Subparsers) -> None:
    get = sub.add_parser("get", help="show a memory with its history", description="Get a memory." + REMOTE_NOTE)
    get.add_argument("memory_id")
    get.add_argument(
        "--as-of",
        type=_timestamp,
        default=None,
        metavar="WHEN",
        help="the version that was current at WHEN (ISO 8601; without an offset: UTC)",
    )
    get.set_defaults(func=cmd_get)


# --- entities (the listing and its actions: cabrain/cli/entities.py) ------------------------------------
def cmd_entity(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import to_json

    if not 1 <= args.limit <= 200:
        raise UsageError(f"--limit must be between 1 and 200, got {args.limit}")
    with remote(settings) as client:
        found = client.entity(args.namespace, args.name, history=args.history, limit=args.limit)
    if args.json:
        print(json.dumps(to_json(found), ensure_ascii=False, indent=2))
        return EXIT_OK
    e = found.entity
    print(f"{e.name}  ({e.id})")
    if e.summary:
        print(f"summary ({e.summarized_at:%Y-%m-%d %H:%M}): {e.summary}")
    else:
        print("summary: none you may read")
    for m in found.memories:
        gone = " (superseded)" if m.invalid_at else ""
        print(f"- {m.valid_at:%Y-%m-%d} {m.content}{gone}  ({m.id})")
    if not found.memories:
        print("no current memory you may read mentions it" + ("" if args.history else " (--history: older ones too)"))
    return EXIT_OK


def add_entity(sub: Subparsers) -> None:
    entity = sub.add_parser(
        "entity",
        help="show one entity: its summary and the memories that mention it",
        description="Show one entity (by name, in any case, or id): its summary and the "
        "memories that mention it, newest first." + REMOTE_NOTE,
        parents=[json_flag("print the answer as JSON")],
    )
    entity.add_argument("namespace")
    entity.add_argument("name", help="the entity's name or id")
    entity.add_argument("--history", action="store_true", help="also superseded and forgotten memories")
    entity.add_argument("--limit", type=int, default=20, help="memories shown at most (1-200, default 20)")
    entity.set_defaults(func=cmd_entity)


# --- forget, judgments, revert -----------------------------------------------------------------------------
def cmd_forget(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        result = client.forget(args.memory_id, reason=args.reason)
    print(f"forgotten {result.memory.id} (kept, out of recall since {result.memory.invalid_at})")
    return EXIT_OK


def cmd_judgments(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        rows = client.judgments(args.memory_id, limit=args.limit)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return EXIT_OK
    if not rows:
        print(f"no judgment changed {args.memory_id}")
    for j in rows:
        state = f" (reverted by {j['reverted_by']})" if j["reverted_by"] else ""
        print(f"{j['created_at'][:19]}  {j['id']}  {j['kind']:<10} {j['origin']:<13} {j['agent'] or 'sleep'}{state}")
        print(f"    {j['reason']}")
    return EXIT_OK


def cmd_revert(settings: Settings, args: argparse.Namespace) -> int:
    if args.run:
        return _revert_run(settings, args)
    with remote(settings) as client:
        if args.judgment:
            undo = client.revert(judgment_id=args.id, reason=args.reason)
        else:
            undo = client.revert(memory_id=args.id, reason=args.reason)
    if args.json:
        print(json.dumps(undo, ensure_ascii=False, indent=2))
        return EXIT_OK
    print(
        f"reverted judgment {undo['reverts']} ({undo['inputs'].get('kind')}, {undo['inputs'].get('origin')}): "
        f"{len(undo['changes'])} memories back as they were; this revert is {undo['id']} (revert it to redo)"
    )
    return EXIT_OK


def _revert_run(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        undone = client.revert_run(args.id, reason=args.reason)
    if args.json:
        print(json.dumps(undone, ensure_ascii=False, indent=2))
        return EXIT_OK
    for undo in undone:
        kinds = ", ".join(undo["inputs"].get("kinds", []))
        back = len(undo["inputs"].get("unarchived", []))
        print(
            f"{undo['namespace']}: reverted {len(undo['inputs'].get('reverted', []))} judgments of run "
            f"{undo['inputs']['run']} ({kinds}); {len(undo['changes'])} memory changes undone, "
            f"{len(undo['entities'])} summaries put back, {back} memories back from the archive; "
            f"this revert is {undo['id']} (cabrain revert --judgment {undo['id']} redoes the run)"
        )
    return EXIT_OK


def add_forget(sub: Subparsers) -> None:
    forget = sub.add_parser("forget", help="soft-forget a memory", description="Forget (never delete)." + REMOTE_NOTE)
    forget.add_argument("memory_id")
    forget.add_argument("--reason", default=None)
    forget.set_defaults(func=cmd_forget)


def add_judgments(sub: Subparsers) -> None:
    judged = sub.add_parser(
        "judgments",
        help="why a memory changed: supersessions, merges, corrections, reverts",
        description="List the judgments that changed a memory, newest first." + REMOTE_NOTE,
        parents=[json_flag("print them as JSON")],
    )
    judged.add_argument("memory_id")
    judged.add_argument("--limit", type=int, default=50, help="at most this many (1-500, default 50)")
    judged.set_defaults(func=cmd_judgments)


def add_revert(sub: Subparsers) -> None:
    revert = sub.add_parser(
        "revert",
        help="undo a supersession, invalidation or merge, or a whole sleep run",
        description="Undo the latest judgment that changed MEMORY_ID (or, with --judgment, the "
        "judgment ID): the memories it changed get back exactly their state before it. With --run, "
        "undo everything the sleep run ID did (facts, summaries, merges, decay, archiving), one "
        "revert per namespace you may write. The revert "
        "is recorded and can be reverted in turn. Needs write access to the namespace." + REMOTE_NOTE,
        parents=[json_flag("print the revert as JSON")],
    )
    revert.add_argument("id", help="a memory id (or a judgment id with --judgment, a sleep run id with --run)")
    kind = revert.add_mutually_exclusive_group()
    kind.add_argument("--judgment", action="store_true", help="ID is a judgment id")
    kind.add_argument("--run", action="store_true", help="ID is a sleep run id: undo the whole run")
    revert.add_argument("--reason", default=None, help="why it is undone")
    revert.set_defaults(func=cmd_revert)
