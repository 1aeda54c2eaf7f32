"""``cabrain bench http``: recall latency through the HTTP API (a local Ray and the Serve
application on a scratch database) beside the same recalls in process, at several concurrencies,
with fresh query texts (no cache), and where each call's time went.

The stages come from the service itself: the application runs with ``CABRAIN_API_SERVER_TIMING``
on, so every answer carries a ``Server-Timing`` header (:mod:`cabrain.serve.timing`: the ingress,
the key check, the route's work, the encoding, and Serve's proxy), which the client's transport
keeps for the call that made it; the recall's own ``timings_ms`` (its total and its query
embedding) come in its body, in process as over HTTP.
"""

from __future__ import annotations

import contextvars
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from cabrain import identity
from cabrain.bench.corpus import AGENT, NAMESPACE, synthetic_queries
from cabrain.bench.load import load_namespace
from cabrain.bench.measure import local_service, machine_facts, timed_calls
from cabrain.bench.progress import say
from cabrain.client import AsyncClient
from cabrain.eval import percentiles
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.types import RecallQuery

# The stage table's rows: (key, what it is); the indented ones are parts of the row above them.
STAGES: tuple[tuple[str, str], ...] = (
    ("total", "the caller's wall time"),
    ("client", "  caller and network (total - proxy)"),
    ("proxy_hop", "  Serve's proxy to the ingress and back (proxy - app)"),
    ("app", "  the ingress replica (app)"),
    ("before", "    guards, routing, body parsing and validation"),
    ("auth", "    the key check"),
    ("brain", "    the route's work (Replica.run)"),
    ("recall", "      recall itself (its total_ms)"),
    ("embed", "        its query embedding (embed_ms)"),
    ("encode", "    the answer's JSON encoding"),
    ("other", "    the rest of the ingress"),
)
_SEEN: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("cabrain_bench_seen", default=None)


@dataclass
class HttpBenchResult:
    memories: int
    queries: int
    http: dict[int, dict[str, Any]]  # concurrency -> p50/p95/p99 (ms), rps, errors
    in_process: dict[int, dict[str, Any]]
    machine: dict[str, Any]
    # concurrency -> stage -> p50/p95/p99/mean (ms), over the calls that succeeded
    http_stages: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)
    in_process_stages: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__


def server_timing(values: list[str]) -> dict[str, float]:
    """``Server-Timing`` header values (one or more) as milliseconds per name; entries without a
    duration are left out."""
    out: dict[str, float] = {}
    for value in values:
        for entry in value.split(","):
            name, *params = (part.strip() for part in entry.split(";"))
            for param in params:
                key, _, number = param.partition("=")
                if name and key.strip().lower() == "dur":
                    try:
                        out[name] = out.get(name, 0.0) + float(number.strip().strip('"'))
                    except ValueError:
                        pass
    return out


def http_stages(total_ms: float, server: Mapping[str, float], timings: Mapping[str, float]) -> dict[str, float]:
    """One HTTP call's stages: its wall time, what the service said (``server``) and the recall's own
    timings; a stage the answer did not say is left out."""
    out = {"total": total_ms}
    if "total_ms" in timings:
        out["recall"] = timings["total_ms"]
    if "embed_ms" in timings:
        out["embed"] = timings["embed_ms"]
    if "app" in server:
        parts = {name: server[name] for name in ("before", "auth", "brain", "encode") if name in server}
        out.update(app=server["app"], **parts)
        out["other"] = max(0.0, server["app"] - sum(parts.values()))
        if "proxy" in server:
            out["client"] = max(0.0, total_ms - server["proxy"])
            out["proxy_hop"] = max(0.0, server["proxy"] - server["app"])
    return out


