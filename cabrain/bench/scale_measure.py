"""The measurements of ``cabrain bench`` at one corpus size: retain throughput, recall in process
(without a cache and through the L1 cache), recall over HTTP with the service's memory, and the
prewarming of the hot path that comes before them."""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import asyncpg
import psutil

from cabrain import identity
from cabrain.bench.corpus import AGENT, NAMESPACE, synthetic_queries
from cabrain.bench.measure import local_service, timed_calls
from cabrain.bench.progress import say
from cabrain.bench.scale_spec import ScaleSpec
from cabrain.client import AsyncClient
from cabrain.errors import ConfigError
from cabrain.eval import percentiles
from cabrain.settings import Settings
from cabrain.store import bench as sql
from cabrain.types import MemoryInput, RecallQuery


async def measure_retain(brain, embedder, texts: list[str], singles: list[str], namespace: str) -> dict[str, Any]:
    """Texts per second: the bare embedder, then retain, on the same texts; batched on ``texts``
    (the embedder in its batch size; retain in calls of up to ``max_batch`` texts, which it writes
    group by group while the next group embeds) and one at a time on ``singles``."""
    batch = brain.settings.embed_batch_size
    half = len(texts) // 2
    call = min(brain.settings.max_batch, half)

    async def bare(chunk: list[str]) -> None:
        await embedder.embed_documents(chunk)

    async def keep(chunk: list[str]) -> None:
        await brain.retain(AGENT, [MemoryInput(t, namespace) for t in chunk])

    async def rate(fn, items: list[str], size: int) -> float:
        started = time.perf_counter()
        for start in range(0, len(items), size):
            await fn(items[start : start + size])
        return len(items) / (time.perf_counter() - started)

    await bare(texts[:8])  # warm-up
    out: dict[str, Any] = {"texts": len(texts), "batch": batch, "retain_call": call, "single_texts": len(singles)}
    # Alternate the two on halves of the texts, so that drift in the machine's speed hits both alike.
    bare_b = (await rate(bare, texts[:half], batch) + await rate(bare, texts[half:], batch)) / 2
    out["bare_embedder_batched_per_s"] = round(bare_b, 1)
    retain_b = (await rate(keep, texts[:half], call) + await rate(keep, texts[half:], call)) / 2
    out["retain_batched_per_s"] = round(retain_b, 1)
    out["bare_embedder_single_per_s"] = round(await rate(bare, singles, 1), 1)
    out["retain_single_per_s"] = round(await rate(keep, singles, 1), 1)
    out["ratio_batched"] = round(retain_b / bare_b, 3)
    out["ratio_single"] = round(out["retain_single_per_s"] / out["bare_embedder_single_per_s"], 3)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def l1_cache(settings: Settings, folder: Path, quiet: bool):
    """The Redis URL of the L1 cache for the run: ``CABRAIN_REDIS_URL``, else a private
    ``redis-server`` on a free loopback port (stopped afterwards), else None (said in the report)."""
    if settings.redis_url is not None:
        yield settings.redis_url.get_secret_value(), "CABRAIN_REDIS_URL"
        return
    exe = shutil.which("redis-server")
    if exe is None:
        yield None, "no CABRAIN_REDIS_URL and no redis-server on PATH"
        return
    port = _free_port()
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        else:
            raise ConfigError("the benchmark's private redis-server did not start")
        say(f"  a private redis-server on 127.0.0.1:{port} for the L1 cache", quiet)
        yield f"redis://127.0.0.1:{port}/0", "a private redis-server"
    finally:
        proc.terminate()
        proc.wait(10)


async def measure_recall(
    brain,
    rng: random.Random,
    spec: ScaleSpec,
    *,
    rerank: bool = False,
    namespace: str = NAMESPACE,
    levels: list[int] | None = None,
) -> dict[int, dict]:
    """In-process recall at each concurrency, fresh query texts at every level; at concurrency 1
    also where the time went (``stages``: percentiles of recall's own ``timings_ms``)."""
    stages: dict[str, list[float]] = {}

    async def one(text: str) -> None:
        result = await brain.recall(AGENT, RecallQuery(text, namespace, k=10, rerank=rerank))
        for stage, ms in result.timings_ms.items():
            stages.setdefault(stage, []).append(ms)

    out = {}
    for c in levels or spec.concurrency:
        await timed_calls(one, synthetic_queries(rng, 10), c)  # warm-up
        stages.clear()
        out[c] = await timed_calls(one, synthetic_queries(rng, spec.queries), c)
        if c == 1:
            out[c]["stages"] = {
                stage.removesuffix("_ms"): {k: round(v, 2) for k, v in percentiles(ms).items()}
                for stage, ms in stages.items()
            }
    return out


