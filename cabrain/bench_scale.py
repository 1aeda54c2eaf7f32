"""``cabrain bench``: the whole performance picture at one or more corpus sizes, in one run.

For each size N it builds (or reuses, with ``--keep``) a synthetic corpus: N memories in one large
namespace plus ``namespaces - 1`` small ones of N/100 each, mixed Arabic and English of 8-40 words
(:mod:`cabrain.bench_load` says what is synthetic). On it, it measures:

- retain throughput, batched and one at a time, beside the bare embedder's on the same texts;
- recall p50/p95/p99 at each concurrency in process, without a cache, and with the L1 cache
  (Redis) both missing and hitting; with rerank when a reranker is configured;
- the floor: bare query embedding and bare HNSW and BM25 probes, and recall's ratio over it;
- all of it after reading the hot path's indexes into shared buffers (``pg_prewarm``, as a
  long-running server holds them) and a short untimed warm-up;
- recall over HTTP (a local Ray and the Serve application) at each concurrency, the errors seen
  at every level, and the memory the service's processes hold.

Results go to ``<out>/results.json`` and a plot of latency against corpus size to
``<out>/latency.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from cabrain.bench import (
    AGENT,
    NAMESPACE,
    _progress,
    machine_facts,
    measure_floor,
    overhead_over_floor,
    synthetic_queries,
    synthetic_text,
    timed_calls,
)
from cabrain.bench_load import Corpus, bulk_load, graph_build_memory
from cabrain.errors import ConfigError
from cabrain.eval import percentiles
from cabrain.settings import Settings
from cabrain.types import MemoryInput, RecallQuery

LOADER_VERSION = 1  # part of a kept corpus' fingerprint: a changed loader rebuilds it


@dataclass
class ScaleSpec:
    sizes: list[int]
    namespaces: int = 20
    queries: int = 200
    concurrency: list[int] = field(default_factory=lambda: [1, 8, 32])
    retain_texts: int = 512
    http: bool = True
    keep: bool = False
    real_vectors: int = 2000
    noise: float = 0.02
    seed: int = 7
    maintenance_work_mem: str = "auto"
    app_args: dict[str, Any] | None = None
    out: Path = Path("bench-results")
    plot: bool = True
    quiet: bool = False


def corpus_for(size: int, spec: ScaleSpec) -> Corpus:
    """N in the large namespace, N/100 in each of the others."""
    sizes = {NAMESPACE: size}
    for i in range(2, spec.namespaces + 1):
        sizes[f"{NAMESPACE}-{i}"] = max(1, size // 100)
    return Corpus(sizes, real=spec.real_vectors, noise=spec.noise, seed=spec.seed)


def _fingerprint(corpus: Corpus, settings: Settings, embedder) -> str:
    """What a kept corpus holds. Not the schema: a kept database is migrated forward like anyone's
    (migrations carry existing rows along, as 0007 backfilled the vector graph), so a new
    migration does not cost a rebuild; a loader change does (``LOADER_VERSION``)."""
    return json.dumps(
        {
            "sizes": corpus.sizes,
            "real": corpus.real,
            "noise": corpus.noise,
            "seed": corpus.seed,
            "embedder": embedder.name,
            "loader": LOADER_VERSION,
        },
        sort_keys=True,
    )


@contextlib.asynccontextmanager
async def corpus_brain(settings: Settings, embedder, corpus: Corpus, spec: ScaleSpec) -> AsyncIterator[tuple]:
    """``(brain, server facts, dsn, load report)`` on a database holding ``corpus``: a scratch one,
    or with ``spec.keep`` one kept between runs and reused while its fingerprint matches."""
    from cabrain.store.scratch import kept_brain, mark_complete, scratch_brain

    if spec.keep:
        name = f"cabrain_bench_{corpus.total}"
        fingerprint = _fingerprint(corpus, settings, embedder)
        async with kept_brain(settings, embedder, name=name, fingerprint=fingerprint) as (brain, facts, dsn, complete):
            if complete:
                _progress(f"  reusing the kept corpus in database {name}", spec.quiet)
                yield brain, facts, dsn, {"reused": name}
                return
            await brain.create_agent(AGENT)
            report = await _timed_load(brain, corpus, spec)
            await mark_complete(brain, name, fingerprint)
            yield brain, facts, dsn, {**report, "kept": name}
        return
    async with scratch_brain(settings, embedder, prefix="cabrain_bench") as (brain, facts, dsn):
        await brain.create_agent(AGENT)
        yield brain, facts, dsn, await _timed_load(brain, corpus, spec)


async def _timed_load(brain, corpus: Corpus, spec: ScaleSpec) -> dict[str, Any]:
    started = time.perf_counter()
    memory = spec.maintenance_work_mem
    if memory == "auto":
        memory = graph_build_memory(corpus.total, brain.embedder.dim)
    phases = await bulk_load(brain, corpus, maintenance_work_mem=memory, quiet=spec.quiet)
    return {
        "seconds": round(time.perf_counter() - started, 1),
        **{k: round(v, 1) for k, v in phases.items()},
        "maintenance_work_mem": memory,
    }


# --- measuring ------------------------------------------------------------------------------------
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
        _progress(f"  a private redis-server on 127.0.0.1:{port} for the L1 cache", quiet)
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
    import psutil

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
    from cabrain import identity
    from cabrain.bench import local_service
    from cabrain.client import AsyncClient

    async with brain.pool.acquire() as conn:
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
                _progress(
                    f"  http, concurrency {c}: p95 {levels[c].get('p95', 0):.1f} ms, errors {levels[c]['errors']}",
                    spec.quiet,
                )
            out["recall"] = levels
            if cached:
                out["recall_cache_hit"] = hits
        out["memory"] = await asyncio.to_thread(service_memory)
    return out


PREWARM = """
SELECT coalesce(sum(pg_prewarm(i.indexrelid)), 0) * current_setting('block_size')::bigint / 1048576
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'hnsw' OR c.relname = 'memory_terms_lookup'
"""


# The rows recall reads (the vectors' table for its namespace check, the memories' partitions for
# the answers) into the operating system's cache, not shared buffers, which the indexes fill.
PREWARM_ROWS = """
SELECT coalesce(sum(pg_prewarm(c.oid, 'read')), 0) * current_setting('block_size')::bigint / 1048576
FROM pg_class c
WHERE c.relkind = 'r' AND (c.relname = 'memory_vectors'
      OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'memories'::regclass))