def _summary(calls: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    names = [name for name, _ in STAGES if any(name in call for call in calls)]
    return {
        name: {k: round(v, 2) for k, v in percentiles([c[name] for c in calls if name in c]).items()} for name in names
    }


class TimingTransport(httpx.AsyncBaseTransport):
    """The client's connections (as :class:`cabrain.client.AsyncClient` makes them), keeping each
    answer's ``Server-Timing`` for the call that is waiting for it."""

    def __init__(self, max_connections: int) -> None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._inner = httpx.AsyncHTTPTransport(limits=limits)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        seen = _SEEN.get()
        if seen is not None:
            seen.update(server_timing(response.headers.get_list("server-timing")))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def run_http_bench(
    settings: Settings,
    *,
    memories: int,
    queries: int,
    concurrency: list[int],
    real_vectors: int = 2000,
    noise: float = 0.02,
    seed: int = 11,
    app_args: dict[str, Any] | None = None,
    quiet: bool = False,
) -> HttpBenchResult:
    """Recall through the HTTP API (a local Ray + the Serve app on a scratch database) and in
    process on the same database, at each concurrency, with fresh query texts (no cache), and the
    stages of every call."""
    embedder = load_embedder(settings)
    rng = random.Random(seed)
    args = dict(app_args or {})
    args["settings"] = {**args.get("settings", {}), "api_server_timing": True}

    def fresh_texts() -> list[str]:
        return synthetic_queries(rng, queries)

    calls: list[dict[str, float]] = []  # the stages of the level being measured

    async with scratch_brain(settings, embedder, prefix="cabrain_httpbench") as (brain, facts, dsn):
        await brain.create_agent(AGENT)
        await load_namespace(brain, memories, min(real_vectors, memories), noise, seed, quiet)
        async with brain.engine.pool.acquire() as conn:
            key = (await identity.create_key(conn, AGENT, label="bench")).key

        async def local(text: str) -> None:
            started = time.perf_counter()
            result = await brain.recall(AGENT, RecallQuery(text, NAMESPACE, k=10, rerank=False))
            calls.append(http_stages((time.perf_counter() - started) * 1000, {}, result.timings_ms))

        in_process, in_process_stages = {}, {}
        for c in concurrency:
            await timed_calls(local, fresh_texts()[:20], c)  # warm-up
            calls = []
            in_process[c] = await timed_calls(local, fresh_texts(), c)
            in_process_stages[c] = _summary(calls)
            say(
                f"  in process, concurrency {c}: p95 {in_process[c].get('p95', 0):.1f} ms, errors {in_process[c]['errors']}",
                quiet,
            )

        async with local_service(settings, dsn, args, quiet=quiet) as url:
            http, stages = {}, {}
            transport = TimingTransport(max(concurrency))
            async with AsyncClient(url, key, max_connections=max(concurrency), transport=transport) as client:

                async def remote(text: str) -> None:
                    seen: dict[str, float] = {}
                    token = _SEEN.set(seen)
                    try:
                        started = time.perf_counter()
                        result = await client.recall(RecallQuery(text, NAMESPACE, k=10, rerank=False))
                        total = (time.perf_counter() - started) * 1000
                    finally:
                        _SEEN.reset(token)
                    calls.append(http_stages(total, seen, result.timings_ms))

                for c in concurrency:
                    await timed_calls(remote, fresh_texts()[:20], c)
                    calls = []
                    http[c] = await timed_calls(remote, fresh_texts(), c)
                    stages[c] = _summary(calls)
                    say(
                        f"  http, concurrency {c}: p95 {http[c].get('p95', 0):.1f} ms, errors {http[c]['errors']}",
                        quiet,
                    )
    machine = {**machine_facts(facts, embedder), "direct_ingress": settings.serve_direct_ingress}
    return HttpBenchResult(memories, queries, http, in_process, machine, stages, in_process_stages)


def render_http(result: HttpBenchResult) -> str:
    lines = [
        f"recall (hybrid, k=10, no rerank, no cache) over {result.memories} memories, {result.queries} queries per row"
        + (", direct ingress (no proxy hop)" if result.machine.get("direct_ingress") else ""),
        f"{'concurrency':>11} | {'HTTP p50':>9} {'p95':>8} {'p99':>8} {'req/s':>7} | "
        f"{'in-process p50':>14} {'p95':>8} {'p99':>8} {'req/s':>7}",
    ]
    nan = float("nan")  # a level where every call failed has no percentiles
    for c, h in result.http.items():
        p = result.in_process[c]
        errors = h["errors"] + p["errors"]
        lines.append(
            f"{c:>11} | {h.get('p50', nan):9.1f} {h.get('p95', nan):8.1f} {h.get('p99', nan):8.1f} {h['rps']:7.1f} | "
            f"{p.get('p50', nan):14.1f} {p.get('p95', nan):8.1f} {p.get('p99', nan):8.1f} {p['rps']:7.1f}"
            + (
                f"  errors: {h['errors']} HTTP, {p['errors']} in process ({(h['first_errors'] + p['first_errors'])[0]})"
                if errors
                else ""
            )
        )
    lines.extend(_targets(result))
    for c, stages in result.http_stages.items():
        local = result.in_process_stages.get(c, {})
        lines.append("")
        lines.append(f"where the time goes, concurrency {c}, p50 / p95 ms{'':<10} {'HTTP':>15} {'in process':>15}")
        for name, label in STAGES:
            if name in stages or name in local:
                lines.append(f"  {label:<56} {_pair(stages.get(name)):>15} {_pair(local.get(name)):>15}")
    return "\n".join(lines)


def _pair(p: Mapping[str, float] | None) -> str:
    return f"{p['p50']:.1f} / {p['p95']:.1f}" if p else "-"


def _targets(result: HttpBenchResult) -> list[str]:
    """Issue 37's targets, as this run met them or not: HTTP p95 within 10 ms of in process at the
    lowest concurrency, and at least 75% of in process's throughput at the highest."""
    if not result.http:
        return []
    low, high = min(result.http), max(result.http)
    h, p = result.http[low], result.in_process[low]
    out = []
    if "p95" in h and "p95" in p:
        gap = h["p95"] - p["p95"]
        out.append(
            f"target HTTP p95 <= in-process p95 + 10 ms (concurrency {low}): "
            f"{'met' if gap <= 10 else 'not met'}, +{gap:.1f} ms"
        )
    h, p = result.http[high], result.in_process[high]
    if p["rps"]:
        share = h["rps"] / p["rps"]
        out.append(
            f"target HTTP req/s >= 75% of in process (concurrency {high}): "
            f"{'met' if share >= 0.75 else 'not met'}, {share:.0%}"
        )
    return out
