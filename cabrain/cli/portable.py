"""``cabrain export`` and ``cabrain import``: a brain's memories out to a portable file, and back in
(or another tool's memories in).

With ``CABRAIN_API_URL`` set, both go through the service as the agent of ``CABRAIN_API_KEY`` (an
export of the namespaces it owns; an import into a namespace it may write, or of a CaBrain export
with an admin key). Without it they work on the hot tier directly, as the operator.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from cabrain.cli.common import EXIT_OK, Subparsers, json_flag, namespace_option, only_namespaces, quiet_flag, remote
from cabrain.errors import UsageError
from cabrain.settings import Settings

PLURALS = {"memory": "memories", "entity": "entities", "agent": "agents"}


def _counted(counts: dict[str, int]) -> str:
    """``{"memory": 8, "link": 1}`` as "8 memories, 1 link"."""
    words = [f"{n} {kind if n == 1 else PLURALS.get(kind, kind + 's')}" for kind, n in counts.items() if n]
    return ", ".join(words) or "nothing"


def _say(args: argparse.Namespace) -> Any:
    return (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists", hint="give another file, or --force to replace it")
    say = _say(args)
    if settings.api_url:
        if not args.namespace:
            raise UsageError("name the namespaces to export (--namespace, repeatable)")
        with remote(settings) as client, out.open("w", encoding="utf-8") as f:
            client.export(args.namespace, f, with_embeddings=args.with_embeddings)
        say(f"exported to {out}")
        return EXIT_OK
    from cabrain.engine import Engine  # lazy: start-up time (common.py)
    from cabrain.portable.facade import Portable

    async def run() -> Any:
        engine = await Engine.open(settings)
        try:
            with out.open("w", encoding="utf-8") as f:
                return await Portable(engine).export(
                    None, args.namespace or [], f, with_embeddings=args.with_embeddings, progress=say
                )
        finally:
            await engine.close()

    report = asyncio.run(run())
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        counts = _counted({k: v for k, v in report.counts.items() if k != "cabrain-export"})
        print(f"exported {', '.join(report.namespaces)} to {out}: {counts} ({report.seconds:.1f} s)")
    return EXIT_OK


def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
    path = Path(args.path)
    say = _say(args)
    if settings.api_url:
        if path.is_dir():
            raise UsageError("a folder is imported on the server's own command line; over the API send one file")
        with remote(settings) as client:
            report = client.import_file(
                args.format, path, args.namespace, visibility=args.visibility, decide=not args.no_decide
            )
    else:
        from cabrain.engine import Engine  # lazy: start-up time (common.py)
        from cabrain.portable.facade import Portable

        async def run() -> Any:
            engine = await Engine.open(settings)
            try:
                done = await Portable(engine).import_file(
                    None,
                    args.format,
                    path,
                    args.namespace,
                    visibility=args.visibility,
                    decide=not args.no_decide,
                    as_agent=args.as_agent,
                    progress=say,
                )
                return done.to_json()
            finally:
                await engine.close()

        report = asyncio.run(run())
    if args.json:
        print(json.dumps(report, indent=2, default=str, ensure_ascii=False))
    elif args.format == "cabrain":
        print(f"imported {_counted(report['added'])}; {sum(report['skipped'].values())} records were already here")
        if report["came_back_hot"]:
            print(
                f"{report['came_back_hot']} archived memories came back to the hot tier (the next sleep demotes them)"
            )
    else:
        print(
            f"{report['format']} into {report['namespace']}: {report['read']} records read, {report['added']} added, "
            f"{report['duplicates']} duplicates of stored memories, {report['already']} imported before"
        )
        for why, n in sorted(report["skipped"].items()):
            print(f"  skipped {n}: {why}")
        if report.get("superseded") or report.get("duplicates") or report.get("retracted"):
            print(
                f"  decisions: {report['superseded']} superseded a stored memory, {report['duplicates']} merged into "
                f"one, {report['retracted']} retracted one"
            )
            for why, n in sorted(report["reasons"].items(), key=lambda kv: -kv[1]):
                print(f"    {n} {why}")
            if report["taken_out"]:
                print(f"  taken out of recall: {', '.join(report['taken_out'])}")
                print(f"  {report['revert']}")
    return EXIT_OK


def add_export(sub: Subparsers) -> None:
    export = sub.add_parser(
        "export",
        parents=[json_flag("print the report as JSON"), quiet_flag(), only_namespaces(short=True)],
        help="export namespaces to a portable JSON Lines file",
        description="Every memory (current or not, hot or archived) with its versions, provenance, entities, "
        "links and judgments, and the namespaces' grants; without vectors unless --with-embeddings.",
    )
    export.add_argument("out", metavar="OUT", help="the file to write")
    export.add_argument("--with-embeddings", action="store_true", help="keep the vectors (a larger file)")
    export.add_argument("--force", action="store_true", help="replace OUT if it exists")
    export.set_defaults(func=cmd_export)


def add_import(sub: Subparsers) -> None:
    from cabrain.importers import FORMATS  # the names only: a dictionary, no parser loads

    imp = sub.add_parser(
        "import",
        parents=[json_flag("print the report as JSON"), quiet_flag(), namespace_option(required=False)],
        help="import a CaBrain export, or another tool's memories",
        description="Formats: cabrain (an export), " + ", ".join(sorted(FORMATS)) + ". Idempotent: importing the "
        "same file again adds nothing.",
    )
    imp.add_argument("format", choices=["cabrain", *sorted(FORMATS)])
    imp.add_argument("path", metavar="PATH")
    imp.add_argument("--visibility", default="team", choices=["private", "team", "global"])
    imp.add_argument("--no-decide", action="store_true", help="store every record without comparing it (faster)")
    imp.add_argument(
        "--as", dest="as_agent", default="admin", metavar="AGENT", help="without a service: write as this agent"
    )
    imp.set_defaults(func=cmd_import)
