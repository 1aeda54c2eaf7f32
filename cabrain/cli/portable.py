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

from cabrain.cli.common import (
    EXIT_OK,
    Subparsers,
    acting_as,
    json_flag,
    namespace_option,
    only_namespaces,
    quiet_flag,
    remote,
    require_acting,
)
from cabrain.errors import UsageError
from cabrain.settings import Settings

PLURALS = {"memory": "memories", "entity": "entities", "agent": "agents"}


def _counted(counts: dict[str, int]) -> str:
    """``{"memory": 8, "link": 1}`` as "8 memories, 1 link"."""
    words = [f"{n} {kind if n == 1 else PLURALS.get(kind, kind + 's')}" for kind, n in counts.items() if n]
    return ", ".join(words) or "nothing"


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.progress import Progress, for_terminal

    out = Path(args.out)
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists", hint="give another file, or --force to replace it")
    if settings.api_url:
        if not args.namespace:
            raise UsageError("name the namespaces to export (--namespace, repeatable)")
        with for_terminal(args.quiet) as progress, remote(settings) as client, out.open("w", encoding="utf-8") as f:
            client.export(args.namespace, f, with_embeddings=args.with_embeddings)
            progress(f"exported to {out}")
        return EXIT_OK
    from cabrain.engine import Engine  # lazy: start-up time (common.py)
    from cabrain.portable.facade import Portable

    async def run(progress: Progress) -> Any:
        engine = await Engine.open(settings)
        try:
            with out.open("w", encoding="utf-8") as f:
                return await Portable(engine).export(
                    None, args.namespace or [], f, with_embeddings=args.with_embeddings, progress=progress
                )
        finally:
            await engine.close()

    with for_terminal(args.quiet) as progress:
        report = asyncio.run(run(progress))
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        counts = _counted({k: v for k, v in report.counts.items() if k != "cabrain-export"})
        print(f"exported {', '.join(report.namespaces)} to {out}: {counts} ({report.seconds:.1f} s)")
    return EXIT_OK


def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
    path = Path(args.path)
    if args.format == "cabrain" and (args.mirror or args.dry_run or args.source):
        raise UsageError("--source, --mirror and --dry-run are for other tools' files, not a CaBrain export")
    options: dict[str, Any] = {
        "visibility": args.visibility,
        "decide": not args.no_decide,
        "source": args.source,
        "mirror": args.mirror,
        "dry_run": args.dry_run,
    }
    if settings.api_url:
        if path.is_dir():
            raise UsageError("a folder is imported on the server's own command line; over the API send one file")
        if args.ray:
            raise UsageError("--ray is for an import on the server's own command line (without CABRAIN_API_URL)")
        with remote(settings) as client:
            report = client.import_file(args.format, path, args.namespace, **options)
    elif args.ray:
        from cabrain.ray_runtime import ray_session  # Ray (seconds to import) only where asked

        with ray_session(settings, inline=False, say=lambda line: None if args.quiet else print(line, file=sys.stderr)):
            report = asyncio.run(_import_here(settings, args, path, options))
    else:
        report = asyncio.run(_import_here(settings, args, path, options))
    if args.json:
        print(json.dumps(report, indent=2, default=str, ensure_ascii=False))
    elif args.format == "cabrain":
        print(f"imported {_counted(report['added'])}; {sum(report['skipped'].values())} records were already here")
        if report["came_back_hot"]:
            print(
                f"{report['came_back_hot']} archived memories came back to the hot tier (the next sleep demotes them)"
            )
    else:
        for line in import_summary(report):
            print(line)
    if report.get("embedded_on") and not args.json:
        spread = ", ".join(f"{n} on {node[:12]}" for node, n in sorted(report["embedded_on"].items()))
        print(f"embedded on {len(report['embedded_on'])} Ray nodes: {spread} texts")
    return EXIT_OK


