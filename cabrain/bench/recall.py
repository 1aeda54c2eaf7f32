"""``cabrain bench recall``: recall latency at scale, with the embedding time measured apart.

Builds a synthetic corpus of N memories in one namespace (mixed Arabic and English sentences of
8-40 words from built-in word lists, ``valid_at`` spread over the last 12 months so the monthly
partitions are real), loads it into a scratch database, and times recall at concurrency 1.

What is synthetic, and why: embedding N texts on two CPU cores takes hours at 1M, so only
``--real-vectors`` texts are embedded for real; every other memory gets a vector derived from a
real one (Gaussian noise of ``--noise`` per dimension, re-normalised), which keeps the index at
its true scale and neighbourhood structure. Query vectors are always real embeddings of query
text, and that embedding time is reported separately from recall.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from cabrain.bench.corpus import AGENT, NAMESPACE, synthetic_queries
from cabrain.bench.load import load_namespace
from cabrain.bench.measure import machine_facts, measure_floor, overhead_over_floor
from cabrain.bench.progress import say
from cabrain.eval import percentiles
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.types import RecallMode, RecallQuery


@dataclass
class BenchResult:
    memories: int
    real_vectors: int
    load_s: float
    embed_query_ms: dict[str, float]
    recall_ms: dict[str, dict[str, float]]
    machine: dict[str, Any]
    floor_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # bare index probes
    overhead: dict[str, float] = field(default_factory=dict)  # recall / (embedding + probes)

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__


async def run_recall_bench(
    settings: Settings,
    *,
    memories: int,
    queries: int,
    real_vectors: int,
    noise: float,
    seed: int = 7,
    quiet: bool = False,
) -> BenchResult:
    """Load ``memories`` synthetic memories into a scratch database and time ``queries`` recalls."""
    embedder = load_embedder(settings)
    async with scratch_brain(settings, embedder, prefix="cabrain_bench") as (brain, facts, _):
        await brain.create_agent(AGENT)
        started = time.perf_counter()
        await load_namespace(brain, memories, min(real_vectors, memories), noise, seed, quiet)
        load_s = time.perf_counter() - started
        rng = random.Random(seed + 1)
        texts = synthetic_queries(rng, queries)
        embed_ms, vectors = [], []
        for text in texts:
            t0 = time.perf_counter()
            vectors.append(await brain.engine.embed_query(text))
            embed_ms.append((time.perf_counter() - t0) * 1000)
        recall_ms: dict[str, dict[str, float]] = {}
        for mode in (RecallMode.HYBRID, RecallMode.VECTOR, RecallMode.BM25):
            total, without_embed = [], []
            for text in texts:
                result = await brain.recall(AGENT, RecallQuery(text, NAMESPACE, k=10, mode=mode, rerank=False))
                total.append(result.timings_ms["total_ms"])
                without_embed.append(result.timings_ms["total_ms"] - result.timings_ms.get("embed_ms", 0.0))
            recall_ms[mode.value] = percentiles(total)
            recall_ms[f"{mode.value} (without query embedding)"] = percentiles(without_embed)
            say(f"  {mode.value}: p95 {recall_ms[mode.value]['p95']:.1f} ms", quiet)
        floor = await measure_floor(brain, texts, vectors, settings.recall_candidates, settings.bm25_postings_per_term)
        overhead = overhead_over_floor(recall_ms[RecallMode.HYBRID.value], percentiles(embed_ms), floor)
        say(f"  floor: hnsw p50 {floor['hnsw']['p50']:.1f} ms, bm25 p50 {floor['bm25']['p50']:.1f} ms", quiet)
    machine = machine_facts(facts, embedder)
    return BenchResult(
        memories, min(real_vectors, memories), load_s, percentiles(embed_ms), recall_ms, machine, floor, overhead
    )


def render(result: BenchResult) -> str:
    lines = [
        f"memories: {result.memories} in one namespace ({result.real_vectors} real vectors, the rest derived)",
        f"load: {result.load_s:.0f} s",
        f"query embedding: p50 {result.embed_query_ms['p50']:.1f} ms, p95 {result.embed_query_ms['p95']:.1f} ms",
        f"{'recall (k=10, no rerank, no cache)':<48} {'p50':>8} {'p95':>8} {'p99':>8}",
    ]
    for mode, p in result.recall_ms.items():
        lines.append(f"{mode:<48} {p['p50']:8.1f} {p['p95']:8.1f} {p['p99']:8.1f}")
    for probe, p in result.floor_ms.items():
        lines.append(f"{'floor: bare ' + probe + ' probe':<48} {p['p50']:8.1f} {p['p95']:8.1f} {p['p99']:8.1f}")
    if result.overhead:
        o = result.overhead
        lines.append(
            f"hybrid recall over the floor (query embedding + both probes): {o['ratio_p50']:.2f}x at p50 "
            f"({o['floor_p50_ms']:.1f} ms), {o['ratio_p95']:.2f}x at p95 ({o['floor_p95_ms']:.1f} ms)"
        )
    return "\n".join(lines)


def main_json(result: BenchResult) -> str:
    return json.dumps(result.as_dict(), indent=2, ensure_ascii=False)
