"""``cabrain connectors add|list|show|sync|runs|remove``: pull sources into namespaces.

With ``CABRAIN_API_URL`` set, each command asks the running service (as the agent of
``CABRAIN_API_KEY``; a sync runs in the service, and the command follows it). Without it, the command
works on the hot tier directly, as ``--as AGENT`` (default ``admin``): a local sync runs here, or
with ``--ray`` as Ray tasks over the cluster, and may read any path this user can. A local sync shows
its progress as bars with rate and time left when stderr is a terminal (:mod:`cabrain.progress`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cabrain.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    Subparsers,
    acting_as,
    json_flag,
    namespace_option,
    quiet_flag,
    remote,
    require_acting,
    serve_config,
)
from cabrain.errors import UsageError
from cabrain.progress import for_terminal
from cabrain.settings import Settings

if TYPE_CHECKING:
    from cabrain.connectors.facade import Connectors

T = TypeVar("T")


def _local(settings: Settings, work: Callable[[Connectors], Awaitable[T]]) -> T:
    """Run ``work`` on a Connectors facade over the hot tier (no service)."""
    from cabrain.connectors.facade import Connectors  # lazy, here and below: start-up time (common.py)
    from cabrain.engine import Engine

    async def run() -> T:
        engine = await Engine.open(settings)
        try:
            return await work(Connectors(engine, environ=os.environ, local_roots=None))
        finally:
            await engine.close()

    return asyncio.run(run())


def _config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if args.config:
        text = args.config
        if not text.lstrip().startswith("{"):
            try:
                with open(text, encoding="utf-8") as f:
                    text = f.read()
            except OSError as exc:
                raise UsageError(f"--config: cannot read {args.config}: {exc.strerror}") from None
        try:
            config = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--config is not a JSON object: {exc}") from None
        if not isinstance(config, dict):
            raise UsageError("--config must be a JSON object")
    for pair in args.set or []:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--set takes KEY=VALUE, got {pair!r}")
        try:
            config[key.strip()] = json.loads(value)  # numbers, true/false, lists
        except json.JSONDecodeError:
            config[key.strip()] = value
    return config


def _print_connector(c: dict[str, Any]) -> None:
    every = f"every {c['every_s']} s" if c.get("every_s") else "on demand"
    print(f"{c['name']:<24} {c['kind']:<13} -> {c['namespace']} ({c['visibility']}, {every})  {c['status']}")
    if c.get("last_error"):
        print(f"    error: {c['last_error']}")


def cmd_add(settings: Settings, args: argparse.Namespace) -> int:
    config = _config(args)
    options: dict[str, Any] = {"visibility": args.visibility, "every_s": args.every, "check": not args.no_check}
    if settings.api_url:
        with remote(settings) as client:
            made = client.add_connector(args.name, args.kind, args.namespace, config, **options)
    else:
        agent = args.as_agent

        async def work(hub: Connectors) -> dict[str, Any]:
            await require_acting(hub.engine, agent)
            c = await hub.add(agent, args.name, args.kind, args.namespace, config, **options)
            return c.to_json()

        made = _local(settings, work)
    _print_connector(made)
    print(f"sync it with: cabrain connectors sync {made['name']}")
    return EXIT_OK


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    if settings.api_url:
        with remote(settings) as client:
            found = client.connectors()
    else:

        async def work(hub: Connectors) -> list[dict[str, Any]]:
            return [c.to_json() for c in await hub.listing(args.as_agent)]

        found = _local(settings, work)
    if args.json:
        print(json.dumps(found, indent=2, ensure_ascii=False))
        return EXIT_OK
    for c in found:
        _print_connector(c)
    if not found:
        print("no connectors (add one: cabrain connectors add NAME KIND -n NAMESPACE --set path=...)")
    return EXIT_OK


def cmd_show(settings: Settings, args: argparse.Namespace) -> int:
    if settings.api_url:
        with remote(settings) as client:
            connector = client.connector(args.name)
            runs = client.connector_runs(args.name, limit=args.limit)
    else:

        async def work(hub: Connectors) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            c = await hub.get(args.as_agent, args.name)
            return c.to_json(), await hub.runs(args.as_agent, args.name, limit=args.limit)

        connector, runs = _local(settings, work)
    if args.json:
        print(json.dumps({**connector, "runs": runs}, indent=2, ensure_ascii=False, default=str))
        return EXIT_OK
    _print_connector(connector)
    print(f"    config: {json.dumps(connector['config'], ensure_ascii=False)}")
    print(f"    last sync: {connector.get('last_sync_at') or 'never'}")
    for run in runs:
        _print_run(run)
    return EXIT_OK


def _print_run(run: dict[str, Any]) -> None:
    line = _counts_line(run.get("counts") or {}) or "nothing"
    print(f"  {run['started_at']}  {run['status']:<11} {line}")
    if run.get("error"):
        print(f"      error: {run['error']}")


def _counts_line(counts: dict[str, Any]) -> str:
    """A run's counts in a line: the numbers that are not zero, then what the source skipped, by reason."""
    from cabrain.write.tally import skipped_line

    line = ", ".join(f"{k} {v}" for k, v in counts.items() if isinstance(v, int) and v)
    skipped = counts.get("skipped")
    said = skipped_line(skipped) if isinstance(skipped, dict) else ""
    return f"{line}; {said}" if line and said else line or said


