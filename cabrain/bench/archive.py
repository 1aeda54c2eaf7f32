"""``cabrain bench archive``: archive recall over millions of cold rows, scanned and through the index.

The cold rows are made directly in the Iceberg format, the way demotion writes them (the same
columns, tokens and embeddings), in appends of ``CHUNK`` rows, with their identities marked cold in
``memory_ids`` (archive recall answers only those): seeded synthetic texts (:mod:`cabrain.bench.corpus`)
over twelve months, and vectors derived from ``real`` really embedded ones (Gaussian noise of
``noise`` per dimension, re-normalised, as :mod:`cabrain.bench.load` derives them), so that no text
but those is embedded. For each size asked (ascending; each adds to the last), the namespace's
vector index is built as ``maintain`` builds it, then each query is timed scanning every row
(``probes=0``, the exact answer) and through the index (approximate), reporting p50/p95, the rows
each read, and the approximate answer's recall@k against the exact one, in hybrid and vector mode
(the index picks the rows by vector; a hybrid query's keyword list then ranks only the rows read, so
its recall is the lower of the two). The index's queries are timed twice: right after the exact
scans (which read the whole tier, pushing the index out of the page cache once it outgrows memory),
and after warming the columns a probe reads, as the service does on a namespace's first archive
recall (:func:`cabrain.search.archive_index.warm_soon`).

The corpus lives in a scratch database and a temporary warehouse, both removed at the end.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from cabrain.bench.corpus import AGENT, NAMESPACE, synthetic_queries, synthetic_text
from cabrain.bench.measure import memory_now, peak_rss
from cabrain.bench.progress import bar, say
from cabrain.eval import percentiles
from cabrain.progress import Lines
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.search import archive_index
from cabrain.search.archive import recall_archive
from cabrain.settings import Settings
from cabrain.sleep.index_cold import build
from cabrain.store import bench as sql
from cabrain.store.cold import FIELDS, month_of
from cabrain.text.tokenizer import tokenize
from cabrain.types import ArchiveQuery, RecallMode

CHUNK = 100_000  # cold rows per Iceberg append
ID_COLUMNS = ("id", "valid_at", "namespace", "tier", "cold_batch", "demoted_at", "owner_agent_id", "visibility")


def cold_rows(
    rng: random.Random, np_rng: np.random.Generator, base: np.ndarray, n: int, noise: float, now: datetime
) -> pa.Table:
    """``n`` synthetic cold rows in the cold table's schema (one demotion batch)."""
    vectors = base[np_rng.integers(0, len(base), n)] + np_rng.normal(0, noise, (n, base.shape[1])).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return cold_table(rng, [synthetic_text(rng) for _ in range(n)], vectors, now)


def cold_table(rng: random.Random, texts: list[str], vectors: np.ndarray, now: datetime) -> pa.Table:
    """Cold rows of ``texts`` with their unit ``vectors``, in the cold table's schema (one demotion
    batch; seeded ids, times over the year before ``now``, importance)."""
    n = len(texts)
    batch, demoted_at = str(uuid.uuid4()), now
    blobs = np.asarray(vectors, dtype="<f4")
    tokens = [tokenize(text) for text in texts]
    valid = [now - timedelta(days=30, seconds=rng.randint(0, 365 * 86400)) for _ in range(n)]
    data: dict[str, Any] = {
        "id": [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n)],
        "namespace": [NAMESPACE] * n,
        "valid_month": [month_of(v) for v in valid],
        "owner_agent_id": [AGENT] * n,
        "visibility": ["team"] * n,
        "network": ["experience"] * n,
        "memory_type": ["episodic"] * n,
        "content": texts,
        "source_kind": ["bench"] * n,
        "source_ref": [None] * n,
        "embedding": [row.tobytes() for row in blobs],
        "embedding_dim": [blobs.shape[1]] * n,
        "importance": [round(rng.random(), 3) for _ in range(n)],
        "access_count": [0] * n,
        "last_accessed_at": [None] * n,
        "created_at": valid,
        "valid_at": valid,
        "invalid_at": [None] * n,
        "superseded_by": [None] * n,
        "metadata": ["{}"] * n,
        "demote_batch": [batch] * n,
        "demoted_at": [demoted_at] * n,
        "terms": [" " + "  ".join(t) + " " if t else "" for t in tokens],
        "term_count": [len(t) for t in tokens],
    }
    schema = pa.schema([pa.field(name, kind, nullable=not required) for name, kind, required in FIELDS])
    return pa.Table.from_pydict(data, schema=schema)


def _build_lines(quiet: bool) -> Lines | None:
    """The index build's progress on stderr: its rows clustered, every 30 seconds."""
    return None if quiet else Lines(lambda line: say(f"    {line}", quiet), every_s=30.0)


