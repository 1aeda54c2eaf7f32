"""``cabrain workflows ...``: the model registry, dispatching and queueing tasks, workers, the
learning iterations and the report - run against the hot tier directly (an operator's tool,
like ``cabrain sleep``); agents reach the same through the HTTP API."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from cabrain.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    Subparsers,
    json_flag,
    namespace_option,
    only_namespaces,
    quiet_flag,
)
from cabrain.errors import UsageError
from cabrain.settings import Settings
from cabrain.workflows import TASK_TYPES


def _with_workflows(settings: Settings, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``work`` on the workflows facade over the hot tier (the operator's: no agent checks on the
    registry, as with ``cabrain sleep``)."""
    from cabrain.store.db import hot_tier  # lazy, here and below: start-up time (common.py)
    from cabrain.workflows.facade import Workflows

    async def run(dsn: str) -> Any:
        async with await Workflows.open(settings, dsn=dsn) as workflows:
            return await work(workflows)

    with hot_tier(settings) as dsn:
        return asyncio.run(run(dsn))


def _bool(text: str) -> bool:
    if text.lower() in ("true", "yes", "1", "on"):
        return True
    if text.lower() in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _print(data: Any, as_json: bool, text: str) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str) if as_json else text)


# --- the registry ---------------------------------------------------------------------------------
def _agent_fields(args: argparse.Namespace) -> dict[str, Any]:
    names = {
        "layer": "layer",
        "provider": "provider",
        "model": "model",
        "endpoint": "endpoint",
        "api_key_env": "api_key_env",
        "capabilities": "capabilities",
        "cost_in": "cost_in_per_1k",
        "cost_out": "cost_out_per_1k",
        "active": "active",
    }
    return {field: getattr(args, arg) for arg, field in names.items() if getattr(args, arg, None) is not None}


def cmd_agents_add(settings: Settings, args: argparse.Namespace) -> int:
    agent = _with_workflows(settings, lambda w: w.add_model({"name": args.name, **_agent_fields(args)}))
    _print(
        agent.to_json(),
        args.json,
        f"added {agent.name} ({agent.layer}, {agent.provider} {agent.model} at {agent.endpoint})",
    )
    return EXIT_OK


def cmd_agents_set(settings: Settings, args: argparse.Namespace) -> int:
    fields = _agent_fields(args)
    if not fields:
        raise UsageError(
            "nothing to change",
            hint="give one of --layer, --provider, --model, --endpoint, --api-key-env, "
            "--capabilities, --cost-in, --cost-out, --active",
        )

    agent = _with_workflows(settings, lambda w: w.update_model(args.name, fields))
    _print(agent.to_json(), args.json, f"updated {agent.name}: {', '.join(sorted(fields))}")
    return EXIT_OK


def cmd_agents_list(settings: Settings, args: argparse.Namespace) -> int:
    agents = _with_workflows(settings, lambda w: w.list_models(layer=args.layer))
    lines = [
        f"{a.name:20s} {a.layer:8s} {a.provider:9s} {a.model:28s} {'active' if a.active else 'inactive':8s} "
        f"calls {a.calls} failed {a.failures} latency {a.latency_ms or 0:.0f} ms"
        + (f" {a.tokens_per_s:.0f} tokens/s" if a.tokens_per_s else "")
        + f"  {a.endpoint}"
        + (f"  (served by cabrain up: {a.source})" if a.source else "")
        for a in agents
    ]
    _print([a.to_json() for a in agents], args.json, "\n".join(lines) or "no model agents registered")
    return EXIT_OK


# --- tasks ----------------------------------------------------------------------------------------
def _request(args: argparse.Namespace) -> Any:
    from cabrain.workflows.dispatch import TaskRequest

    description = sys.stdin.read() if args.description == "-" else args.description
    return TaskRequest(
        args.namespace, description, args.context or "", args.type, args.destructive, args.review, args.frontier
    )


def cmd_dispatch(settings: Settings, args: argparse.Namespace) -> int:
    request = _request(args)
    result = _with_workflows(settings, lambda w: w.dispatch(args.agent, request))
    if args.json:
        _print(result.to_json(), True, "")
    else:
        print(result.output)
        print(f"[{result.route}] {result.reason}; task {result.task_id}", file=sys.stderr)
    return EXIT_OK


def cmd_enqueue(settings: Settings, args: argparse.Namespace) -> int:
    request = _request(args)
    item = _with_workflows(settings, lambda w: w.enqueue(args.agent, request, priority=args.priority))
    _print(item, args.json, f"queued {item['id']} (priority {item['priority']})")
    return EXIT_OK