def cmd_runs(settings: Settings, args: argparse.Namespace) -> int:
    args.json = getattr(args, "json", False)
    return cmd_show(settings, args)


def cmd_remove(settings: Settings, args: argparse.Namespace) -> int:
    if settings.api_url:
        with remote(settings) as client:
            client.remove_connector(args.name)
    else:

        async def work(hub: Connectors) -> None:
            await hub.remove(args.as_agent, args.name)

        _local(settings, work)
    print(f"removed connector {args.name}: it syncs no more; the memories it wrote stay")
    return EXIT_OK


def cmd_sync(settings: Settings, args: argparse.Namespace) -> int:
    if not args.names and not args.due:
        raise UsageError("name the connectors to sync, or give --due")
    if settings.api_url and (args.ray or args.due):
        raise UsageError("--ray and --due run here, on the hot tier: unset CABRAIN_API_URL to use them")
    with for_terminal(args.quiet) as progress:
        if settings.api_url and args.dry_run:
            with remote(settings) as client:
                reports = [client.dry_run_connector(name) for name in args.names]
        elif settings.api_url:
            reports = [_sync_remote(settings, name, progress) for name in args.names]
        else:
            from cabrain.connectors.run import sync_here

            reports = sync_here(
                settings, args.names, due=args.due, use_ray=args.ray, dry_run=args.dry_run, say=progress
            )
    if args.json:
        print(json.dumps(reports, indent=2, default=str))
    elif args.dry_run:
        for report in reports:
            if report.get("status") == "done":
                _print_dry_run(report)
    failed = [r for r in reports if r["status"] != "done"]
    for r in failed:
        print(f"cabrain: connector {r['connector']}: {r.get('error')}", file=sys.stderr)
    return EXIT_FAIL if failed else EXIT_OK


