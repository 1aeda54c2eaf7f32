"""``cabrain bench``: the whole performance picture at one or more corpus sizes, in one run.

For each size N it builds (or reuses, with ``--keep``) a synthetic corpus: N memories in one large
namespace plus ``namespaces - 1`` small ones of N/100 each, mixed Arabic and English of 8-40 words
(:mod:`cabrain.bench.load` says what is synthetic). On it, it measures:

- retain throughput, batched and one at a time, beside the bare embedder's on the same texts;
- recall p50/p95/p99 at each concurrency in process, without a cache, and with the L1 cache
  (Redis) both missing and hitting; with rerank when a reranker is configured;
- the floor: bare query embedding and bare HNSW and BM25 probes, and recall's ratio over it;
- all of it after reading the hot path's indexes into shared buffers (``pg_prewarm``, as a
  long-running server holds them) and a short untimed warm-up;
- recall over HTTP (a local Ray and the Serve application) at each concurrency, the errors seen
  at every level, and the memory the service's processes hold;
- the console's server time per page (:mod:`cabrain.bench.console`).

Results go to ``<out>/results.json`` and a plot of latency against corpus size to
``<out>/latency.png``.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import AsyncIterator
from typing import Any

from pydantic import SecretStr

from cabrain.bench.console import measure_console, render_console
from cabrain.bench.corpus import AGENT, NAMESPACE, synthetic_queries, synthetic_text
from cabrain.bench.load import Corpus, bulk_load, graph_build_memory
from cabrain.bench.measure import machine_facts, measure_floor, overhead_over_floor
from cabrain.bench.plot import plot, require_matplotlib
from cabrain.bench.progress import say
from cabrain.bench.scale_measure import (
    l1_cache,
    measure_cached,
    measure_http,
    measure_recall,
    measure_retain,
    prewarm,
)
from cabrain.bench.scale_spec import ScaleSpec, corpus_for
from cabrain.brain import Brain
from cabrain.errors import ConfigError
from cabrain.eval import percentiles
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import kept_brain, mark_complete, scratch_brain
from cabrain.settings import RerankerProvider, Settings
from cabrain.store import bench as sql

__all__ = ["ScaleSpec", "render", "run"]

LOADER_VERSION = 1  # part of a kept corpus' fingerprint: a changed loader rebuilds it


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
    if spec.keep:
        name = f"cabrain_bench_{corpus.total}"
        fingerprint = _fingerprint(corpus, settings, embedder)
        async with kept_brain(settings, embedder, name=name, fingerprint=fingerprint) as (brain, facts, dsn, complete):
            if complete:
                say(f"  reusing the kept corpus in database {name}", spec.quiet)
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
        memory = graph_build_memory(corpus.total, brain.engine.embedder.dim)
    phases = await bulk_load(brain, corpus, maintenance_work_mem=memory, quiet=spec.quiet)
    return {
        "seconds": round(time.perf_counter() - started, 1),
        **{k: round(v, 1) for k, v in phases.items()},
        "maintenance_work_mem": memory,
    }


async def run_size(settings: Settings, embedder, size: int, spec: ScaleSpec, redis: tuple) -> dict[str, Any]:
    """Every measurement on the corpus of ``size`` (see the module docstring)."""
    corpus = corpus_for(size, spec)
    rng = random.Random(spec.seed * 1000 + size)
    result: dict[str, Any] = {"memories": size, "total_memories": corpus.total, "namespaces": len(corpus.sizes)}
    say(
        f"corpus of {size:,} memories (+{corpus.total - size:,} in {len(corpus.sizes) - 1} small namespaces)",
        spec.quiet,
    )
    async with corpus_brain(settings, embedder, corpus, spec) as (brain, facts, dsn, load):
        result["load"] = load
        result["machine"] = machine_facts(facts, embedder)
        say("  reading the indexes into shared buffers", spec.quiet)
        result["warm"] = await prewarm(brain)
        async with brain.engine.pool.acquire() as conn:
            result["database_mb"] = round(await conn.fetchval(sql.DATABASE_SIZE) / 2**20, 1)
            result["shared_buffers"] = await conn.fetchval(sql.SHARED_BUFFERS)

        say("  floor: query embedding and bare index probes", spec.quiet)
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

        say("  recall in process, no cache", spec.quiet)
        result["recall"] = await measure_recall(brain, rng, spec)
        result["overhead"] = (
            overhead_over_floor(result["recall"][1], result["embed_query_ms"], floor) if 1 in result["recall"] else {}
        )
        small = next((n for n in corpus.sizes if n != NAMESPACE), None)
        if small is not None:
            say(f"  recall in process, in a small namespace ({corpus.sizes[small]:,} memories)", spec.quiet)
            result["recall_small"] = {
                "namespace": small,
                "memories": corpus.sizes[small],
                "recall": await measure_recall(brain, rng, spec, namespace=small, levels=[1]),
            }
        say("  console pages, server time", spec.quiet)
        result["console"] = await measure_console(brain, rng)
        for line in render_console(result["console"]):  # now: a later step's failure does not lose them
            say(line, spec.quiet)
        if settings.reranker_provider != RerankerProvider.NONE:
            say("  recall in process, reranked", spec.quiet)
            result["recall_rerank"] = await measure_recall(brain, rng, spec, rerank=True)
        else:
            result["recall_rerank"] = {"skipped": "no reranker configured (CABRAIN_RERANKER_PROVIDER)"}

        redis_url, redis_source = redis
        if redis_url is not None:
            say("  recall in process, through the L1 cache", spec.quiet)
            cached_brain = await Brain.open(
                settings.model_copy(update={"redis_url": SecretStr(redis_url)}), dsn=dsn, embedder=embedder
            )
            try:
                result["recall_cache"] = {"source": redis_source, **await measure_cached(cached_brain, rng, spec)}
            finally:
                await cached_brain.close()
        else:
            result["recall_cache"] = {"skipped": redis_source}

        say(f"  retain: {spec.retain_texts} texts batched, {min(64, spec.retain_texts)} one at a time", spec.quiet)
        batched = [synthetic_text(rng) for _ in range(spec.retain_texts)]
        singles = [synthetic_text(rng) for _ in range(min(64, spec.retain_texts))]
        result["retain"] = await measure_retain(brain, embedder, batched, singles, NAMESPACE)

        if spec.http:
            http_settings = settings.model_copy(update={"redis_url": SecretStr(redis_url) if redis_url else None})
            result["http"] = await measure_http(http_settings, brain, dsn, rng, spec, cached=redis_url is not None)
    return result


async def run(settings: Settings, spec: ScaleSpec) -> dict[str, Any]:
    """Every measurement at every size in ``spec``; writes ``results.json`` (and the plot)."""
    if spec.plot:
        require_matplotlib()
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
        if r.get("console"):
            lines += render_console(r["console"])
        o = r["overhead"]
        if o:
            lines.append(
                f"  recall over the floor at concurrency 1: {o['ratio_p50']:.2f}x at p50, {o['ratio_p95']:.2f}x at p95"
            )
    return "\n".join(lines)
