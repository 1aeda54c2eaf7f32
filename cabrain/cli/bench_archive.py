"""``cabrain bench archive``: archive recall scanned and through the cold index, on synthetic rows at
scale (:mod:`cabrain.bench.archive`) or on a question -> passage set (:mod:`cabrain.bench.archive_corpus`)."""

from __future__ import annotations

import argparse
import asyncio
import json

from cabrain.cli.common import EXIT_OK, Subparsers, int_list, json_file, quiet_flag, write_results
from cabrain.errors import UsageError
from cabrain.settings import Settings


def cmd_bench_archive(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.bench.archive import render_archive, run_archive_bench

    if args.corpus is not None:
        return _bench_archive_corpus(settings, args)
    sizes = int_list(args.rows, "--rows")
    args.queries = 10 if args.queries is None else args.queries
    if not sizes or min(sizes) < 1 or args.queries < 1 or args.k < 1 or args.real_vectors < 1:
        raise UsageError("--rows sizes, --queries, --k and --real-vectors must be at least 1")
    if (args.probes is not None and args.probes < 1) or (args.exact_queries is not None and args.exact_queries < 1):
        raise UsageError("--probes and --exact-queries must be at least 1")
    result = asyncio.run(
        run_archive_bench(
            settings,
            sizes=sizes,
            queries=args.queries,
            k=args.k,
            probes=args.probes,
            exact_queries=args.exact_queries,
            real=args.real_vectors,
            quiet=args.quiet,
        )
    )
    print(render_archive(result))
    write_results(args.json, json.dumps(result, indent=2, default=str) + "\n")
    return EXIT_OK


def _bench_archive_corpus(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from cabrain.bench.archive_corpus import render_corpus, run_archive_corpus_bench

    if args.k < 1 or (args.probes is not None and args.probes < 1) or (args.queries is not None and args.queries < 1):
        raise UsageError("--k, --probes and --queries must be at least 1")
    result = asyncio.run(
        run_archive_corpus_bench(
            settings, Path(args.corpus), queries=args.queries, k=args.k, probes=args.probes, quiet=args.quiet
        )
    )
    print(render_corpus(result))
    write_results(args.json, json.dumps(result, indent=2, default=str) + "\n")
    return EXIT_OK


def add_bench_archive(bench_sub: Subparsers) -> None:
    ba = bench_sub.add_parser(
        "archive",
        help="archive recall over N cold rows: the exact scan beside the cold tier's vector index",
        description="Make N synthetic cold rows directly in the Iceberg format (in a scratch database and a "
        "temporary warehouse, removed after), build the namespace's vector index as the sleep cycle's maintain "
        "does, and time archive recall (hybrid and vector) scanning every row and through the index: p50/p95, rows "
        "read per query, and the index's recall@k against the scan. Sizes grow one from the last.",
        parents=[json_file(), quiet_flag()],
    )
    ba.add_argument("--rows", default="100000", help="cold rows, comma-separated sizes (default 100000)")
    ba.add_argument(
        "--queries",
        type=int,
        default=None,
        help="archive recalls timed each way per size and mode (default 10; with --corpus: every question)",
    )
    ba.add_argument(
        "--corpus",
        default=None,
        metavar="DIR",
        help="instead of synthetic rows: a question -> passage set (corpus.jsonl, queries.jsonl), really "
        "embedded; reports the index's recall@k against the scan and both's hit@k on its gold passages",
    )
    ba.add_argument("--k", type=int, default=10, help="hits per recall (default 10)")
    ba.add_argument("--probes", type=int, default=None, help="clusters read (default CABRAIN_COLD_INDEX_PROBES)")
    ba.add_argument("--real-vectors", type=int, default=256, help="texts really embedded (default 256)")
    ba.add_argument(
        "--exact-queries", type=int, default=None, help="of those, how many also scan every row (default all)"
    )
    ba.set_defaults(func=cmd_bench_archive)


__all__ = ["add_bench_archive", "cmd_bench_archive"]
