"""``cabrain db status|stop|shell``: the embedded PostgreSQL."""

from __future__ import annotations

import argparse
import subprocess

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