def _print_dry_run(report: dict[str, Any]) -> None:
    """What a sync would do, in words, with the parts named (the first of each)."""
    c = report["counts"]
    print(
        f"{report['connector']} (dry run, nothing written): {c['listed']} listed, {c['unchanged']} unchanged, "
        f"{c['fetched']} fetched; parts: {c['added']} to add, {c['revised']} to revise, {c['kept']} kept, "
        f"{c['forgotten']} to forget; {c['deleted']} deleted at the source"
    )
    if c.get("skipped"):
        print("  skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(c["skipped"].items())))
    for what, verb in (("added", "add"), ("revised", "revise"), ("forgotten", "forget"), ("deleted", "delete")):
        names = report.get(what) or []
        for name in names:
            print(f"  {verb:<7} {name}")
        total = c["deleted"] if what == "deleted" else c[what]
        if total > len(names):
            print(f"  {verb:<7} ... and {total - len(names)} more")


def _sync_remote(settings: Settings, name: str, say: Callable[[str], None]) -> dict[str, Any]:
    """Start a sync in the service and follow it until it ends."""
    with remote(settings) as client:
        run_id = client.sync_connector(name)
        say(f"{name}: sync {run_id} started in the service")
        last = None
        while True:
            run = client.connector_run(name, run_id)
            line = _counts_line(run.get("counts") or {})
            if line and line != last:
                say(f"{name}: {line}")
                last = line
            if run["status"] != "running":
                return {"connector": name, "run_id": str(run_id), **run}
            time.sleep(1.0)


def add_connectors(sub: Subparsers) -> None:
    connectors = sub.add_parser(
        "connectors",
        help="pull GitLab, WebDAV/Nextcloud, Google Drive, Vikunja, folders and chat exports into namespaces",
        description="Connectors pull a source into a namespace, on demand or on a schedule. With CABRAIN_API_URL "
        "set, commands go to the service; otherwise they work on the hot tier as --as AGENT.",
    )
    csub = connectors.add_subparsers(dest="connectors_command", metavar="COMMAND", required=True)
    as_agent = acting_as()

    add = csub.add_parser(
        "add",
        parents=[as_agent, namespace_option(), serve_config("the config as a JSON object, or a file holding one")],
        help="add a connector",
        description="Add a connector. Kinds: folder, webdav, gitlab, gdrive, vikunja, slack-export, whatsapp. "
        "Credentials are never given here: name the environment variable that holds one (--set token_env=GITLAB_TOKEN).",
    )
    add.add_argument("name")
    add.add_argument("kind")
    add.add_argument("--set", action="append", metavar="KEY=VALUE", help="one config key (repeatable; JSON values)")
    add.add_argument("--visibility", default="team", choices=["private", "team", "global"])
    add.add_argument("--every", type=int, default=None, metavar="SECONDS", help="sync on a schedule (>= 60)")
    add.add_argument(
        "--no-check",
        action="store_true",
        help="add it without reaching the source first (by default the path, the credential and the project or "
        "folder are checked now, and a wrong one refused): for a source not reachable from here yet",
    )
    add.set_defaults(func=cmd_add)

    ls = csub.add_parser(
        "list",
        parents=[as_agent, json_flag()],
        help="list connectors",
        description="The connectors writing to namespaces you may write (an admin: all), with their status.",
    )
    ls.set_defaults(func=cmd_list)

    for verb, text in (("show", "a connector and its recent runs"), ("runs", "a connector's recent runs")):
        show = csub.add_parser(verb, parents=[as_agent, json_flag()], help=text, description=f"Show {text}.")
        show.add_argument("name")
        show.add_argument("--limit", type=int, default=10)
        show.set_defaults(func=cmd_show if verb == "show" else cmd_runs)

    sync = csub.add_parser(
        "sync",
        parents=[as_agent, json_flag("print the reports as JSON"), quiet_flag()],
        help="sync connectors now",
        description="Sync connectors now: list the source, index what changed, forget what is gone. An "
        "interrupted sync resumes where it stopped. On a terminal, bars show each sync's listing and indexing with "
        "their rate and time left.",
    )
    sync.add_argument("names", nargs="*", metavar="NAME")
    sync.add_argument("--due", action="store_true", help="every connector whose schedule is due")
    sync.add_argument("--ray", action="store_true", help="fan large syncs out as Ray tasks (CABRAIN_RAY_ADDRESS)")
    sync.add_argument(
        "--dry-run",
        action="store_true",
        help="say what a sync would do, writing nothing: list the source, fetch and compare what changed, and "
        "report the parts it would add, revise, keep and forget and what it would skip (runs here, not on Ray)",
    )
    sync.set_defaults(func=cmd_sync)

    rm = csub.add_parser(
        "remove",
        parents=[as_agent],
        help="remove a connector (its memories stay)",
        description="Remove a connector: it syncs no more. The memories it wrote stay, as every memory does.",
    )
    rm.add_argument("name")
    rm.set_defaults(func=cmd_remove)
