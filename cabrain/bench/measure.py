"""What the benchmarks share: the floor (bare index probes), timed concurrent calls, a local
service to call over HTTP, and the facts of the machine a run was made on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from cabrain import ray_runtime, service
from cabrain.bench.corpus import NAMESPACE
from cabrain.bench.progress import say
from cabrain.errors import ConfigError
from cabrain.eval import percentiles
from cabrain.settings import Settings
from cabrain.store import bench as sql
from cabrain.store.planner import fetch_without
from cabrain.text.tokenizer import tokenize


async def measure_floor(brain, texts: list[str], vectors: list, candidates: int, postings: int) -> dict:
    """p50/p95/p99 of the bare HNSW and BM25 probes for these queries (vectors precomputed): the floor,
    each index alone, on the same database, with no scoping, filters, fusion or row fetching - what a
    recall could not go below (the probes: :data:`cabrain.store.bench.HNSW_PROBE`, ``BM25_PROBE``)."""
    hnsw, bm25 = [], []
    async with brain.engine.pool.acquire() as conn:
        for text, vector in zip(texts, vectors, strict=True):
            t0 = time.perf_counter()
            await fetch_without(
                conn,
                sql.HNSW_PROBE,
                (NAMESPACE, np.asarray(vector, dtype=np.float32), candidates),
                disable=("enable_sort",),
                generic=True,
            )
            t1 = time.perf_counter()
            await conn.fetch(sql.BM25_PROBE, NAMESPACE, sorted(set(tokenize(text))), postings, candidates)
            t2 = time.perf_counter()
            hnsw.append((t1 - t0) * 1000)
            bm25.append((t2 - t1) * 1000)
    return {"hnsw": percentiles(hnsw), "bm25": percentiles(bm25)}


def overhead_over_floor(recall: dict[str, float], embed: dict[str, float], floor: dict[str, dict[str, float]]) -> dict:
    """Hybrid recall over the sum of its parts done bare (query embedding + HNSW + BM25 probes)."""
    out = {}
    for p in ("p50", "p95"):
        bare = embed[p] + floor["hnsw"][p] + floor["bm25"][p]
        out[f"floor_{p}_ms"] = round(bare, 2)
        out[f"ratio_{p}"] = round(recall[p] / bare, 2) if bare else 0.0
    return out


def machine_facts(facts, embedder=None) -> dict[str, Any]:
    """Where a benchmark ran: the machine, the database server and the embedding model."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "postgres": facts.version,
        "pgvector": facts.vector_available,
        **({"embedder": embedder.name} if embedder is not None else {}),
    }


async def timed_calls(call, texts: list[str], concurrency: int) -> dict[str, Any]:
    """Run ``call(text)`` for every text, ``concurrency`` at a time: latency percentiles (ms) of
    the calls that succeeded, throughput, and the errors (counted, with the first few kept)."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    errors: list[str] = []

    async def one(text: str) -> None:
        async with gate:
            t0 = time.perf_counter()
            try:
                await call(text)
            except Exception as exc:  # noqa: BLE001 - counted and reported, the run goes on
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            latencies.append((time.perf_counter() - t0) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(one(t) for t in texts))
    wall = time.perf_counter() - started
    return {
        **{k: round(v, 2) for k, v in percentiles(latencies).items()},
        "rps": round(len(texts) / wall, 1),
        "errors": len(errors),
        "first_errors": errors[:3],
    }


@contextlib.asynccontextmanager
async def local_service(settings: Settings, dsn: str, app_args: dict[str, Any] | None, *, quiet: bool):
    """A local Ray with the Serve application on ``dsn``, for the length of the block."""
    if settings.ray_address:
        raise ConfigError("the benchmark runs its own local Ray; unset CABRAIN_RAY_ADDRESS")
    import ray  # lazy: Ray is heavy, and only the HTTP measurements need it

    if ray.is_initialized():  # its Serve application would replace the one running there
        raise ConfigError(
            "the benchmark runs its own local Ray, and this process is already connected to a Ray cluster",
            hint="run `cabrain bench` as a command of its own",
        )
    say("  starting a local Ray and the Serve application", quiet)
    ray_runtime.init_ray(settings)  # on the main thread: Ray installs its signal handlers
    try:
        await asyncio.to_thread(service.deploy, settings, dsn, app_args)
        await asyncio.to_thread(service.wait_ready, settings, progress=not quiet)
        yield service.api_url(settings)
    finally:  # as `cabrain up` stops: what Ray says of the work it cuts short goes to its log, not here
        await asyncio.to_thread(service.stop_ray, settings, tell=not quiet)


def _rss() -> int | None:
    """This process's resident memory in bytes (Linux: /proc/self/statm), None elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def memory_now() -> dict[str, float]:
    """This process's resident memory and the memory the machine has available (MemAvailable: free
    and reclaimable page cache), in MiB; empty where /proc is not."""
    out: dict[str, float] = {}
    rss = _rss()
    if rss is not None:
        out["rss_mib"] = round(rss / 2**20, 1)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    out["available_mib"] = round(int(line.split()[1]) / 1024, 1)
                    break
    except (OSError, ValueError, IndexError):
        pass
    return out


@contextlib.contextmanager
def peak_rss(every_s: float = 0.02) -> Iterator[dict[str, float]]:
    """The process's resident memory while the block runs, sampled every ``every_s``: the dict
    yielded gets ``before_mib`` and ``peak_mib`` when the block ends (nothing where /proc is not)."""
    out: dict[str, float] = {}
    before = _rss()
    if before is None:
        yield out
        return
    peak, done = [before], threading.Event()

    def sample() -> None:
        while not done.wait(every_s):
            now = _rss()
            if now is not None and now > peak[0]:
                peak[0] = now

    sampler = threading.Thread(target=sample, name="cabrain-peak-rss", daemon=True)
    sampler.start()
    try:
        yield out
    finally:
        done.set()
        sampler.join()
        now = _rss()
        out.update(before_mib=round(before / 2**20, 1), peak_mib=round(max(peak[0], now or 0) / 2**20, 1))
