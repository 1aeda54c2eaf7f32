"""``cabrain sleep``: one sleep cycle now, or on a schedule."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from cabrain.cli.common import EXIT_FAIL, EXIT_OK, Subparsers, json_flag, only_namespaces, quiet_flag
from cabrain.errors import UsageError
from cabrain.settings import Settings

if TYPE_CHECKING:
    from cabrain.sleep.cycle import CycleReport


def cmd_sleep(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.sleep.cycle import STEPS, check_steps, run_cycle  # lazy, here and below: start-up time
    from cabrain.store.db import hot_tier

    steps = [s.strip() for s in args.steps.split(",") if s.strip()] if args.steps else list(STEPS)
    check_steps(steps)  # before Ray starts, and before a schedule waits for its first run
    if not args.schedule and (args.at or args.every or args.max_runs):
        raise UsageError("--at, --every and --max-runs go with --schedule")
    if args.every is not None and args.every <= 0:
        raise UsageError("--every must be a positive number of seconds")
    out = sys.stderr if args.json else sys.stdout  # --json: stdout holds the JSON report alone
    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=out, flush=True))
    from cabrain.ray_runtime import ray_session

    with ray_session(settings, inline=args.inline, say=say), hot_tier(settings) as dsn:

        def run_once() -> CycleReport:
            return asyncio.run(
                run_cycle(
                    settings, dsn, namespaces=args.namespace or None, steps=steps, use_ray=not args.inline, progress=say
                )
            )

        if args.schedule:
            return _sleep_on_schedule(settings, args, run_once, say)
        report = run_once()
    if args.json:
        print(json.dumps(report.to_json(), indent=2, default=str))
    else:
        for step, counts in report.steps.items():
            line = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v) or "nothing to do"
            print(f"{step:12s} {line}")
        for name, why in report.skipped.items():
            print(f"skipped {name}: {why}")
        print(f"run {report.run_id}: {report.status} in {report.seconds:.1f} s (report kept in sleep_runs)")
    return EXIT_OK if report.status == "done" else EXIT_FAIL


def _sleep_on_schedule(
    settings: Settings,
    args: argparse.Namespace,
    run_once: Callable[[], CycleReport],
    say: Callable[[str], None],
) -> int:
    from cabrain.sleep.schedule import Scheduler, parse_at

    def once() -> str:
        report = run_once()
        if report.status != "done":
            raise RuntimeError(f"run {report.run_id} ended {report.status} (see sleep_runs)")
        skipped = f", skipped {', '.join(report.skipped)}" if report.skipped else ""
        return f"run {report.run_id}: done in {report.seconds:.1f} s, {len(report.namespaces)} namespace(s){skipped}"

    if args.every is not None:
        scheduler = Scheduler(once, every=timedelta(seconds=args.every), max_runs=args.max_runs, say=say)
        when = f"every {args.every:g} s"
    else:
        at = parse_at(args.at or settings.sleep_at)
        scheduler = Scheduler(once, at=at, max_runs=args.max_runs, say=say)
        when = f"daily at {at:%H:%M} UTC"
    scheduler.install_signal_handlers()
    say(f"sleep scheduler: {when}")
    return EXIT_OK if scheduler.loop() == 0 else EXIT_FAIL


def _clock_time(text: str) -> str:
    from cabrain.sleep.schedule import parse_at

    try:
        parse_at(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time of day HH:MM (24-hour, UTC)") from None
    return text.strip()


def add_sleep(sub: Subparsers) -> None:
    sleep = sub.add_parser(
        "sleep",
        help="run the sleep cycle: consolidate, dedup, reconsolidate, decay, demote, maintain",
        description="Run one sleep cycle over every namespace (or those named) as Ray tasks: a local Ray, or "
        "the cluster at CABRAIN_RAY_ADDRESS. Progress per step and namespace; the report is kept in sleep_runs.",
        parents=[only_namespaces(), json_flag("print the report as JSON"), quiet_flag("no progress lines")],
    )
    sleep.add_argument("--steps", help="comma-separated subset, in cycle order (default: all)")
    sleep.add_argument("--inline", action="store_true", help="run the steps in this process, without Ray")
    sleep.add_argument(
        "--schedule",
        action="store_true",
        help="keep running: one cycle daily at --at (default CABRAIN_SLEEP_AT, 03:00 UTC) or every --every s",
    )
    sleep.add_argument(
        "--at", type=_clock_time, default=None, metavar="HH:MM", help="with --schedule: daily, at HH:MM UTC"
    )
    sleep.add_argument("--every", type=float, default=None, metavar="SECONDS", help="with --schedule: every SECONDS")
    sleep.add_argument("--max-runs", type=int, default=None, metavar="N", help="with --schedule: stop after N runs")
    sleep.set_defaults(func=cmd_sleep)