async def measure_cached(brain, rng: random.Random, spec: ScaleSpec) -> dict[str, dict[int, dict]]:
    """Through the L1 cache: fresh texts (misses, which fill it), then the same texts again (hits)."""

    async def one(text: str) -> None:
        await brain.recall(AGENT, RecallQuery(text, NAMESPACE, k=10, rerank=False))

    miss, hit = {}, {}
    for c in spec.concurrency:
        texts = synthetic_queries(rng, spec.queries)
        miss[c] = await timed_calls(one, texts, c)
        hit[c] = await timed_calls(one, texts, c)
    return {"miss": miss, "hit": hit}


def service_memory() -> dict[str, Any]:
    """Resident memory (MB) of the Serve processes of the local Ray this process started: each
    replica, the HTTP proxy and the controller (found by their ``ray::`` process titles)."""
    per: dict[str, float] = {}
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            title = " ".join(proc.cmdline())
            if not title.startswith("ray::") or not any(p in title for p in ("Replica", "Proxy", "Controller")):
                continue
            name = title.split()[0].removeprefix("ray::").split(".")[0]  # "Actor.method" while busy
            per[name if name not in per else f"{name} (pid {proc.pid})"] = round(proc.memory_info().rss / 2**20, 1)
    return {"processes_mb": per, "total_mb": round(sum(per.values()), 1)}


async def measure_http(settings: Settings, brain, dsn: str, rng: random.Random, spec: ScaleSpec, cached: bool) -> dict:
    """Recall through the HTTP API of a local service on ``dsn`` at each concurrency (and, with
    ``cached``, the same texts again: cache hits), then the service's memory."""
    async with brain.engine.pool.acquire() as conn:
        key = (await identity.create_key(conn, AGENT, label="bench")).key
    out: dict[str, Any] = {"cache": cached}
    async with local_service(settings, dsn, spec.app_args, quiet=spec.quiet) as url:
        async with AsyncClient(url, key, max_connections=max(spec.concurrency)) as client:

            async def remote(text: str) -> None:
                await client.recall(RecallQuery(text, NAMESPACE, k=10, rerank=False))

            levels, hits = {}, {}
            for c in spec.concurrency:
                await timed_calls(remote, synthetic_queries(rng, 10), c)  # warm-up
                texts = synthetic_queries(rng, spec.queries)
                levels[c] = await timed_calls(remote, texts, c)
                if cached:
                    hits[c] = await timed_calls(remote, texts, c)
                say(
                    f"  http, concurrency {c}: p95 {levels[c].get('p95', 0):.1f} ms, errors {levels[c]['errors']}",
                    spec.quiet,
                )
            out["recall"] = levels
            if cached:
                out["recall_cache_hit"] = hits
        out["memory"] = await asyncio.to_thread(service_memory)
    return out


async def prewarm(brain) -> dict[str, Any]:
    """Read the hot path's indexes (the HNSW graphs of memories and passages, the BM25 postings
    index) into shared buffers, and the rows recall reads into the operating system's cache, with
    pg_prewarm - as a long-running server that has answered recalls holds them (at 1M, a cold row
    cache tripled recall's p95); said in the report when the server lacks the extension."""
    async with brain.engine.pool.acquire() as conn:
        try:
            await conn.execute(sql.CREATE_PREWARM)
            indexes = float(await conn.fetchval(sql.PREWARM))
            rows = float(await conn.fetchval(sql.PREWARM_ROWS))
            return {"prewarmed_mb": round(indexes, 1), "rows_cached_mb": round(rows, 1)}
        except asyncpg.PostgresError as exc:
            return {"prewarmed_mb": 0, "skipped": f"pg_prewarm: {exc}"}
