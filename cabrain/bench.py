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

import contextlib
import json
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cabrain.eval import percentiles
from cabrain.settings import Settings
from cabrain.types import RecallMode, RecallQuery

EN_WORDS = """
deploy release pipeline cache database index query latency server cluster node replica backup
restore migration schema table column partition vector embedding model token prompt agent memory
recall retain namespace grant policy review design decision meeting roadmap budget invoice customer
support ticket incident outage alert metric dashboard monitor log trace error exception timeout retry
queue worker scheduler job batch stream event message topic consumer producer kafka redis postgres
python rust golang kubernetes docker container image registry secret credential token rotation
certificate domain network firewall proxy gateway endpoint route handler request response payload
json yaml config setting flag feature experiment rollout canary staging production sandbox test
unit integration benchmark profile memory cpu gpu disk storage bucket object archive iceberg parquet
team engineer manager product designer analyst client partner vendor contract quarter week month
monday tuesday wednesday thursday friday morning evening cairo alexandria dubai riyadh london berlin
""".split()
AR_WORDS = """
نشر إصدار خط قاعدة بيانات فهرس استعلام زمن خادم عنقود عقدة نسخة احتياطية استعادة ترحيل جدول عمود
قسم متجه نموذج رمز وكيل ذاكرة استرجاع حفظ صلاحية سياسة مراجعة تصميم قرار اجتماع خطة ميزانية فاتورة
عميل دعم تذكرة حادث انقطاع تنبيه مقياس لوحة مراقبة سجل خطأ استثناء مهلة إعادة طابور عامل مجدول مهمة
دفعة رسالة موضوع مستهلك منتج شهادة نطاق شبكة جدار وكيل بوابة نقطة طلب استجابة إعداد ميزة تجربة إطلاق
اختبار وحدة تكامل قياس ملف وحدة معالجة قرص تخزين أرشيف فريق مهندس مدير منتج مصمم محلل شريك مورد عقد
ربع أسبوع شهر الاثنين الثلاثاء الأربعاء الخميس الجمعة صباح مساء القاهرة الإسكندرية دبي الرياض لندن
""".split()
AGENT = "bench"
NAMESPACE = "bench"


def synthetic_text(rng: random.Random) -> str:
    words = AR_WORDS if rng.random() < 0.5 else EN_WORDS
    length = rng.randint(8, 40)
    return " ".join(rng.choice(words) for _ in range(length)) + f" #{rng.randint(0, 10**6)}"


def synthetic_queries(rng: random.Random, n: int) -> list[str]:
    """Query texts of 3-10 words, drawn like the corpus."""
    return [" ".join(synthetic_text(rng).split()[: rng.randint(3, 10)]) for _ in range(n)]


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


# The floor: each index alone, on the same database, with no scoping, filters, fusion or row
# fetching - what a recall could not go below. HNSW: the namespace's nearest ids through the HNSW
# graph of memory_vectors (sorting disabled, as recall runs it). BM25: the query terms' top
# postings by precomputed impact, summed per memory.
HNSW_PROBE = "SELECT id FROM memory_vectors WHERE namespace = $1 ORDER BY embedding <=> $2 LIMIT $3"
BM25_PROBE = """
SELECT p.memory_id, sum(p.impact) AS s
FROM unnest($2::text[]) AS q(term)
CROSS JOIN LATERAL (
    SELECT t.memory_id, t.impact FROM memory_terms t
    WHERE t.namespace = $1 AND t.term = q.term ORDER BY t.impact DESC LIMIT $3
) p
GROUP BY p.memory_id ORDER BY s DESC LIMIT $4
"""


