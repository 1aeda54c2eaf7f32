"""The ``cabrain`` command line.

Exit codes: 0 success, 1 a check or operation failed (the message says why and how to fix it),
2 bad usage or settings, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable, Sequence

from cabrain import __version__
from cabrain.errors import CabrainError, ConfigError
from cabrain.settings import Settings, load_settings

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


# --- commands ----------------------------------------------------------------------------------
def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.providers.embedders import load_embedder
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
        finally:
            await conn.close()
        if report.applied:
            print(f"applied {len(report.applied)} migration(s): {', '.join(report.applied)}")
        else:
            print(f"schema up to date ({len(report.already_applied)} migrations)")
        print(f"partitions: {', '.join(report.partitions)}")
        print(report.sleep_role)
        return EXIT_OK

    print(f"migrating {describe_target(settings)}")
    with hot_tier(settings) as dsn:
        return asyncio.run(run(dsn))


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.doctor import Status, render, run_doctor

    checks = asyncio.run(run_doctor(settings))
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


def cmd_db_status(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.db import describe_target
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
    import subprocess

    from cabrain.store.db import hot_tier
    from cabrain.store.embedded import wheel_install_dir

    psql = str(wheel_install_dir() / "bin" / "psql")
    with hot_tier(settings) as dsn:
        return subprocess.call([psql, dsn, *args.psql_args])


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from cabrain import eval as evaluation
    from cabrain.errors import InputError

    try:
        ks = [int(k) for k in args.k.split(",") if k.strip()]
    except ValueError:
        raise InputError(f"--k must be comma-separated integers, got {args.k!r}") from None
    modes = [m for group in (args.mode or ["vector,bm25,hybrid"]) for m in group.split(",") if m]
    results = asyncio.run(
        evaluation.run_eval(settings, Path(args.dataset), modes=modes, ks=ks, quiet=args.quiet)
    )
    print(evaluation.render(results, ks))
    if args.json:
        Path(args.json).write_text(
            json.dumps(evaluation.to_json(results, settings), ensure_ascii=False, indent=2) + "\n"
        )
        print(f"\nresults written to {args.json}")
    return EXIT_OK


def cmd_bench_recall(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from cabrain import bench
    from cabrain.errors import InputError

    if args.memories < 1 or args.queries < 1 or args.real_vectors < 1:
        raise InputError("--memories, --queries and --real-vectors must be at least 1")
    result = asyncio.run(
        bench.run_recall_bench(
            settings, memories=args.memories, queries=args.queries, real_vectors=args.real_vectors,
            noise=args.noise, quiet=args.quiet,
        )
    )  # fmt: skip
    print(bench.render(result))
    if args.json:
        Path(args.json).write_text(bench.main_json(result) + "\n")
        print(f"\nresults written to {args.json}")
    return EXIT_OK


# --- parser ------------------------------------------------------------------------------------
Command = Callable[[Settings, argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cabrain",
        description="CaBrain: self-hosted shared memory for AI agents. "
        "Settings come from CABRAIN_* environment variables (see README).",
    )
    parser.add_argument("--version", action="version", version=f"cabrain {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    migrate = sub.add_parser(
        "migrate",
        help="create or upgrade the database schema",
        description="Apply pending migrations from schema/ in one transaction (safe to run "
        "concurrently; re-running is a no-op), create monthly partitions and the sleep role.",
    )
    migrate.add_argument("--dry-run", action="store_true", help="list pending migrations only")
    migrate.set_defaults(func=cmd_migrate)

    doctor = sub.add_parser(
        "doctor",
        help="check the database, schema, models, cache and cold tier",
        description="Check every dependency and print a table; exits 1 if any check fails.",
    )
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.set_defaults(func=cmd_doctor)

    ev = sub.add_parser(
        "eval",
        help="measure recall quality on question -> passage sets",
        description="Load each set (a folder with corpus.jsonl and queries.jsonl, or a folder of "
        "such folders) into a scratch database and report hit@k (recall_any@k), recall_all@k, MRR, "
        "nDCG@10 and latency percentiles for every mode side by side. See docs/EVAL.md.",
    )
    ev.add_argument("dataset", help="a set folder, or a folder of set folders")
    ev.add_argument("--k", default="1,5,10,20", help="cut-offs, comma-separated (default 1,5,10,20)")
    ev.add_argument(
        "--mode", action="append", default=None,
        help="vector, bm25, hybrid, hybrid+rerank; repeat or comma-separate (default vector,bm25,hybrid)",
    )  # fmt: skip
    ev.add_argument("--json", metavar="FILE", help="also write the full results as JSON")
    ev.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ev.set_defaults(func=cmd_eval)

    bench = sub.add_parser(
        "bench", help="measure performance", description="Performance benchmarks (see docs/BENCHMARKS.md)."
    )
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="BENCH", required=True)
    br = bench_sub.add_parser(
        "recall",
        help="recall latency at N memories in one namespace",
        description="Load N synthetic memories (real vectors for --real-vectors of them, derived "
        "vectors for the rest) into a scratch database and report recall p50/p95/p99 per mode, "
        "with the query embedding time apart.",
    )
    br.add_argument("--memories", type=int, default=100_000, help="corpus size (default 100000)")
    br.add_argument("--queries", type=int, default=300, help="recalls timed per mode (default 300)")
    br.add_argument("--real-vectors", type=int, default=2000, help="memories embedded for real (default 2000)")
    br.add_argument("--noise", type=float, default=0.02, help="per-dimension noise of derived vectors")
    br.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    br.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    br.set_defaults(func=cmd_bench_recall)

    db = sub.add_parser(
        "db",
        help="manage the embedded PostgreSQL",
        description="Inspect or control the embedded PostgreSQL (used when CABRAIN_DATABASE_URL is unset).",
    )
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    status = db_sub.add_parser("status", help="show where it lives and whether it runs",
                               description="Show the data directory, server pid and the processes using it.")
    status.set_defaults(func=cmd_db_status)
    stop = db_sub.add_parser("stop", help="stop the server now",
                             description="Stop the embedded server; refuses while other CaBrain processes use it.")
    stop.add_argument("--force", action="store_true", help="stop it even while in use")
    stop.set_defaults(func=cmd_db_stop)
    shell = db_sub.add_parser("shell", help="open psql on the hot tier",
                              description="Run psql against the hot tier (starting the embedded server meanwhile).")
    shell.add_argument("psql_args", nargs=argparse.REMAINDER, help="extra arguments for psql")
    shell.set_defaults(func=cmd_db_shell)
    return parser


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    # SIGTERM unwinds like Ctrl-C, so context managers release the embedded server.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        settings = load_settings()
        from cabrain import logs

        logs.configure(settings.log_level)
        return args.func(settings, args)
    except ConfigError as exc:
        print(f"cabrain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CabrainError as exc:
        print(f"cabrain: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("cabrain: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