"""


async def prewarm(brain) -> dict[str, Any]:
    """Read the hot path's indexes (the HNSW graphs of memories and passages, the BM25 postings
    index) into shared buffers, and the rows recall reads into the operating system's cache, with
    pg_prewarm - as a long-running server that has answered recalls holds them (at 1M, a cold row
    cache tripled recall's p95); said in the report when the server lacks the extension."""
    import asyncpg

    async with brain.pool.acquire() as conn:
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            indexes = float(await conn.fetchval(PREWARM))
            rows = float(await conn.fetchval(PREWARM_ROWS))
            return {"prewarmed_mb": round(indexes, 1), "rows_cached_mb": round(rows, 1)}
        except asyncpg.PostgresError as exc:
            return {"prewarmed_mb": 0, "skipped": f"pg_prewarm: {exc}"}


async def run_size(settings: Settings, embedder, size: int, spec: ScaleSpec, redis: tuple) -> dict[str, Any]:
    from cabrain.brain import Brain
    from cabrain.settings import RerankerProvider

    corpus = corpus_for(size, spec)
    rng = random.Random(spec.seed * 1000 + size)
    result: dict[str, Any] = {"memories": size, "total_memories": corpus.total, "namespaces": len(corpus.sizes)}
    _progress(
        f"corpus of {size:,} memories (+{corpus.total - size:,} in {len(corpus.sizes) - 1} small namespaces)",
        spec.quiet,
    )
    async with corpus_brain(settings, embedder, corpus, spec) as (brain, facts, dsn, load):
        result["load"] = load
        result["machine"] = machine_facts(facts, embedder)
        _progress("  reading the indexes into shared buffers", spec.quiet)
        result["warm"] = await prewarm(brain)
        async with brain.pool.acquire() as conn:
            result["database_mb"] = round(await conn.fetchval("SELECT pg_database_size(current_database())") / 2**20, 1)
            result["shared_buffers"] = await conn.fetchval("SHOW shared_buffers")

        _progress("  floor: query embedding and bare index probes", spec.quiet)
        warm = synthetic_queries(rng, 10)
        await measure_floor(
            brain,
            warm,
            [await embedder.embed_query(t) for t in warm],
            settings.recall_candidates,
            settings.bm25_postings_per_term,
        )  # warm-up, untimed
        texts = synthetic_queries(rng, spec.queries)
        embed_ms, vectors = [], []
        for text in texts:
            t0 = time.perf_counter()
            vectors.append(await embedder.embed_query(text))
            embed_ms.append((time.perf_counter() - t0) * 1000)
        floor = await measure_floor(brain, texts, vectors, settings.recall_candidates, settings.bm25_postings_per_term)
        result["embed_query_ms"] = percentiles(embed_ms)
        result["floor_ms"] = floor

        _progress("  recall in process, no cache", spec.quiet)
        result["recall"] = await measure_recall(brain, rng, spec)
        result["overhead"] = (
            overhead_over_floor(result["recall"][1], result["embed_query_ms"], floor) if 1 in result["recall"] else {}
        )
        small = next((n for n in corpus.sizes if n != NAMESPACE), None)
        if small is not None:
            _progress(f"  recall in process, in a small namespace ({corpus.sizes[small]:,} memories)", spec.quiet)
            result["recall_small"] = {
                "namespace": small,
                "memories": corpus.sizes[small],
                "recall": await measure_recall(brain, rng, spec, namespace=small, levels=[1]),
            }
        if settings.reranker_provider != RerankerProvider.NONE:
            _progress("  recall in process, reranked", spec.quiet)
            result["recall_rerank"] = await measure_recall(brain, rng, spec, rerank=True)
        else:
            result["recall_rerank"] = {"skipped": "no reranker configured (CABRAIN_RERANKER_PROVIDER)"}

        redis_url, redis_source = redis
        if redis_url is not None:
            _progress("  recall in process, through the L1 cache", spec.quiet)
            cached_brain = await Brain.open(
                settings.model_copy(update={"redis_url": SecretStr(redis_url)}), dsn=dsn, embedder=embedder
            )
            try:
                result["recall_cache"] = {"source": redis_source, **await measure_cached(cached_brain, rng, spec)}
            finally:
                await cached_brain.close()
        else:
            result["recall_cache"] = {"skipped": redis_source}

        _progress(
            f"  retain: {spec.retain_texts} texts batched, {min(64, spec.retain_texts)} one at a time", spec.quiet
        )
        batched = [synthetic_text(rng) for _ in range(spec.retain_texts)]
        singles = [synthetic_text(rng) for _ in range(min(64, spec.retain_texts))]
        result["retain"] = await measure_retain(brain, embedder, batched, singles, NAMESPACE)

        if spec.http:
            http_settings = settings.model_copy(update={"redis_url": SecretStr(redis_url) if redis_url else None})
            result["http"] = await measure_http(http_settings, brain, dsn, rng, spec, cached=redis_url is not None)
    return result


async def run(settings: Settings, spec: ScaleSpec) -> dict[str, Any]:
    """Every measurement at every size in ``spec``; writes ``results.json`` (and the plot)."""
    from cabrain.providers.embedders import load_embedder

    if spec.plot:
        _require_matplotlib()
    if spec.http and settings.ray_address:
        raise ConfigError("the benchmark runs its own local Ray; unset CABRAIN_RAY_ADDRESS (or pass --no-http)")
    spec.out.mkdir(parents=True, exist_ok=True)
    embedder = load_embedder(settings)
    results: dict[str, Any] = {
        "sizes": [],
        "synthetic": SYNTHETIC,
        "spec": {
            "namespaces": spec.namespaces,
            "queries": spec.queries,
            "concurrency": spec.concurrency,
            "retain_texts": spec.retain_texts,
            "real_vectors": spec.real_vectors,
            "noise": spec.noise,
        },
    }
    with l1_cache(settings, spec.out / "redis", spec.quiet) as redis:
        for size in spec.sizes:
            results["sizes"].append(await run_size(settings, embedder, size, spec, redis))
            (spec.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    if spec.plot:
        plot(results, spec.out / "latency.png")
    return results


SYNTHETIC = (
    "Texts come from built-in Arabic and English word lists (8-40 words). Vectors: --real-vectors texts "
    "are embedded for real; every other memory gets a real vector plus Gaussian noise (--noise per "
    "dimension), re-normalised. Query texts, their embedding and the retain texts are real "
    "(the embedder runs on them)."
)


# --- reporting ------------------------------------------------------------------------------------
def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "the latency plot needs matplotlib", hint="pip install 'cabrain[bench]', or pass --no-plot"
        ) from exc


def plot(results: dict[str, Any], path: Path) -> None:
    """Recall p50 and p95 against corpus size: in process, over HTTP, and the floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["memories"] for r in results["sizes"]]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    series = [
        ("in process", lambda r: r["recall"].get(1, {}), "-o"),
        ("HTTP", lambda r: r.get("http", {}).get("recall", {}).get(1, {}), "-s"),
    ]
    for label, pick, style in series:
        for p, alpha in (("p50", 1.0), ("p95", 0.55)):
            ys = [pick(r).get(p) for r in results["sizes"]]
            if all(y is not None for y in ys):
                ax.plot(sizes, ys, style, alpha=alpha, label=f"recall {p}, {label}, concurrency 1")
    floor = [r["overhead"].get("floor_p95_ms") for r in results["sizes"]]
    if all(f is not None for f in floor):
        ax.plot(sizes, floor, "--x", color="grey", label="floor p95 (query embedding + bare probes)")
    ax.set_xscale("log")
    ax.set_xlabel("memories in the namespace")
    ax.set_ylabel("latency (ms)")
    ax.set_title("CaBrain recall latency (hybrid, k=10, no rerank, no cache)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _row(label: str, p: dict[str, Any]) -> str:
    if not p or "p50" not in p:
        return f"  {label:<44} (no successful calls; errors {p.get('errors', '?')})"
    errors = f"  errors {p['errors']}" if p.get("errors") else ""
    return f"  {label:<44} {p['p50']:8.1f} {p['p95']:8.1f} {p['p99']:8.1f} {p.get('rps', 0):8.1f}{errors}"


def render(results: dict[str, Any]) -> str:
    lines = []
    for r in results["sizes"]:
        lines.append(
            f"== {r['memories']:,} memories in the large namespace ({r['total_memories']:,} in "
            f"{r['namespaces']} namespaces; database {r['database_mb']:,.0f} MB)"
        )
        load = r["load"]
        lines.append(
            f"  corpus: {'reused ' + load['reused'] if 'reused' in load else str(load['seconds']) + ' s to load'}"
        )
        warm = r.get("warm", {})
        lines.append(
            f"  indexes read into shared buffers first: {warm.get('prewarmed_mb', 0):,.0f} MB, "
            f"rows into the OS cache: {warm.get('rows_cached_mb', 0):,.0f} MB"
            + (f" ({warm['skipped']})" if "skipped" in warm else "")
        )
        rt = r["retain"]
        lines.append(
            f"  retain batched ({rt.get('retain_call', rt['batch'])} a call) {rt['retain_batched_per_s']:.1f}/s vs bare "
            f"embedder ({rt['batch']} a call) {rt['bare_embedder_batched_per_s']:.1f}/s "
            f"({rt['ratio_batched']:.0%}); one at a time {rt['retain_single_per_s']:.1f}/s vs "
            f"{rt['bare_embedder_single_per_s']:.1f}/s ({rt['ratio_single']:.0%})"
        )
        lines.append(f"  {'recall (ms)':<44} {'p50':>8} {'p95':>8} {'p99':>8} {'req/s':>8}")
        e = r["embed_query_ms"]
        lines.append(f"  {'floor: query embedding':<44} {e['p50']:8.1f} {e['p95']:8.1f} {e['p99']:8.1f}")
        for probe, p in r["floor_ms"].items():
            lines.append(f"  {'floor: bare ' + probe + ' probe':<44} {p['p50']:8.1f} {p['p95']:8.1f} {p['p99']:8.1f}")
        for c, p in r["recall"].items():
            lines.append(_row(f"in process, no cache, concurrency {c}", p))
            if p.get("stages"):
                lines.append(
                    "    its stages, p50 / p95: "
                    + ", ".join(f"{stage} {q['p50']:.1f} / {q['p95']:.1f}" for stage, q in p["stages"].items())
                )
        small = r.get("recall_small")
        if small:
            for c, p in small["recall"].items():
                lines.append(_row(f"in process, {small['memories']:,}-memory namespace, c {c}", p))
        cache = r["recall_cache"]
        if "skipped" in cache:
            lines.append(f"  L1 cache: not measured ({cache['skipped']})")
        else:
            for kind in ("miss", "hit"):
                for c, p in cache[kind].items():
                    lines.append(_row(f"in process, cache {kind}, concurrency {c}", p))
        rerank = r["recall_rerank"]
        if "skipped" in rerank:
            lines.append(f"  rerank: not measured ({rerank['skipped']})")
        else:
            for c, p in rerank.items():
                lines.append(_row(f"in process, reranked, concurrency {c}", p))
        http = r.get("http")
        if http:
            for c, p in http["recall"].items():
                lines.append(_row(f"HTTP{', cache miss' if http['cache'] else ''}, concurrency {c}", p))
            for c, p in http.get("recall_cache_hit", {}).items():
                lines.append(_row(f"HTTP, cache hit, concurrency {c}", p))
            lines.append(
                f"  service memory (RSS): {http['memory']['total_mb']:,.0f} MB "
                f"({', '.join(f'{k} {v:,.0f}' for k, v in http['memory']['processes_mb'].items())})"
            )
        o = r["overhead"]
        if o:
            lines.append(
                f"  recall over the floor at concurrency 1: {o['ratio_p50']:.2f}x at p50, {o['ratio_p95']:.2f}x at p95"
            )
    return "\n".join(lines)
