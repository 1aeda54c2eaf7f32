"""``cabrain bench replicas``: recall with its reads on the primary, then spread over streaming replicas.

On a scratch database of the embedded server: N synthetic memories (as ``cabrain bench recall``
loads them), then the same recalls at concurrency C, first on the primary alone, then with 1 .. R
streaming replicas of the embedded server (:class:`cabrain.store.embedded.EmbeddedReplica`, each a
``pg_basebackup`` of the whole server into a scratch folder, removed afterwards) listed in
``CABRAIN_DATABASE_REPLICA_URLS``. Reported per setup: p50 / p95 latency, recalls per second, and
the reads each replica served. Then a read after a write: a retain followed by a recall that names
its WAL position (the ``CaBrain-LSN`` the HTTP API answers with), against the same recall that names
none.

What it measures on one machine: the replicas share its CPUs, so the numbers say what routing
reads costs and that it spreads them, not what more machines would add.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from cabrain.bench.corpus import AGENT, NAMESPACE, synthetic_queries
from cabrain.bench.load import load_namespace
from cabrain.bench.progress import say
from cabrain.brain import Brain
from cabrain.errors import ConfigError
from cabrain.eval import percentiles
from cabrain.providers.embedders import Embedder, load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.store.embedded import EmbeddedPostgres, EmbeddedReplica
from cabrain.store.replicas import READ_AFTER, parse_lsn
from cabrain.types import MemoryInput, RecallMode, RecallQuery


@dataclass
class ReplicaBench:
    memories: int
    concurrency: int
    mode: str
    setups: dict[str, dict[str, Any]]  # "primary only", "1 replica", ...
    read_after_write_ms: dict[str, dict[str, float]]

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__


async def _recalls(brain: Brain, texts: list[str], mode: RecallMode, concurrency: int) -> dict[str, Any]:
    todo, latencies = list(texts), []

    async def worker() -> None:
        while todo:
            text = todo.pop()
            started = time.perf_counter()
            await brain.recall(AGENT, RecallQuery(text, NAMESPACE, k=10, mode=mode, rerank=False))
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    reads = [r["reads"] for r in await brain.read_replicas()]
    return {**percentiles(latencies), "recalls_per_s": len(texts) / wall, "reads_per_replica": reads}


async def _read_after_write(brain: Brain, texts: list[str], mode: RecallMode) -> dict[str, dict[str, float]]:
    plain, after = [], []
    for i, text in enumerate(texts):
        await brain.retain(AGENT, [MemoryInput(f"bench note {i}: {text}", NAMESPACE)])
        position = parse_lsn(await brain.wal_position())
        query = RecallQuery(text, NAMESPACE, k=10, mode=mode, rerank=False)
        started = time.perf_counter()
        await brain.recall(AGENT, query)
        plain.append((time.perf_counter() - started) * 1000)
        token = READ_AFTER.set(position)
        try:
            started = time.perf_counter()
            await brain.recall(AGENT, query)
            after.append((time.perf_counter() - started) * 1000)
        finally:
            READ_AFTER.reset(token)
    return {"recall naming no write": percentiles(plain), "recall naming the write before it": percentiles(after)}


async def run_replica_bench(
    settings: Settings,
    *,
    memories: int,
    queries: int,
    replicas: int,
    concurrency: int,
    mode: RecallMode,
    real_vectors: int,
    noise: float,
    seed: int = 7,
    quiet: bool = False,
    embedder: Embedder | None = None,
) -> ReplicaBench:
    if not settings.embedded:
        raise ConfigError(
            "cabrain bench replicas makes its replicas of the embedded server: CABRAIN_DATABASE_URL is set",
            hint="unset CABRAIN_DATABASE_URL for the benchmark",
        )
    model = embedder or load_embedder(settings)
    texts = synthetic_queries(random.Random(seed + 1), queries)
    setups: dict[str, dict[str, Any]] = {}
    async with scratch_brain(settings, model, prefix="cabrain_bench_replicas") as (brain, _, dsn):
        await brain.create_agent(AGENT)
        await load_namespace(brain, memories, min(real_vectors, memories), noise, seed, quiet)
        await _recalls(brain, texts[: max(1, queries // 10)], mode, concurrency)  # warm the caches
        setups["primary only"] = await _recalls(brain, texts, mode, concurrency)
        say(f"  primary only: p95 {setups['primary only']['p95']:.1f} ms", quiet)
        primary = EmbeddedPostgres.from_settings(settings)
        folder = settings.home / "bench-replicas"
        made: list[EmbeddedReplica] = []
        database = urlsplit(dsn).path.lstrip("/")
        waits: dict[str, dict[str, float]] = {}
        try:
            for n in range(1, replicas + 1):
                replica = EmbeddedReplica(
                    folder / f"replica{n}", primary, shared_buffers=settings.embedded_pg_shared_buffers
                )
                await asyncio.to_thread(replica.acquire)
                made.append(replica)
                urls = ",".join(r.dsn(database) for r in made)
                spread = settings.model_copy(update={"database_replica_urls": SecretStr(urls)})
                reader = await Brain.open(spread, dsn=dsn, embedder=model)
                try:
                    await _recalls(reader, texts[: max(1, queries // 10)], mode, concurrency)
                    name = f"{n} replica{'s' if n > 1 else ''}"
                    setups[name] = await _recalls(reader, texts, mode, concurrency)
                    say(f"  {name}: p95 {setups[name]['p95']:.1f} ms", quiet)
                    if n == replicas:
                        waits = await _read_after_write(reader, texts[: max(1, queries // 5)], mode)
                finally:
                    await reader.close()
        finally:
            for replica in made:
                await asyncio.to_thread(replica.release)
            shutil.rmtree(folder, ignore_errors=True)
    return ReplicaBench(memories, concurrency, mode.value, setups, waits)


def render_replicas(result: ReplicaBench) -> str:
    lines = [
        f"memories: {result.memories} in one namespace; {result.mode} recall (k=10, no rerank, no cache), "
        f"{result.concurrency} at once",
        f"{'setup':<20} {'p50 ms':>8} {'p95 ms':>8} {'recalls/s':>10}  reads per replica",
    ]
    for name, p in result.setups.items():
        reads = ", ".join(map(str, p["reads_per_replica"])) or "-"
        lines.append(f"{name:<20} {p['p50']:8.1f} {p['p95']:8.1f} {p['recalls_per_s']:10.1f}  {reads}")
    for name, p in result.read_after_write_ms.items():
        lines.append(f"{name:<36} p50 {p['p50']:6.1f} ms, p95 {p['p95']:6.1f} ms")
    return "\n".join(lines)


def replicas_json(result: ReplicaBench) -> str:
    return json.dumps(result.as_dict(), indent=2)
