"""``cabrain bench replicas``: recall on the primary, then spread over streaming replicas (:mod:`cabrain.bench.replicas`)."""

from __future__ import annotations

import argparse
import asyncio

from cabrain.cli.common import EXIT_OK, Subparsers, json_file, quiet_flag, synthetic_vectors, write_results
from cabrain.errors import UsageError
from cabrain.settings import Settings


def cmd_bench_replicas(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.bench.replicas import render_replicas, replicas_json, run_replica_bench
    from cabrain.types import RecallMode

    if args.memories < 1 or args.queries < 1 or args.replicas < 0 or args.concurrency < 1:
        raise UsageError("--memories, --queries and --concurrency must be at least 1, --replicas at least 0")
    result = asyncio.run(
        run_replica_bench(
            settings,
            memories=args.memories,
            queries=args.queries,
            replicas=args.replicas,
            concurrency=args.concurrency,
            mode=RecallMode(args.mode),
            real_vectors=args.real_vectors,
            noise=args.noise,
            quiet=args.quiet,
        )
    )
    print(render_replicas(result))
    write_results(args.json, replicas_json(result) + "\n")
    return EXIT_OK


def add_bench_replicas(bench_sub: Subparsers) -> None:
    bq = bench_sub.add_parser(
        "replicas",
        help="recall on the primary, then spread over streaming replicas of the embedded server",
        description="Load N synthetic memories into a scratch database of the embedded server and time the same "
        "recalls at --concurrency on the primary alone, then with 1 .. --replicas streaming replicas (made with "
        "pg_basebackup, removed afterwards), and a recall that names the write before it (read-your-writes).",
        parents=[synthetic_vectors(), json_file(), quiet_flag()],
    )
    bq.add_argument("--memories", type=int, default=10_000, help="corpus size (default 10000)")
    bq.add_argument("--queries", type=int, default=300, help="recalls timed per setup (default 300)")
    bq.add_argument("--replicas", type=int, default=2, help="most replicas (default 2)")
    bq.add_argument("--concurrency", type=int, default=8, help="recalls at once (default 8)")
    bq.add_argument(
        "--mode",
        choices=["hybrid", "vector", "bm25"],
        default="bm25",
        help="recall mode (default bm25: no query embedding, all of it in the database)",
    )
    bq.set_defaults(func=cmd_bench_replicas)
