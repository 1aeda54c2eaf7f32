"""``cabrain migrate``, ``doctor``, ``up`` and ``down``: the schema, the checks and the running service."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading

from cabrain.cli.common import EXIT_FAIL, EXIT_OK, Subparsers, json_flag, read_app_config, serve_config
from cabrain.settings import Settings, unknown_variables


# --- migrate -----------------------------------------------------------------------------------------------
def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity
    from cabrain.providers.embedders import load_embedder  # lazy, here and below: start-up time (common.py)
    from cabrain.service import admin_line
    from cabrain.store import migrations
    from cabrain.store.db import check_server, connect, describe_target, hot_tier, server_facts

    dim = settings.embedding_dim or load_embedder(settings).dim

    async def run(dsn: str) -> int:
        conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
        try:
            check_server(await server_facts(conn))
            if args.dry_run:
                state = await migrations.inspect(conn, settings.schema_dir)
                migrations.check_embedding_dim(state, dim, settings.embedding_model)
                print(f"schema: {state.version}; pending: {', '.join(state.pending) or 'none'}")
                return EXIT_FAIL if state.edited or state.unknown else EXIT_OK
            report = await migrations.migrate(
                conn, settings.schema_dir, embedding_dim=dim, embedding_model=settings.embedding_model
            )
            # the first admin, once per database, as `cabrain up` makes it: the commands that work on
            # the hot tier without a service act as it (--as admin)
            admin = await identity.ensure_admin_key(conn, settings.home)
        finally:
            await conn.close()
        if report.applied:
            print(f"applied {len(report.applied)} migration(s): {', '.join(report.applied)}")
        else:
            print(f"schema up to date ({len(report.already_applied)} migrations)")
        print(f"partitions: {', '.join(report.partitions)}")
        print(report.sleep_role)
        print(admin_line(admin))
        return EXIT_OK

    print(f"migrating {describe_target(settings)}")
    with hot_tier(settings) as dsn:
        return asyncio.run(run(dsn))


def add_migrate(sub: Subparsers) -> None:
    migrate = sub.add_parser(
        "migrate",
        help="create or upgrade the database schema",
        description="Apply pending migrations from cabrain/schema/ in one transaction (safe to run "
        "concurrently; re-running is a no-op), create monthly partitions and the sleep role, and on the first "
        "run the first admin and its key (CABRAIN_HOME/admin.key), as cabrain up does.",
    )
    migrate.add_argument("--dry-run", action="store_true", help="list pending migrations only")
    migrate.set_defaults(func=cmd_migrate)


# --- doctor ------------------------------------------------------------------------------------------------
def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.doctor import Status, render, run_doctor

    checks = asyncio.run(run_doctor(settings, unknown=unknown_variables(dict(os.environ))))
    if args.json:
        print(json.dumps([c.as_dict() for c in checks], ensure_ascii=False, indent=2))
    else:
        print(render(checks))
    failed = [c.name for c in checks if c.status is Status.FAIL]
    if failed:
        if not args.json:
            print(f"\ndoctor: {len(failed)} check(s) failed: {', '.join(failed)}", file=sys.stderr)
        return EXIT_FAIL
    if not args.json:
        print("\ndoctor: all checks passed")
    return EXIT_OK


def add_doctor(sub: Subparsers) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="check the database, schema, models, cache and cold tier",
        description="Check every dependency and print a table; exits 1 if any check fails.",
        parents=[json_flag("print the checks as JSON")],
    )
    # doctor reports unknown CABRAIN_* variables as one of its checks: main() does not warn of them
    doctor.set_defaults(func=cmd_doctor, warn_unknown=False)


# --- up and down -------------------------------------------------------------------------------------------
def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import service

    app_args = read_app_config(args.config) if args.config else None
    stopped = service.up(settings, app_args=app_args)
    if stopped and threading.current_thread() is threading.main_thread():
        # Ctrl-C (or SIGTERM) stopped everything `up` started. What is left is the interpreter's teardown of the
        # torch and Ray it imported: seconds spent on nothing, so the process ends now.
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(EXIT_OK)
    return EXIT_OK


def cmd_down(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import service

    print("removed the cabrain application" if service.down(settings) else "no cabrain application was deployed")
    return EXIT_OK


def add_up(sub: Subparsers) -> None:
    up = sub.add_parser(
        "up",
        help="run CaBrain: database, Ray, the HTTP API",
        description="Start the embedded PostgreSQL (unless CABRAIN_DATABASE_URL is set), migrate, create "
        "an admin key on first run, start a local Ray (or use CABRAIN_RAY_ADDRESS) and deploy the HTTP API on "
        "CABRAIN_API_HOST:CABRAIN_API_PORT (127.0.0.1:8000). Ctrl-C stops everything it started.",
        parents=[serve_config("Serve config (YAML) or application args: replicas, CPUs, GPUs, batch sizes")],
    )
    up.set_defaults(func=cmd_up)


def add_down(sub: Subparsers) -> None:
    down = sub.add_parser(
        "down",
        help="remove the app from the Ray cluster at CABRAIN_RAY_ADDRESS",
        description="Delete the cabrain Serve application from a cluster `cabrain up` deployed onto.",
    )
    down.set_defaults(func=cmd_down)