def cmd_queue(settings: Settings, args: argparse.Namespace) -> int:
    if args.id:
        if not args.agent:
            raise UsageError("--agent is needed to read a queued task (it must be able to read the namespace)")
        item = _with_workflows(settings, lambda w: w.queued(args.agent, args.id))
        _print(
            item,
            args.json,
            f"{item['id']} {item['status']}"
            + (f": {item['error']}" if item["error"] else "")
            + (f"\n{item['result']['output']}" if item.get("result") else ""),
        )
        return EXIT_OK
    counts = _with_workflows(settings, lambda w: w.queue_counts(args.namespace))
    _print(counts, args.json, ", ".join(f"{k} {v}" for k, v in counts.items()))
    return EXIT_OK


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    name = args.name or f"{socket.gethostname()}-{id(args):x}"
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))

    ran = _with_workflows(settings, lambda w: w.work(name, drain=args.drain, progress=say))
    print(f"worker {name}: ran {ran} task(s)", file=sys.stderr)
    return EXIT_OK


def cmd_learn(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.db import hot_tier
    from cabrain.workflows.facade import Workflows

    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    from cabrain.ray_runtime import ray_session

    if args.every is not None and args.every <= 0:
        raise UsageError("--every must be a positive number of seconds")
    if args.max_runs is not None and args.every is None:
        raise UsageError("--max-runs goes with --every")
    with ray_session(settings, inline=args.inline, say=say), hot_tier(settings) as dsn:

        def once() -> dict[str, Any]:
            return asyncio.run(
                Workflows.learn(
                    settings,
                    dsn,
                    namespaces=args.namespace or None,
                    limit=args.limit,
                    use_ray=not args.inline,
                    progress=say,
                )
            )

        if args.every is not None:
            return _learn_on_schedule(args, once, say)
        report = once()
    _print(report, args.json, _summary(report))
    return EXIT_OK if report["failed"] == 0 else EXIT_FAIL


def _summary(report: dict[str, Any]) -> str:
    a = report["audits"]
    audits = (
        f"; {a['audited']} of {a['tasks']} local task(s) audited"
        + (f" ({a['failed']} failed)" if a["failed"] else "")
        + "".join(f"; {d['chain']} demoted (judgment {d['judgment']})" for d in a["demoted"])
        if a["tasks"]
        else ""
    )
    return (
        f"{report['runs']} run(s): {report['learned']} learned, {report['skipped']} skipped, {report['failed']} "
        f"failed; {report['attempts']} attempt(s) in {report['seconds']:.1f} s{audits}"
    )


def _learn_on_schedule(args: argparse.Namespace, once: Callable[[], dict[str, Any]], say: Callable[[str], None]) -> int:
    """Learn every ``--every`` seconds until stopped (SIGTERM, Ctrl-C) or ``--max-runs`` are done."""
    from cabrain.sleep.schedule import Scheduler

    def run() -> str:
        report = once()
        if report["failed"]:
            raise RuntimeError(_summary(report))
        return _summary(report)

    scheduler = Scheduler(
        run, every=timedelta(seconds=args.every), max_runs=args.max_runs, say=say, label="learning run"
    )
    scheduler.install_signal_handlers()
    say(f"learning every {args.every:g} s")
    return EXIT_OK if scheduler.loop() == 0 else EXIT_FAIL


def cmd_report(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.workflows.facade import Workflows

    if args.days is not None and args.days < 1:
        raise UsageError("--days must be at least 1")
    data = _with_workflows(settings, lambda w: w.report(namespaces=args.namespace or None, days=args.days))
    _print(data, args.json, Workflows.render_report(data))
    return EXIT_OK


def add_workflows(sub: Subparsers) -> None:
    wf = sub.add_parser(
        "workflows",
        help="workflow learning: models, dispatch, queue, learning, report",
        description="Hand tasks to frontier or local models, learn which kinds local chains can take over, and "
        "route them. Runs against the hot tier directly.",
    )
    wsub = wf.add_subparsers(dest="workflows_command", metavar="ACTION", required=True)

    agents = wsub.add_parser(
        "agents", help="the model registry", description="The frontier and local models tasks can be handed to."
    )
    asub = agents.add_subparsers(dest="agents_command", metavar="ACTION", required=True)
    for action in ("add", "set"):
        p = asub.add_parser(
            action,
            help=f"{action} a model agent",
            description="Register a model."
            if action == "add"
            else "Change a model, or deactivate it (--active false).",
            parents=[json_flag()],
        )
        p.add_argument("name")
        required = action == "add"
        p.add_argument("--layer", choices=["frontier", "local"], required=required)
        p.add_argument(
            "--provider",
            choices=["openai", "anthropic"],
            required=required,
            help="openai: any OpenAI-compatible server (Ollama, vLLM, llama.cpp, OpenAI); anthropic: Messages API",
        )
        p.add_argument("--model", required=required)
        p.add_argument(
            "--endpoint", required=required, help="e.g. http://127.0.0.1:11434/v1 or https://api.anthropic.com"
        )
        p.add_argument("--api-key-env", help="the environment variable holding its API key (never the key itself)")
        p.add_argument("--capabilities", help="comma-separated, e.g. code,json")
        p.add_argument("--cost-in", type=float, help="USD per 1k input tokens (default: CABRAIN_WORKFLOW_PRICES)")
        p.add_argument("--cost-out", type=float, help="USD per 1k output tokens")
        p.add_argument("--active", type=_bool, help="true or false")
        p.set_defaults(func=cmd_agents_add if action == "add" else cmd_agents_set)
    p = asub.add_parser(
        "list",
        help="list model agents",
        description="The registered models, with their measured latency and calls.",
        parents=[json_flag()],
    )
    p.add_argument("--layer", choices=["frontier", "local"])
    p.set_defaults(func=cmd_agents_list)

    for action, helptext in (("dispatch", "route and run a task now"), ("enqueue", "queue a task for a worker")):
        p = wsub.add_parser(
            action,
            help=helptext,
            description=helptext[0].upper() + helptext[1:] + ".",
            parents=[namespace_option(), json_flag()],
        )
        p.add_argument("description", help="the task ('-' reads standard input)")
        p.add_argument(
            "--agent", required=True, help="the CaBrain agent the task is for (write access to the namespace)"
        )
        p.add_argument("--context", default="")
        p.add_argument(
            "--type",
            default="text",
            choices=list(TASK_TYPES),
            help="how an output is checked: code is Python; label, one of a fixed set named in the task",
        )
        p.add_argument("--destructive", action="store_true", help="always the frontier model")
        p.add_argument("--review", action="store_true", help="flagged for review: always the frontier model")
        p.add_argument("--frontier", help="this registered frontier model instead of the first active one")
        if action == "enqueue":
            p.add_argument("--priority", type=int, default=5, help="higher runs sooner (default 5)")
        p.set_defaults(func=cmd_dispatch if action == "dispatch" else cmd_enqueue)

    p = wsub.add_parser(
        "queue",
        help="queue counts, or one queued task",
        description="How many queued tasks are pending, picked, done and failed; or one of them.",
        parents=[namespace_option(required=False), json_flag()],
    )
    p.add_argument("id", nargs="?")
    p.add_argument("--agent", help="with an id: the agent reading it")
    p.set_defaults(func=cmd_queue)

    p = wsub.add_parser(
        "worker",
        help="claim and run queued tasks",
        description="Claim queued tasks (SKIP LOCKED: run as many workers as you like) and run them.",
        parents=[quiet_flag(None)],
    )
    p.add_argument("--name", help="this worker's name (default: host and a number)")
    p.add_argument("--drain", action="store_true", help="stop when no task is pending")
    p.set_defaults(func=cmd_worker)

    p = wsub.add_parser(
        "learn",
        help="run the learning iterations (Ray tasks; --inline: here)",
        description="Try local chains against new frontier references, offline: one Ray task per "
        "reference over the cluster (a local Ray, or CABRAIN_RAY_ADDRESS).",
        parents=[only_namespaces(), json_flag(), quiet_flag(None)],
    )
    p.add_argument("--limit", type=int, default=100, help="at most this many reference runs")
    p.add_argument("--inline", action="store_true", help="in this process, without Ray")
    p.add_argument("--every", type=float, metavar="SECONDS", help="keep learning: a run every SECONDS until stopped")
    p.add_argument("--max-runs", type=int, help="with --every: stop after this many runs")
    p.set_defaults(func=cmd_learn)

    p = wsub.add_parser(
        "report",
        help="local share, cost saved, accuracy over time, per agent",
        description="What workflow learning is worth, from recorded calls and costs.",
        parents=[only_namespaces(), json_flag()],
    )
    p.add_argument("--days", type=int, help="only the last DAYS days")
    p.set_defaults(func=cmd_report)
