"""``cabrain bench workflows``: the frontier-to-local loop over the workflow testbed, with real local
models (:mod:`cabrain.bench.workflows`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from cabrain.cli.common import EXIT_OK, Subparsers, json_file, quiet_flag, write_results
from cabrain.errors import UsageError
from cabrain.settings import Settings


def cmd_bench_workflows(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.bench.workflows import render_workflows, run_workflows_bench
    from cabrain.settings.local_models import LocalModel

    if args.train < 1 or args.test < 1:
        raise UsageError("--train and --test must be at least 1")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else None
    models = None
    if args.local_model:
        models = [LocalModel(source=source) for source in args.local_model]
    elif settings.local_models:
        models = list(settings.local_models)
    result = asyncio.run(
        run_workflows_bench(
            settings,
            folder=Path(args.testbed),
            kinds=kinds,
            train=args.train,
            test=args.test,
            models=models,
            frontier_model=args.frontier_model,
            quiet=args.quiet,
        )
    )
    print(render_workflows(result))
    write_results(args.json, json.dumps(result, indent=2, default=str) + "\n")
    return EXIT_OK


def add_bench_workflows(bench_sub: Subparsers) -> None:
    bw = bench_sub.add_parser(
        "workflows",
        help="the frontier-to-local loop over the workflow testbed, on real local models",
        description="On a scratch database, for each kind of the testbed: dispatch its first --train tasks (to the "
        "frontier model: a scripted server answering from the references), learn local chains over every local "
        "model, then dispatch its next --test tasks and report the share routed locally, their accuracy against "
        "the references, the frontier cost saved (CABRAIN_WORKFLOW_PRICES) and the latency. Local models: "
        "--local-model, else CABRAIN_LOCAL_MODELS, else the small ones installed as packages.",
        parents=[json_file(), quiet_flag()],
    )
    bw.add_argument("--testbed", default="eval/workflows", help="the testbed's folder (default eval/workflows)")
    bw.add_argument("--kinds", default=None, help="kinds to run, comma-separated (default all)")
    bw.add_argument("--train", type=int, default=6, help="tasks per kind learned from (default 6)")
    bw.add_argument("--test", type=int, default=6, help="tasks per kind routed after learning (default 6)")
    bw.add_argument(
        "--local-model",
        action="append",
        default=None,
        metavar="SOURCE",
        help="a .gguf file or package:NAME (repeatable)",
    )
    bw.add_argument("--frontier-model", default="claude-sonnet-4-5", help="the frontier model's name, for its price")
    bw.set_defaults(func=cmd_bench_workflows)
