"""``cabrain eval`` and ``cabrain bench``: recall quality, write and sleep decisions, performance."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from cabrain.cli.bench_archive import add_bench_archive
from cabrain.cli.bench_replicas import add_bench_replicas
from cabrain.cli.bench_workflows import add_bench_workflows
from cabrain.cli.common import (
    EXIT_OK,
    Subparsers,
    int_list,
    json_file,
    quiet_flag,
    read_app_config,
    serve_config,
    synthetic_vectors,
    write_results,
)
from cabrain.errors import UsageError
from cabrain.settings import Settings


# --- eval --------------------------------------------------------------------------------------------------
def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import eval as evaluation  # lazy, here and below: start-up time (common.py)

    if args.dataset == "decisions":
        return _eval_decisions(settings, args)
    if args.dataset == "facts":
        return _eval_facts(settings, args)
    if args.pairs is not None or args.decider is not None or args.corpus is not None:
        raise UsageError(
            f"unexpected {args.pairs or '--decider or --corpus'}: a second set belongs to `cabrain eval decisions SET`"
            " or `cabrain eval facts SET`"
        )
    ks = int_list(args.k, "--k")
    modes = [m for group in (args.mode or ["vector,bm25,hybrid"]) for m in group.split(",") if m]
    results = asyncio.run(
        evaluation.run_eval(
            settings,
            Path(args.dataset),
            modes=modes,
            ks=ks,
            quiet=args.quiet,
            decide=args.decide,
            dialogues=[d for group in (args.dialogue or []) for d in group.split(",") if d],
        )
    )
    print(evaluation.render(results, ks))
    write_results(args.json, json.dumps(evaluation.to_json(results, settings), ensure_ascii=False, indent=2) + "\n")
    return EXIT_OK


def _eval_facts(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import eval_facts

    if args.pairs is None:
        raise UsageError(
            "cabrain eval facts needs a facts set: a folder with facts.jsonl (and summaries.jsonl)",
            hint="cabrain eval facts ../shared/eval/dev/locomo-dev-facts",
        )
    if args.mode or args.k != "1,5,10,20" or args.decide or args.decider or args.dialogue:
        raise UsageError("`cabrain eval facts` takes --corpus and --threshold only")
    result = asyncio.run(
        eval_facts.evaluate(
            settings,
            Path(args.pairs),
            Path(args.corpus) if args.corpus else None,
            threshold=args.threshold,
            quiet=args.quiet,
        )
    )
    print(eval_facts.render(result))
    write_results(args.json, eval_facts.to_json(result))
    return EXIT_OK


def _eval_decisions(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import eval_conversations, eval_decisions

    if args.pairs is None:
        raise UsageError(
            "cabrain eval decisions needs a set: a .jsonl file of labelled pairs or a folder of them",
            hint="cabrain eval decisions eval/decisions",
        )
    if args.mode or args.k != "1,5,10,20" or args.decide or args.dialogue:
        raise UsageError("--mode, --k and --decide measure recall; `cabrain eval decisions` takes --decider")
    if eval_conversations.is_conversation_set(Path(args.pairs)):
        if args.decider not in (None, "deterministic"):
            raise UsageError("on conversations `cabrain eval decisions` measures the deterministic rules")
        conversations = asyncio.run(
            eval_conversations.run_conversation_eval(settings, Path(args.pairs), quiet=args.quiet)
        )
        print(eval_conversations.render(conversations))
        write_results(
            args.json,
            json.dumps(eval_conversations.to_json(conversations, settings), ensure_ascii=False, indent=2) + "\n",
        )
        return EXIT_OK
    results = asyncio.run(
        eval_decisions.run_decision_eval(
            settings, Path(args.pairs), decider=args.decider or "deterministic", quiet=args.quiet
        )
    )
    print(eval_decisions.render(results))
    write_results(args.json, json.dumps(eval_decisions.to_json(results, settings), ensure_ascii=False, indent=2) + "\n")
    return EXIT_OK


def add_eval(sub: Subparsers) -> None:
    ev = sub.add_parser(
        "eval",
        help="measure recall quality, or the write and sleep decisions (eval decisions SET)",
        description="Load each set (a folder with corpus.jsonl and queries.jsonl, or a folder of "
        "such folders) into a scratch database and report hit@k (recall_any@k), recall_all@k, MRR, "
        "nDCG@10 and latency percentiles for every mode side by side. `cabrain eval decisions SET` "
        "instead plays labelled statement pairs (a .jsonl file or a folder of them) through retain "
        "and sleep and reports precision and recall per decision and the false-supersede rate; given a "
        "conversation set (the format above) it loads it with decisions on and reports every turn they "
        "took out of recall, by same or other speaker. See docs/EVAL.md.",
        parents=[json_file("also write the full results as JSON"), quiet_flag()],
    )
    ev.add_argument("dataset", help="a set folder, or a folder of set folders; or the word `decisions` or `facts`")
    ev.add_argument(
        "pairs",
        nargs="?",
        help="with `decisions`: a .jsonl file of labelled pairs, or a folder of them; or a conversation set",
    )
    ev.add_argument(
        "--decider",
        choices=["deterministic", "llm"],
        default=None,
        help="with `decisions`: the write decider measured (default deterministic; llm needs CABRAIN_LLM_URL)",
    )
    ev.add_argument("--corpus", default=None, help="with `facts`: the conversations the facts came from")
    ev.add_argument(
        "--threshold",
        type=float,
        default=0.6,
        help="with `facts`: the judge's cosine at or above which two facts match (default 0.6)",
    )
    ev.add_argument(
        "--decide",
        action="store_true",
        help="load the corpus through the write decisions, as chat sources do (default: every row added)",
    )
    ev.add_argument(
        "--dialogue",
        action="append",
        help="also ask each question as the latest turn of a dialogue: filler (after a greeting), referent "
        "(the people it asks about named only in an earlier turn), followup (the question an earlier turn, the "
        "latest a request that says nothing of its own); comma-separated",
    )
    ev.add_argument("--k", default="1,5,10,20", help="cut-offs, comma-separated (default 1,5,10,20)")
    ev.add_argument(
        "--mode",
        action="append",
        default=None,
        help="vector, bm25, hybrid, hybrid+rerank; repeat or comma-separate (default vector,bm25,hybrid)",
    )
    ev.set_defaults(func=cmd_eval)


# --- bench -------------------------------------------------------------------------------------------------
def cmd_bench_all(settings: Settings, args: argparse.Namespace) -> int:
    """``cabrain bench`` without a sub-command: every measurement at every size, in one run."""
    from cabrain.bench import scale as bench_scale

    sizes = int_list(args.sizes, "--sizes")
    levels = int_list(args.concurrency, "--concurrency")
    if not sizes or min(sizes) < 100:
        raise UsageError("--sizes must be corpus sizes of at least 100, comma-separated")
    if not levels or min(levels) < 1 or 1 not in levels:
        raise UsageError("--concurrency must be levels of at least 1 and include 1 (the floor is compared at 1)")
    if args.namespaces < 1 or args.queries < 1 or args.retain_texts < 2 or args.real_vectors < 1:
        raise UsageError("--namespaces, --queries and --real-vectors must be at least 1, --retain-texts at least 2")
    spec = bench_scale.ScaleSpec(
        sizes=sizes,
        namespaces=args.namespaces,
        queries=args.queries,
        concurrency=levels,
        retain_texts=args.retain_texts,
        http=not args.no_http,
        keep=args.keep,
        real_vectors=args.real_vectors,
        noise=args.noise,
        maintenance_work_mem=args.maintenance_work_mem,
        app_args=read_app_config(args.config) if args.config else None,
        out=Path(args.out),
        plot=not args.no_plot,
        quiet=args.quiet,
    )
    results = asyncio.run(bench_scale.run(settings, spec))
    print(bench_scale.render(results))
    print(
        f"\nresults written to {spec.out / 'results.json'}" + (f" and {spec.out / 'latency.png'}" if spec.plot else "")
    )
    return EXIT_OK


def cmd_bench_recall(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import bench

    if args.memories < 1 or args.queries < 1 or args.real_vectors < 1:
        raise UsageError("--memories, --queries and --real-vectors must be at least 1")
    result = asyncio.run(
        bench.run_recall_bench(
            settings,
            memories=args.memories,
            queries=args.queries,
            real_vectors=args.real_vectors,
            noise=args.noise,
            quiet=args.quiet,
        )
    )
    print(bench.render(result))
    write_results(args.json, bench.main_json(result) + "\n")
    return EXIT_OK


def cmd_bench_portable(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.bench.portable import render_portable, run_portable_bench

    if args.memories < 1 or not 1 <= args.sample <= args.memories:
        raise UsageError("--memories must be at least 1, and --sample between 1 and --memories")
    if args.bulk_sample is not None and not 1 <= args.bulk_sample <= args.memories:
        raise UsageError("--bulk-sample must be between 1 and --memories")
    result = asyncio.run(
        run_portable_bench(
            settings,
            memories=args.memories,
            sample=args.sample,
            bulk_sample=args.bulk_sample,
            keep=not args.scratch,
            quiet=args.quiet,
        )
    )
    print(render_portable(result))
    write_results(args.json, json.dumps(result, indent=2, default=str) + "\n")
    return EXIT_OK


def cmd_bench_counts(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.bench.counts import render_counts, run_counts_bench

    if args.batch < 1 or args.rounds < 2 or args.rounds % 2:
        raise UsageError("--batch must be at least 1, and --rounds an even number of at least 2")
    result = asyncio.run(run_counts_bench(settings, batch=args.batch, rounds=args.rounds, quiet=args.quiet))
    print(render_counts(result))
    write_results(args.json, json.dumps(result, indent=2, default=str) + "\n")
    return EXIT_OK


def cmd_bench_http(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import bench

    levels = int_list(args.concurrency, "--concurrency")
    if not levels or min(levels) < 1 or args.memories < 1 or args.queries < 1:
        raise UsageError("--concurrency levels, --memories and --queries must be at least 1")
    app_args = read_app_config(args.config) if args.config else None
    result = asyncio.run(
        bench.run_http_bench(
            settings,
            memories=args.memories,
            queries=args.queries,
            concurrency=levels,
            app_args=app_args,
            quiet=args.quiet,
        )
    )
    print(bench.render_http(result))
    write_results(args.json, json.dumps(result.as_dict(), indent=2) + "\n")
    return EXIT_OK


def cmd_bench_capture(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import bench

    if args.events < 1:
        raise UsageError("--events must be at least 1")
    app_args = read_app_config(args.config) if args.config else None
    result = asyncio.run(bench.run_capture_bench(settings, events=args.events, app_args=app_args, quiet=args.quiet))
    print(bench.render_capture(result))
    write_results(args.json, json.dumps(result, indent=2) + "\n")
    return EXIT_OK


def cmd_bench_sleep(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.bench import sleep as bench_sleep

    nodes = int_list(args.nodes, "--nodes")
    if not nodes or min(nodes) < 1 or args.memories < 10 or args.namespaces < 1 or args.cpus_per_node < 1:
        raise UsageError(
            "--nodes and --cpus-per-node must be at least 1, --namespaces at least 1, --memories at least 10"
        )
    result = bench_sleep.main_run(
        settings,
        memories=args.memories,
        namespaces=args.namespaces,
        nodes=nodes,
        cpus_per_node=args.cpus_per_node,
        archive_queries=args.archive_queries,
        quiet=args.quiet,
    )
    print(bench_sleep.render_sleep(result))
    write_results(args.json, json.dumps(result, indent=2, default=str) + "\n")
    return EXIT_OK


def add_bench(sub: Subparsers) -> None:
    bench = sub.add_parser(
        "bench",
        help="measure performance",
        description="Without BENCH: the whole picture in one run. For each --sizes N, build a synthetic corpus (N "
        "memories in one namespace, N/100 in each of the others; mixed Arabic and English) and measure retain "
        "throughput against the bare embedder, recall p50/p95/p99 at each concurrency in process (no cache, L1 "
        "cache miss and hit, reranked when a reranker is configured) and over HTTP, the floor (query embedding, "
        "bare HNSW and BM25 probes) and the service's memory. Writes OUT/results.json and OUT/latency.png. "
        "See docs/BENCHMARKS.md.",
        parents=[
            synthetic_vectors(),
            serve_config("Serve config or app args for the HTTP measurements"),
            quiet_flag(),
        ],
    )
    bench.add_argument("--sizes", default="10000,100000", help="corpus sizes, comma-separated (default 10000,100000)")
    bench.add_argument("--namespaces", type=int, default=20, help="namespaces; the first is the large one (default 20)")
    bench.add_argument("--queries", type=int, default=200, help="recalls timed per measurement (default 200)")
    bench.add_argument("--concurrency", default="1,8,32", help="levels, comma-separated, including 1 (default 1,8,32)")
    bench.add_argument("--retain-texts", type=int, default=512, help="texts retained in batches (default 512)")
    bench.add_argument(
        "--keep",
        action="store_true",
        help="keep each corpus in a database of its own and reuse it while its parameters match",
    )
    bench.add_argument(
        "--maintenance-work-mem",
        default="auto",
        help="PostgreSQL memory for the index builds (auto: the vector graph's size, at most a quarter of memory)",
    )
    bench.add_argument("--no-http", action="store_true", help="skip the HTTP measurements (no Ray)")
    bench.add_argument("--out", default="bench-results", help="folder for results.json and latency.png")
    bench.add_argument("--no-plot", action="store_true", help="no latency.png (matplotlib not needed)")
    bench.set_defaults(func=cmd_bench_all)
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="BENCH")

    br = bench_sub.add_parser(
        "recall",
        help="recall latency at N memories in one namespace",
        description="Load N synthetic memories (real vectors for --real-vectors of them, derived "
        "vectors for the rest) into a scratch database and report recall p50/p95/p99 per mode, "
        "with the query embedding time apart.",
        parents=[synthetic_vectors(), json_file(), quiet_flag()],
    )
    br.add_argument("--memories", type=int, default=100_000, help="corpus size (default 100000)")
    br.add_argument("--queries", type=int, default=300, help="recalls timed per mode (default 300)")
    br.set_defaults(func=cmd_bench_recall)

    add_bench_replicas(bench_sub)
    bp = bench_sub.add_parser(
        "portable",
        help="export and import throughput at N memories",
        description="On the benchmark corpus of N memories (kept between runs, as `cabrain bench --keep` keeps it): "
        "export without and with vectors, then import a sample into an empty database, re-embedded and with its "
        "vectors kept, beside the bare embedder on the same texts.",
        parents=[json_file(), quiet_flag()],
    )
    bp.add_argument("--memories", type=int, default=100_000, help="corpus size (default 100000)")
    bp.add_argument("--sample", type=int, default=2000, help="memories imported (default 2000)")
    bp.add_argument(
        "--bulk-sample",
        type=int,
        help="memories the bulk import with vectors takes (default: --sample; up to --memories)",
    )
    bp.add_argument("--scratch", action="store_true", help="build the corpus in a scratch database, dropped after")
    bp.set_defaults(func=cmd_bench_portable)

    bk = bench_sub.add_parser(
        "counts",
        help="what the kept counts (the overview's, the entities' mentions) cost each write",
        description="On a scratch database, time retain (batched and one at a time), forget and recall with the "
        "triggers that keep the overview's counts and the entities' mention counts on, and with them off, in "
        "alternating rounds; report each write's time both ways.",
        parents=[json_file(), quiet_flag()],
    )
    bk.add_argument("--batch", type=int, default=32, help="texts per retain call, and writes per round (default 32)")
    bk.add_argument("--rounds", type=int, default=8, help="alternating rounds per write, even (default 8)")
    bk.set_defaults(func=cmd_bench_counts)

    add_bench_archive(bench_sub)
    add_bench_workflows(bench_sub)

    bh = bench_sub.add_parser(
        "http",
        help="HTTP recall latency at several concurrencies, beside in-process",
        description="Load N synthetic memories into a scratch database, time recall in process, then start a "
        "local Ray with the Serve app on CABRAIN_API_PORT and time the same through the HTTP API.",
        parents=[serve_config("Serve config or app args (replicas, CPUs, batch sizes)"), json_file(), quiet_flag()],
    )
    bh.add_argument("--memories", type=int, default=10_000, help="corpus size (default 10000)")
    bh.add_argument("--queries", type=int, default=300, help="recalls timed per concurrency level (default 300)")
    bh.add_argument("--concurrency", default="1,8,32", help="levels, comma-separated (default 1,8,32)")
    bh.set_defaults(func=cmd_bench_http)

    bc = bench_sub.add_parser(
        "capture",
        help="wall time of `cabrain capture` per Claude Code hook event, service up",
        description="Start a local Ray with the Serve app on a scratch database and time `cabrain capture` "
        "(process start to exit) for UserPromptSubmit, PostToolUse and SessionStart events.",
        parents=[serve_config("Serve config or app args"), json_file(), quiet_flag()],
    )
    bc.add_argument("--events", type=int, default=100, help="events of each type (default 100)")
    bc.set_defaults(func=cmd_bench_capture)

    bs = bench_sub.add_parser(
        "sleep",
        help="sleep-cycle throughput per step on Ray clusters of 1..N nodes",
        description="Load N synthetic memories (a similarity structure that gives every step work; see "
        "cabrain/bench/sleep_workload.py) into a scratch database once, then for each node count copy it, start a Ray "
        "cluster of that many nodes on this machine and time each sleep step over every namespace.",
        parents=[json_file(), quiet_flag()],
    )
    bs.add_argument("--memories", type=int, default=100_000, help="corpus size (default 100000)")
    bs.add_argument("--namespaces", type=int, default=8, help="namespaces; the first holds half (default 8)")
    bs.add_argument("--nodes", default="1,2", help="comma-separated node counts (default 1,2)")
    bs.add_argument("--cpus-per-node", type=int, default=1, help="CPUs each Ray node offers (default 1)")
    bs.add_argument("--archive-queries", type=int, default=30, help="archive recalls timed after the run (default 30)")
    bs.set_defaults(func=cmd_bench_sleep)