async def measure_floor(brain, texts: list[str], vectors: list, candidates: int, postings: int) -> dict:
    """p50/p95/p99 of the bare HNSW and BM25 probes for these queries (vectors precomputed)."""
    from cabrain.search.tokenizer import tokenize
    from cabrain.store.planner import fetch_without

    hnsw, bm25 = [], []
    async with brain.pool.acquire() as conn:
        for text, vector in zip(texts, vectors, strict=True):
            t0 = time.perf_counter()
            await fetch_without(
                conn,
                HNSW_PROBE,
                (NAMESPACE, np.asarray(vector, dtype=np.float32), candidates),
                disable=("enable_sort",),
                generic=True,
            )
            t1 = time.perf_counter()
            await conn.fetch(BM25_PROBE, NAMESPACE, sorted(set(tokenize(text))), postings, candidates)
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
    import os
    import platform

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "postgres": facts.version,
        "pgvector": facts.vector_available,
        **({"embedder": embedder.name} if embedder is not None else {}),
    }


def _progress(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


async def _load(brain, n: int, real: int, noise: float, seed: int, quiet: bool) -> None:
    """N memories in the benchmark namespace, through the bulk loader (:mod:`cabrain.bench_load`)."""
    from cabrain.bench_load import Corpus, bulk_load

    await bulk_load(brain, Corpus({NAMESPACE: n}, real=real, noise=noise, seed=seed), quiet=quiet)


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
    from cabrain.providers.embedders import load_embedder
    from cabrain.store.scratch import scratch_brain

    embedder = load_embedder(settings)
    async with scratch_brain(settings, embedder, prefix="cabrain_bench") as (brain, facts, _):
        await brain.create_agent(AGENT)
        started = time.perf_counter()
        await _load(brain, memories, min(real_vectors, memories), noise, seed, quiet)
        load_s = time.perf_counter() - started
        rng = random.Random(seed + 1)
        texts = synthetic_queries(rng, queries)
        embed_ms, vectors = [], []
        for text in texts:
            t0 = time.perf_counter()
            vectors.append(await brain.embed_query(text))
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
            _progress(f"  {mode.value}: p95 {recall_ms[mode.value]['p95']:.1f} ms", quiet)
        floor = await measure_floor(brain, texts, vectors, settings.recall_candidates, settings.bm25_postings_per_term)
        overhead = overhead_over_floor(recall_ms[RecallMode.HYBRID.value], percentiles(embed_ms), floor)
        _progress(f"  floor: hnsw p50 {floor['hnsw']['p50']:.1f} ms, bm25 p50 {floor['bm25']['p50']:.1f} ms", quiet)
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


# --- cabrain bench http ---------------------------------------------------------------------------
@dataclass
class HttpBenchResult:
    memories: int
    queries: int
    http: dict[int, dict[str, Any]]  # concurrency -> p50/p95/p99 (ms), rps, errors
    in_process: dict[int, dict[str, Any]]
    machine: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__


async def timed_calls(call, texts: list[str], concurrency: int) -> dict[str, Any]:
    """Run ``call(text)`` for every text, ``concurrency`` at a time: latency percentiles (ms) of
    the calls that succeeded, throughput, and the errors (counted, with the first few kept)."""
    import asyncio

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
    import asyncio

    from cabrain import service

    if settings.ray_address:
        from cabrain.errors import ConfigError

        raise ConfigError("the benchmark runs its own local Ray; unset CABRAIN_RAY_ADDRESS")
    _progress("  starting a local Ray and the Serve application", quiet)
    started_ray = service.init_ray(settings)  # on the main thread: Ray installs its signal handlers
    try:
        await asyncio.to_thread(service.deploy, settings, dsn, app_args)
        await asyncio.to_thread(service.wait_ready, settings, progress=not quiet)
        yield service.api_url(settings)
    finally:
        if started_ray:
            import ray
            from ray import serve

            await asyncio.to_thread(serve.shutdown)
            await asyncio.to_thread(ray.shutdown)


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
    from cabrain import identity
    from cabrain.client import AsyncClient
    from cabrain.providers.embedders import load_embedder
    from cabrain.store.scratch import scratch_brain

    embedder = load_embedder(settings)
    rng = random.Random(seed)

    def fresh_texts() -> list[str]:
        return synthetic_queries(rng, queries)

    async with scratch_brain(settings, embedder, prefix="cabrain_httpbench") as (brain, facts, dsn):
        await brain.create_agent(AGENT)
        await _load(brain, memories, min(real_vectors, memories), noise, seed, quiet)
        async with brain.pool.acquire() as conn:
            key = (await identity.create_key(conn, AGENT, label="bench")).key

        async def local(text: str) -> None:
            await brain.recall(AGENT, RecallQuery(text, NAMESPACE, k=10, rerank=False))

        in_process = {}
        for c in concurrency:
            await timed_calls(local, fresh_texts()[:20], c)  # warm-up
            in_process[c] = await timed_calls(local, fresh_texts(), c)
            _progress(
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
                    _progress(
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


# --- cabrain bench capture -----------------------------------------------------------------------
CAPTURE_EVENTS = {
    "UserPromptSubmit": lambda i: {"prompt": f"How do we rotate the staging credentials, case {i}?"},
    "PostToolUse": lambda i: {
        "tool_name": "Edit",
        "tool_input": {"file_path": f"/src/app/mod{i}.py", "old_string": "retries = 3", "new_string": f"retries = {i}"},
        "tool_response": {},
    },
    "SessionStart": lambda i: {"source": "startup"},
}


async def run_capture_bench(
    settings: Settings, *, events: int, app_args: dict[str, Any] | None = None, quiet: bool = False
) -> dict[str, Any]:
    """Wall time of ``cabrain capture`` per hook event (process start to exit, as Claude Code sees
    it) against the service on a scratch database, per event type."""
    import asyncio
    import os
    import shutil
    import subprocess
    import tempfile

    from cabrain import identity
    from cabrain.faces.hooks import capture_command, compile_hook_modules
    from cabrain.providers.embedders import load_embedder
    from cabrain.store.scratch import scratch_brain

    command = capture_command()  # exactly what `cabrain hooks install` puts in Claude Code's settings
    compile_hook_modules()  # as `cabrain hooks install` does
    embedder = load_embedder(settings)
    async with scratch_brain(settings, embedder, prefix="cabrain_capturebench") as (brain, facts, dsn):
        await brain.create_agent(AGENT)
        async with brain.pool.acquire() as conn:
            key = (await identity.create_key(conn, AGENT, label="bench")).key
        async with local_service(settings, dsn, app_args, quiet=quiet) as url:
            home = tempfile.mkdtemp(prefix="cabrain-capturebench-")
            env = {k: v for k, v in os.environ.items() if not k.startswith("CABRAIN_")}
            env.update(CABRAIN_API_URL=url, CABRAIN_API_KEY=key, CABRAIN_HOME=home, CABRAIN_CAPTURE_NAMESPACE=NAMESPACE)
            times: dict[str, list[float]] = {name: [] for name in CAPTURE_EVENTS}
            for i in range(events):
                for name, fields in CAPTURE_EVENTS.items():
                    event = {"session_id": f"bench-{i}", "cwd": home, "hook_event_name": name, **fields(i)}
                    t0 = time.perf_counter()
                    done = await asyncio.to_thread(
                        subprocess.run,
                        command,
                        shell=True,
                        input=json.dumps(event),
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=60,
                        check=False,
                    )
                    times[name].append((time.perf_counter() - t0) * 1000)
                    if done.returncode != 0:
                        raise RuntimeError(f"cabrain capture failed on {name}: {done.stderr.strip()}")
                if not quiet and (i + 1) % 25 == 0:
                    _progress(f"  {i + 1}/{events} rounds", quiet)
            shutil.rmtree(home, ignore_errors=True)
    every = [t for ts in times.values() for t in ts]
    return {
        "events_per_type": events,
        "per_type_ms": {name: percentiles(ts) for name, ts in times.items()},
        "all_ms": percentiles(every),
        "machine": machine_facts(facts),
    }


def render_capture(result: dict[str, Any]) -> str:
    lines = [
        f"cabrain capture wall time per hook event ({result['events_per_type']} of each), service up",
        f"{'event':<20} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}",
    ]
    for name, p in [*result["per_type_ms"].items(), ("all", result["all_ms"])]:
        lines.append(f"{name:<20} {p['p50']:8.1f} {p['p95']:8.1f} {p['p99']:8.1f}")
    return "\n".join(lines)