async def _grow(brain, cold, target: int, have: int, state: dict, quiet: bool) -> float:
    """Add cold rows until the namespace holds ``target``; seconds spent."""
    started, first = time.perf_counter(), have
    while have < target:
        n = min(CHUNK, target - have)
        table = cold_rows(state["rng"], state["np_rng"], state["base"], n, state["noise"], state["now"])
        batch = uuid.UUID(table.column("demote_batch")[0].as_py())
        cold.append_batch(batch, table)
        records = [
            (uuid.UUID(i), v, NAMESPACE, "cold", batch, d, AGENT, "team")
            for i, v, d in zip(
                table.column("id").to_pylist(),
                table.column("valid_at").to_pylist(),
                table.column("demoted_at").to_pylist(),
                strict=True,
            )
        ]
        async with brain.engine.pool.acquire() as conn:
            await conn.copy_records_to_table("memory_ids", records=records, columns=ID_COLUMNS)
        have += n
        rate = (have - first) / max(time.perf_counter() - started, 1e-9)  # this size's rows, not the last's
        bar("cold rows written", have, target, quiet, f" ({rate:,.0f}/s)")
    return time.perf_counter() - started


async def _time(
    brain, texts: list[str], k: int, mode: RecallMode, probes: int
) -> tuple[list[float], list[int], list[list[str]], dict[str, float]]:
    """Each query's time, rows read and hits, and the median of each part of its time."""
    took, read, answers = [], [], []
    parts: dict[str, list[float]] = {}
    for text in texts:
        started = time.perf_counter()
        query = ArchiveQuery(text, NAMESPACE, k=k, mode=mode)
        result = await recall_archive(brain.engine, AGENT, query, probes=probes)
        took.append((time.perf_counter() - started) * 1000)
        read.append(result.scanned)
        answers.append([str(h.memory.id) for h in result.hits])
        for part, ms in result.timings_ms.items():
            parts.setdefault(part, []).append(ms)
    return took, read, answers, {part: round(float(np.median(ms)), 1) for part, ms in parts.items()}


async def _measure(brain, texts: list[str], k: int, mode: RecallMode, probes: int, exact_n: int) -> dict[str, Any]:
    """One mode's queries timed scanning every row (the first ``exact_n``), then through the index
    twice: with the page cache as the scans left it (they read the whole tier), and after warming
    the index's probed columns (:func:`cabrain.search.archive_index.warm`, what the service does on a
    namespace's first archive recall); recall@k over the queries done both ways."""
    memory: dict[str, dict[str, float]] = {}
    exact_ms, exact_read, exact, _ = await _time(brain, texts[:exact_n], k, mode, 0)
    memory["after_scans"] = memory_now()
    approx_ms, approx_read, approximate, parts = await _time(brain, texts, k, mode, probes)
    async with brain.engine.pool.acquire() as conn:
        index = await archive_index.load(conn, NAMESPACE)
    warmed = None if index is None else await asyncio.to_thread(archive_index.warm, brain.engine.cold_tier(), index)
    memory["after_warming"] = memory_now()
    warm_ms, _, _, warm_parts = await _time(brain, texts, k, mode, probes)
    memory["after_warmed_probes"] = memory_now()
    return {
        "exact_ms": {key: round(v, 1) for key, v in percentiles(exact_ms).items()},
        "approximate_ms": {key: round(v, 1) for key, v in percentiles(approx_ms).items()},
        "exact_rows_read": round(float(np.mean(exact_read)), 1),
        "approximate_rows_read": round(float(np.mean(approx_read)), 1),
        "recall_at_k": round(recall_at_k(approximate[:exact_n], exact), 4),
        "approximate_parts_ms": parts,  # medians: embedding, postings, the first pass, ranking, the hits' rows
        "warm_ms": {key: round(v, 1) for key, v in percentiles(warm_ms).items()},
        "warm_parts_ms": warm_parts,
        "warmed": None if warmed is None else {"mib": round(warmed.bytes / 2**20, 1), "s": round(warmed.seconds, 1)},
        "exact_queries": exact_n,
        "memory_mib": memory,  # this process's resident memory and the machine's available, by step
    }


def recall_at_k(approximate: list[list[str]], exact: list[list[str]]) -> float:
    """The share of the exact answers' hits that the approximate answers found too."""
    found = sum(len(set(a) & set(e)) for a, e in zip(approximate, exact, strict=True))
    return found / max(sum(len(e) for e in exact), 1)


