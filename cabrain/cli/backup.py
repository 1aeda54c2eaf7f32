"""``cabrain backup DIR`` and ``cabrain restore DIR``: the hot and the cold tier, to a folder and back."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from cabrain.cli.common import EXIT_FAIL, EXIT_OK, Subparsers, json_flag, quiet_flag
from cabrain.errors import UsageError
from cabrain.progress import for_terminal
from cabrain.settings import Settings


def _check_timeouts(args: argparse.Namespace) -> None:
    for flag in ("timeout", "wait"):
        value = getattr(args, flag, None)
        if value is not None and value <= 0:
            raise UsageError(f"--{flag} must be a positive number of seconds")


def cmd_backup(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.backup import backup  # lazy, here and below: start-up time (common.py)
    from cabrain.store.db import describe_target, hot_tier

    _check_timeouts(args)
    with for_terminal(args.quiet) as progress:
        progress(f"backing up {describe_target(settings)} and the cold tier at {settings.resolved_cold_warehouse}")
        with hot_tier(settings) as dsn:
            manifest = asyncio.run(
                backup(settings, Path(args.dir), dsn=dsn, say=progress, lock_wait_s=args.wait, timeout_s=args.timeout)
            )
    if args.json:
        print(json.dumps(manifest, indent=2, ensure_ascii=False))
        return EXIT_OK
    hot, cold = manifest["hot"]["tables"], manifest["cold"]["tables"]
    print(f"backup {args.dir}: schema {manifest['schema']['version']}, {hot.get('memories', 0)} hot memories")
    for table in cold:
        print(
            f"  cold {table['identifier']}: snapshot {table['snapshot_id']}, {table['data_files']} data file(s), "
            f"{table['records']} row(s)"
        )
    return EXIT_OK


def cmd_restore(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.backup import restore, verify
    from cabrain.store.db import describe_target, hot_tier

    _check_timeouts(args)
    with for_terminal(args.quiet) as progress:
        manifest = verify(Path(args.dir).expanduser().absolute(), progress)  # before anything starts or changes
        progress(f"backup of {manifest['created_at']} verified: {len(manifest['files'])} file(s) match their checksums")
        progress(
            f"restoring {args.dir} into {describe_target(settings)} and the cold tier at "
            f"{settings.resolved_cold_warehouse}"
        )
        with hot_tier(settings) as dsn:
            report = asyncio.run(
                restore(
                    settings,
                    Path(args.dir),
                    dsn=dsn,
                    force=args.force,
                    say=progress,
                    timeout_s=args.timeout,
                    manifest=manifest,
                )
            )
    width = max((len(t) for t in report.expected.keys() | report.restored.keys()), default=5)
    print(f"{'table':{width}s} {'backup':>10s} {'restored':>10s}")
    for table in sorted(report.expected.keys() | report.restored.keys()):
        expected, restored = report.expected.get(table, "-"), report.restored.get(table, "-")
        mark = "  DIFFERS" if table in report.mismatches else ""
        print(f"{table:{width}s} {expected:>10} {restored:>10}{mark}")
    for cold in report.cold_tables:
        print(f"cold {cold['identifier']}: snapshot {cold['snapshot_id']}, {cold['data_files']} data file(s)")
    print(f"{report.catalog}; schema {report.schema}; {report.sleep_role}")
    if report.pruned:
        print(f"removed {report.pruned} cold row(s) of demotion batches the restored database does not know")
    if report.mismatches:
        print(f"restore: counts differ from the backup's for {', '.join(report.mismatches)}", file=sys.stderr)
        return EXIT_FAIL
    print("restore: every count matches the backup's")
    return EXIT_OK


def _timeout_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--timeout",
        type=float,
        default=14400.0,
        metavar="SECONDS",
        help=f"give up on {what} after this long (default 4 h)",
    )


def add_backup(sub: Subparsers) -> None:
    backup = sub.add_parser(
        "backup",
        help="back up the hot and the cold tier into a new folder",
        description="Write DIR/manifest.json, DIR/hot.dump (pg_dump of one snapshot of the hot tier) and DIR/cold/ "
        "(the Iceberg catalog and warehouse, copied after the snapshot), with the sha256 of every file. Sleep cycles "
        "pause meanwhile; retains and recalls go on. An s3:// warehouse is copied object by object.",
        parents=[json_flag("print the manifest as JSON"), quiet_flag()],
    )
    backup.add_argument("dir", metavar="DIR", help="a new or empty folder")
    backup.add_argument(
        "--wait",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for a running sleep cycle to end (default 300)",
    )
    _timeout_option(backup, "pg_dump")
    backup.set_defaults(func=cmd_backup)


def add_restore(sub: Subparsers) -> None:
    restore = sub.add_parser(
        "restore",
        help="restore a backup into an empty database and home",
        description="Check every file of DIR against the manifest, then restore the hot tier (pg_restore, creating "
        "the database or starting the embedded one) and the cold tier (its files moved to the configured warehouse), "
        "check the schema and compare the row counts with the backup's. Refuses a target that holds data.",
        parents=[quiet_flag()],
    )
    restore.add_argument("dir", metavar="DIR", help="a folder `cabrain backup` wrote")
    restore.add_argument(
        "--force", action="store_true", help="replace the database and cold tier the target holds (says what)"
    )
    _timeout_option(restore, "pg_restore")
    restore.set_defaults(func=cmd_restore)
