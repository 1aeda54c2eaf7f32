"""``cabrain bench http``: recall latency through the HTTP API (a local Ray and the Serve
application on a scratch database) beside the same recalls in process, at several concurrencies,
with fresh query texts (no cache)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from cabrain import identity
from cabrain.bench.corpus import AGENT, NAMESPACE, synthetic_queries
from cabrain.bench.load import load_namespace
from cabrain.bench.measure import local_service, machine_facts, timed_calls
from cabrain.bench.progress import say
from cabrain.client import AsyncClient
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.types import RecallQuery


@dataclass
class HttpBenchResult:
    memories: int
    queries: int
    http: dict[int, dict[str, Any]]  # concurrency -> p50/p95/p99 (ms), rps, errors
    in_process: dict[int, dict[str, Any]]
    machine: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__


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
    process on the same database, at each concurrency, with fresh query texts (no cache)."""
    embedder = load_embedder(settings)
    rng = random.Random(seed)

    def fresh_texts() -> list[str]:
        return synthetic_queries(rng, queries)

    async with scratch_brain(settings, embedder, prefix="cabrain_httpbench") as (brain, facts, dsn):
        await brain.create_agent(AGENT)
        await load_namespace(brain, memories, min(real_vectors, memories), noise, seed, quiet)
        async with brain.engine.pool.acquire() as conn:
            key = (await identity.create_key(conn, AGENT, label="bench")).key

        async def local(text: str) -> None:
            await brain.recall(AGENT, RecallQuery(text, NAMESPACE, k=10, rerank=False))

        in_process = {}
        for c in concurrency:
            await timed_calls(local, fresh_texts()[:20], c)  # warm-up
            in_process[c] = await timed_calls(local, fresh_texts(), c)
            say(
                f"  in process, concurrency {c}: p95 {in_process[c].get('p95', 0):.1f} ms, errors {in_process[c]['errors']}",
                quiet,
            )

        async with local_service(settings, dsn, app_args, quiet=quiet) as url:
            http = {}
            async with AsyncClient(url, key, max_connections=max(concurrency)) as client:

                async def remote(text: str) -> None:
                    await client.recall(RecallQuery(text, NAMESPACE, k=10, rerank=False))

                for c in concurrency:
                    await timed_calls(remote, fresh_texts()[:20], c)
                    http[c] = await timed_calls(remote, fresh_texts(), c)
                    say(
                        f"  http, concurrency {c}: p95 {http[c].get('p95', 0):.1f} ms, errors {http[c]['errors']}",
                        quiet,
                    )
    machine = machine_facts(facts, embedder)
    return HttpBenchResult(memories, queries, http, in_process, machine)


def render_http(result: HttpBenchResult) -> str:
    lines = [
        f"recall (hybrid, k=10, no rerank, no cache) over {result.memories} memories, {result.queries} queries per row",
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
    return "\n".join(lines)
