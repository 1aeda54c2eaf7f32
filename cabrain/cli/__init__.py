"""The ``cabrain`` command line.

Each area's module declares its sub-commands and their handlers side by side; flags several
commands share are parent parsers in :mod:`cabrain.cli.common`. This module puts the parser
together and runs a command.

Exit codes: 0 success, 1 a check or operation failed (the message says why and how to fix it),
2 bad usage or settings, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence

from cabrain import __version__, logs
from cabrain.cli import (
    agents,
    backup,
    connectors,
    corrections,
    db,
    entities,
    faces,
    live,
    measure,
    memories,
    overview,
    portable,
    service,
    sleep,
    workflows,
)
from cabrain.cli.common import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, parse_args
from cabrain.errors import CabrainError, ConfigError, UsageError
from cabrain.settings import describe_unknown, load_settings, unknown_variables

__all__ = ["EXIT_FAIL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cabrain",
        description="CaBrain: self-hosted shared memory for AI agents. "
        "Settings come from CABRAIN_* environment variables (see README).",
    )
    parser.add_argument("--version", action="version", version=f"cabrain {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # in the order `cabrain --help` lists them
    service.add_migrate(sub)
    sleep.add_sleep(sub)
    service.add_doctor(sub)
    measure.add_eval(sub)
    measure.add_bench(sub)
    service.add_up(sub)
    service.add_down(sub)
    agents.add_agents(sub)
    faces.add_mcp(sub)
    faces.add_capture(sub)
    faces.add_hooks(sub)
    memories.add_remember(sub)
    memories.add_recall(sub)
    memories.add_get(sub)
    entities.add_entities(sub)
    memories.add_entity(sub)
    memories.add_forget(sub)
    memories.add_judgments(sub)
    memories.add_revert(sub)
    corrections.add_correct(sub)
    corrections.add_unforget(sub)
    corrections.add_audit(sub)
    overview.add_overview(sub)
    agents.add_namespaces(sub)
    agents.add_share(sub)
    workflows.add_workflows(sub)
    connectors.add_connectors(sub)
    portable.add_export(sub)
    portable.add_import(sub)
    db.add_db(sub)
    backup.add_backup(sub)
    backup.add_restore(sub)
    live.add_live(sub)
    return parser


def _explain(exc: CabrainError) -> str:
    """The error, and what to do about it in this command line's terms (cabrain/fixes.py)."""
    hint = exc.hint_for("cli")
    return exc.message + (f"\n  fix: {hint}" if hint else "")


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    # SIGTERM unwinds like Ctrl-C, so context managers release the embedded server. (Only the main
    # thread may set a handler: main() run from another thread, as the tests do, leaves it alone.)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        settings = load_settings()
        logs.configure(settings.log_level)
        unknown = unknown_variables(dict(os.environ))
        if unknown and getattr(args, "warn_unknown", True):
            print(f"cabrain: warning: {describe_unknown(unknown)}", file=sys.stderr)
        return args.func(settings, args)
    except (ConfigError, UsageError) as exc:
        print(f"cabrain: {_explain(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except CabrainError as exc:
        print(f"cabrain: {_explain(exc)}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("cabrain: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a failure nobody turned into a CabrainError: one line, not a traceback
        import asyncpg  # lazy: only an unexpected failure needs it

        if isinstance(exc, asyncpg.PostgresError | OSError):
            print(f"cabrain: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_FAIL
        raise