async def _import_here(settings: Settings, args: argparse.Namespace, path: Path, options: dict[str, Any]) -> Any:
    """The import on the hot tier directly, as the operator; with ``--ray``, its embedding spread over
    the nodes of the Ray this process is connected to (:mod:`cabrain.portable.spread`), the texts each
    node embedded reported under ``embedded_on``."""
    from cabrain.engine import Engine  # lazy: start-up time (common.py)
    from cabrain.portable.facade import Portable
    from cabrain.portable.spread import EmbedderPool
    from cabrain.progress import for_terminal

    pool = await EmbedderPool.start(settings) if args.ray else None
    try:
        engine = await Engine.open(settings, embedder=pool)
        try:
            if args.format != "cabrain":  # an export restores as the operator, agents and all
                await require_acting(engine, args.as_agent)
            with for_terminal(args.quiet) as progress:
                done = await Portable(engine).import_file(
                    None, args.format, path, args.namespace, as_agent=args.as_agent, progress=progress, **options
                )
            report = done.to_json()
        finally:
            await engine.close()
    finally:
        if pool is not None:
            pool.close()
    if pool is not None:
        report["embedded_on"] = dict(pool.nodes)
    return report


def import_summary(report: dict[str, Any]) -> list[str]:
    """Another tool's import report, in lines for a person: what was read, written, revised, skipped
    by reason, forgotten, and how to undo what was decided."""
    dry = report.get("dry_run")
    would = "would be " if dry else ""
    lines = [
        f"{report['format']} {report.get('source') or ''} into {report['namespace']}"
        + (" (dry run: nothing written)" if dry else "")
        + f": {report['read']} records read",
        f"  {report['added']} {would}added, {report['revised']} {would}revised (newer at the source), "
        f"{report['already']} unchanged since imported",
    ]
    if report.get("forgotten"):
        lines.append(f"  {report['forgotten']} {would}forgotten: gone from the source (--mirror)")
    for why, n in sorted(report["skipped"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  skipped {n}: {why}")
    if report.get("superseded") or report.get("duplicates") or report.get("retracted"):
        lines.append(
            f"  decisions: {report['superseded']} superseded a stored memory, {report['duplicates']} merged into "
            f"one, {report['retracted']} retracted one"
        )
        for why, n in sorted(report["reasons"].items(), key=lambda kv: -kv[1]):
            lines.append(f"    {n} {why}")
    if report["taken_out"]:
        lines.append(f"  taken out of recall (revised or superseded): {', '.join(report['taken_out'])}")
    if not dry and (report.get("revised") or report.get("superseded") or report.get("retracted")):
        lines.append(f"  to undo: {report['revert']}")
    if not dry and report.get("forgotten"):
        lines.append(f"  forgotten (kept, never erased: `cabrain get MEMORY_ID`): {', '.join(report['forgotten_ids'])}")
    return lines


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
        parents=[
            json_flag("print the report as JSON"),
            quiet_flag(),
            namespace_option(required=False),
            acting_as("without a service: write as this agent"),
        ],
        help="import a CaBrain export, or another tool's memories",
        description="Formats: cabrain (an export), " + ", ".join(sorted(FORMATS)) + ". Idempotent: importing the "
        "same file again adds nothing; records changed since revise their memories (each revision can be "
        "reverted).",
    )
    imp.add_argument("format", choices=["cabrain", *sorted(FORMATS)])
    imp.add_argument("path", metavar="PATH")
    imp.add_argument("--visibility", default="team", choices=["private", "team", "global"])
    imp.add_argument("--no-decide", action="store_true", help="store every record without comparing it (faster)")
    imp.add_argument(
        "--source",
        metavar="NAME",
        help="what the records' keys are scoped by (default: the file's real path; a Letta agent or a mem0 user "
        "names its own): give the same NAME to a moved file so a re-import still revises",
    )
    imp.add_argument("--mirror", action="store_true", help="forget the records the source no longer holds")
    imp.add_argument("--dry-run", action="store_true", help="say what would be added, revised, skipped; write nothing")
    imp.add_argument(
        "--ray",
        action="store_true",
        help="embed on every node of the Ray cluster (CABRAIN_RAY_ADDRESS, or a local Ray for this run): for an "
        "export without vectors or another tool's file",
    )
    imp.set_defaults(func=cmd_import)