async def run_archive_bench(
    settings: Settings,
    *,
    sizes: list[int],
    queries: int = 10,
    k: int = 10,
    modes: tuple[RecallMode, ...] = (RecallMode.HYBRID, RecallMode.VECTOR),
    probes: int | None = None,
    exact_queries: int | None = None,
    real: int = 256,
    noise: float = 0.02,
    seed: int = 7,
    quiet: bool = False,
) -> dict[str, Any]:
    """Archive recall at each of ``sizes`` cold rows, exact and through the index (module docstring);
    ``exact_queries``: how many of the queries also scan every row (default all: at ten million rows
    a scan takes minutes)."""
    probes = settings.cold_index_probes if probes is None else probes
    exact_n = queries if exact_queries is None else min(exact_queries, queries)
    embedder = load_embedder(settings)
    folder = tempfile.mkdtemp(prefix="cabrain-archivebench-")
    os.makedirs(f"{folder}/warehouse", exist_ok=True)
    run_settings = settings.model_copy(  # no warming in the background: the bench warms when it measures so
        update={
            "cold_catalog_uri": f"sqlite:///{folder}/catalog.db",
            "cold_warehouse": f"file://{folder}/warehouse",
            "cold_index_warm": False,
        }
    )
    rng = random.Random(seed)
    bits = settings.cold_index_code_bits
    result: dict[str, Any] = {"k": k, "probes": probes, "queries": queries, "code_bits": bits, "sizes": {}}
    try:
        async with scratch_brain(run_settings, embedder, prefix="cabrain_bench_archive") as (brain, _facts, _dsn):
            await brain.create_agent(AGENT)
            await brain.create_namespace(AGENT, NAMESPACE)
            base_texts = [synthetic_text(rng) for _ in range(real)]
            base = np.asarray(await brain.engine.embed_documents(base_texts), dtype=np.float32)
            state = {"rng": rng, "np_rng": np.random.default_rng(seed), "base": base, "noise": noise}
            state["now"] = datetime.now(UTC)
            texts = synthetic_queries(random.Random(seed + 1), queries)
            cold = brain.engine.cold_tier()
            have = 0
            for size in sorted(set(sizes)):
                say(f"  {size:,} cold rows", quiet)
                write_s = await _grow(brain, cold, size, have, state, quiet)
                have = size
                async with brain.engine.pool.acquire() as conn:
                    await conn.execute(sql.vacuum_analyze("memory_ids"))
                    started = time.perf_counter()
                    with peak_rss() as memory:
                        built = await build(conn, cold, NAMESPACE, progress=_build_lines(quiet))
                    build_s = time.perf_counter() - started
                after_build = memory_now()
                await _time(brain, texts[:1], k, RecallMode.HYBRID, probes)  # warm-up: metadata, the embedder
                entry: dict[str, Any] = {
                    "write_s": round(write_s, 1),
                    "index_build_s": round(build_s, 1),
                    "index_build_memory_mib": memory,  # this process's resident memory before and at its peak
                    "memory_after_build_mib": after_build,
                    "clusters": 0 if built is None else len(built.centroids),
                    "modes": {},
                }
                for mode in modes:
                    measured = entry["modes"][mode.value] = await _measure(brain, texts, k, mode, probes, exact_n)
                    say(
                        f"    {mode.value}: exact p95 {measured['exact_ms']['p95']:.0f} ms, through the index p95 "
                        f"{measured['approximate_ms']['p95']:.0f} ms ({measured['warm_ms']['p95']:.0f} warmed), "
                        f"recall@{k} {measured['recall_at_k']:.3f}",
                        quiet,
                    )
                result["sizes"][str(size)] = entry
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def render_archive(result: dict[str, Any]) -> str:
    k = result["k"]
    lines = [
        f"archive recall, {result['queries']} queries per mode, k={k}, {result['probes']} clusters probed, "
        f"their rows ranked by {result.get('code_bits', '?')}-bit codes:",
        f"  {'cold rows':>11} {'mode':>7} {'exact p50':>10} {'p95':>8} {'rows read':>10}   {'index p50':>10} "
        f"{'p95':>8} {'rows read':>10} {'recall@' + str(k):>10} {'clusters':>9} {'build s':>8} {'build MiB':>10}"
        f"   {'warm p50':>9} {'p95':>6} {'warmed MiB':>11} {'in s':>6}",
    ]
    for size, entry in result["sizes"].items():
        for mode, e in entry["modes"].items():
            lines.append(
                f"  {int(size):>11,} {mode:>7} {e['exact_ms']['p50']:>10.0f} {e['exact_ms']['p95']:>8.0f} "
                f"{e['exact_rows_read']:>10,.0f}   {e['approximate_ms']['p50']:>10.0f} "
                f"{e['approximate_ms']['p95']:>8.0f} {e['approximate_rows_read']:>10,.0f} {e['recall_at_k']:>10.3f} "
                f"{entry['clusters']:>9} {entry['index_build_s']:>8.1f} {_growth(entry):>10}   {_warm(e)}"
            )
    return "\n".join(lines)


def _warm(e: dict[str, Any]) -> str:
    """The index's queries after warming its probed columns, and what warming read."""
    if "warm_ms" not in e:
        return ""
    warmed = e.get("warmed") or {"mib": 0.0, "s": 0.0}
    return f"{e['warm_ms']['p50']:>9.0f} {e['warm_ms']['p95']:>6.0f} {warmed['mib']:>11,.0f} {warmed['s']:>6.1f}"


def _growth(entry: dict[str, Any]) -> str:
    """What the build added to the process's resident memory at its peak, in MiB."""
    memory = entry.get("index_build_memory_mib") or {}
    return f"+{memory['peak_mib'] - memory['before_mib']:,.0f}" if "peak_mib" in memory else "-"


__all__ = ["cold_rows", "cold_table", "recall_at_k", "render_archive", "run_archive_bench"]
