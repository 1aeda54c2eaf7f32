"""``cabrain db status|stop|shell|replica``: the embedded PostgreSQL."""

from __future__ import annotations

import argparse
import signal
import subprocess
import threading
from pathlib import Path

from cabrain.cli.common import EXIT_OK, PASS_THROUGH, Subparsers
from cabrain.errors import ConfigError
from cabrain.settings import Settings


def cmd_db_status(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.db import describe_target  # lazy, here and below: start-up time (common.py)
    from cabrain.store.embedded import EmbeddedPostgres

    if not settings.embedded:
        print(f"hot tier: {describe_target(settings)} (external; not managed by cabrain)")
        return EXIT_OK
    status = EmbeddedPostgres.from_settings(settings).status()
    print(f"data directory : {status.data_dir} ({'initialised' if status.initialised else 'not initialised yet'})")
    print(f"server         : {'running, pid ' + str(status.pid) if status.running else 'stopped'}")
    print(f"socket         : {status.socket_dir}")
    print(f"used by        : {', '.join(map(str, status.leases)) or 'no process'}")
    return EXIT_OK


def cmd_db_stop(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.embedded import EmbeddedPostgres

    if not settings.embedded:
        raise ConfigError(
            "CABRAIN_DATABASE_URL is set: that server is not managed by cabrain",
            hint="stop it with its own tools, or unset the variable to manage the embedded server",
        )
    EmbeddedPostgres.from_settings(settings).stop(force=args.force)
    print("embedded PostgreSQL stopped")
    return EXIT_OK


def cmd_db_shell(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.db import hot_tier
    from cabrain.store.embedded import wheel_install_dir

    psql = str(wheel_install_dir() / "bin" / "psql")
    with hot_tier(settings) as dsn:
        return subprocess.call([psql, dsn, *args.psql_args])


def cmd_db_replica(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.embedded import EmbeddedPostgres, EmbeddedReplica

    if not settings.embedded:
        raise ConfigError(
            "CABRAIN_DATABASE_URL is set: `cabrain db replica` copies the embedded server, which is not in use",
            hint="make a replica of that server with its own tools (pg_basebackup -R), then list its URL in "
            "CABRAIN_DATABASE_REPLICA_URLS",
        )
    primary = EmbeddedPostgres.from_settings(settings)
    replica = EmbeddedReplica(
        Path(args.dir),
        primary,
        start_timeout_s=settings.embedded_pg_start_timeout_s,
        reaper_interval_s=settings.embedded_pg_reaper_interval_s,
        shared_buffers=settings.embedded_pg_shared_buffers,
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    primary.acquire()  # the replica follows it: both run while this command does
    try:
        made = (replica.data_dir / "PG_VERSION").exists()
        replica.acquire()
        try:
            print(f"replica {'started' if made else 'copied and started'} in {replica.data_dir}")
            print("reads go to it once the service runs with:")
            print(f"CABRAIN_DATABASE_REPLICA_URLS={replica.dsn()}", flush=True)
            print("Ctrl-C (or SIGTERM) stops it.", flush=True)
            stop.wait()
        finally:
            replica.release()
    finally:
        primary.release()
    print("replica stopped")
    return EXIT_OK


def add_db(sub: Subparsers) -> None:
    db = sub.add_parser(
        "db",
        help="manage the embedded PostgreSQL",
        description="Inspect or control the embedded PostgreSQL (used when CABRAIN_DATABASE_URL is unset).",
    )
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    status = db_sub.add_parser(
        "status",
        help="show where it lives and whether it runs",
        description="Show the data directory, server pid and the processes using it.",
    )
    status.set_defaults(func=cmd_db_status)
    stop = db_sub.add_parser(
        "stop",
        help="stop the server now",
        description="Stop the embedded server; refuses while other CaBrain processes use it.",
    )
    stop.add_argument("--force", action="store_true", help="stop it even while in use")
    stop.set_defaults(func=cmd_db_stop)
    shell = db_sub.add_parser(
        "shell",
        help="open psql on the hot tier",
        description="Run psql against the hot tier (starting the embedded server meanwhile).",
    )
    shell.add_argument("psql_args", nargs=argparse.REMAINDER, help="extra arguments for psql")
    # options psql takes and argparse does not know (cabrain db shell -c '\dt') go to psql too
    shell.set_defaults(func=cmd_db_shell, **{PASS_THROUGH: "psql_args"})
    replica = db_sub.add_parser(
        "replica",
        help="run a streaming replica of it, for reads",
        description="Copy the embedded server into DIR with its own pg_basebackup (the first time) and run it as "
        "a hot standby that follows the primary, on a private unix socket, until Ctrl-C. Prints the URL to put in "
        "CABRAIN_DATABASE_REPLICA_URLS: recall, get, browse and export then read from it.",
    )
    replica.add_argument("dir", help="the replica's folder (outside CABRAIN_HOME/pg); made on first use")
    replica.set_defaults(func=cmd_db_replica)
