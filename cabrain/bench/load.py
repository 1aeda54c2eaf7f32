"""The benchmarks' bulk loader: a synthetic corpus of up to millions of memories, quickly.

What it writes is what retain would have written for the same rows (the ``memories`` rows with
their ``memory_ids`` entries, the BM25 postings from the real tokenizer, the per-term document
frequencies and per-namespace counters, the entities the texts name with their links and mention counts), but the way a bulk import is done: the secondary indexes
of ``memories`` and ``memory_terms`` (and ``memory_terms``' keys) are dropped, the rows go in with
COPY, and the very same index definitions are rebuilt once at the end (HNSW builds in bulk several
times faster than it grows row by row). What is synthetic: the texts come from word lists; only
``real`` of them are embedded for real, every other memory gets a vector derived from a real one
(Gaussian noise of ``noise`` per dimension, re-normalised), which keeps the index at its true
scale and neighbourhood structure.
"""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import psutil

from cabrain.bench.corpus import AGENT, ENTITY_NAMES, NAMESPACE, synthetic_text
from cabrain.bench.progress import bar, say
from cabrain.store import bench as sql
from cabrain.store.migrations import ensure_partitions
from cabrain.text.entities import entity_key
from cabrain.text.tokenizer import term_frequencies

CHUNK = 50_000  # memories per COPY round
MEMORY_COLUMNS = (
    "id",
    "namespace",
    "owner_agent_id",
    "visibility",
    "network",
    "memory_type",
    "content",
    "source_kind",
    "embedding",
    "importance",
    "valid_at",
    "content_hash",
)
POSTING_COLUMNS = ("namespace", "term", "memory_id", "valid_at", "tf", "doc_len", "impact")
LINK_COLUMNS = ("memory_id", "entity_id", "valid_at")
BULK_TABLES = ("memories", "memory_terms", "memory_vectors")


@dataclass(frozen=True)
class Corpus:
    """What to load: ``sizes`` maps namespace -> memories; vectors derived from ``real`` real ones."""

    sizes: dict[str, int]
    real: int = 2000
    noise: float = 0.02
    seed: int = 7

    @property
    def total(self) -> int:
        return sum(self.sizes.values())


async def index_definitions(conn) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    indexes = [(r["indexname"], r["indexdef"]) for r in await conn.fetch(sql.INDEXES, list(BULK_TABLES))]
    constraints = [(r["conname"], r["def"]) for r in await conn.fetch(sql.CONSTRAINTS)]
    return indexes, constraints


def graph_build_memory(rows: int, dim: int) -> str:
    """``maintenance_work_mem`` for building one HNSW graph of ``rows`` vectors: the graph with some
    room (a build whose graph does not fit runs several times slower: 1,497 s against 312 s for
    1.19M vectors), at most a quarter of this machine's memory (the server is assumed to be here,
    as the embedded one is), at least 64 MB."""
    need = int(rows * (dim * 4 + 600) * 1.3)
    cap = psutil.virtual_memory().total // 4
    return f"{max(64 * 2**20, min(need, cap)) // 2**20}MB"


async def bulk_load(
    brain,
    corpus: Corpus,
    *,
    maintenance_work_mem: str = "auto",
    quiet: bool = False,
) -> dict[str, float]:
    """Load ``corpus`` into ``brain``'s (empty, benchmark-only) database; seconds per phase.
    ``maintenance_work_mem`` is the index builds' memory (an HNSW build is fastest when its graph
    fits; "auto": see :func:`graph_build_memory`)."""
    timings: dict[str, float] = {}
    rng, np_rng = random.Random(corpus.seed), np.random.default_rng(corpus.seed)
    now = datetime.now(UTC)
    real = max(1, min(corpus.real, corpus.total))
    for namespace in corpus.sizes:
        await brain.create_namespace(AGENT, namespace)
    entity_of: dict[str, dict[str, uuid.UUID]] = {}  # namespace -> a name's word -> its entity
    async with brain.engine.pool.acquire() as conn:
        await ensure_partitions(conn, now.date(), months_back=13, months_ahead=1)
        keys = {entity_key(name): name for name in ENTITY_NAMES}
        for namespace in corpus.sizes:
            made = await conn.fetch(sql.BENCH_ENTITIES, namespace, list(keys.values()), list(keys))
            entity_of[namespace] = {keys[r["key"]]: r["id"] for r in made}

    started = time.perf_counter()
    base_texts = [synthetic_text(rng) for _ in range(real)]
    base: list = []
    for start in range(0, real, 256):
        base.extend(await brain.engine.embed_documents(base_texts[start : start + 256]))
        bar("embedded real vectors", min(start + 256, real), real, quiet)
    base_matrix = np.asarray(base, dtype=np.float32)
    timings["embed_real_s"] = time.perf_counter() - started

    k1, b = brain.settings.bm25_k1, brain.settings.bm25_b
    async with brain.engine.pool.acquire() as conn:
        indexes, constraints = await index_definitions(conn)
        for name, _ in constraints:
            await conn.execute(sql.drop_constraint(name))
        for name, _ in indexes:
            await conn.execute(sql.drop_index(name))
        await conn.execute(sql.LINK_TRIGGER_OFF)

        started = time.perf_counter()
        loaded, real_used = 0, 0
        df: dict[str, Counter[str]] = {ns: Counter() for ns in corpus.sizes}
        lengths: dict[str, list[int]] = {ns: [0, 0] for ns in corpus.sizes}  # docs, total tokens
        for namespace, count in corpus.sizes.items():
            for chunk_start in range(0, count, CHUNK):
                size = min(CHUNK, count - chunk_start)
                picks = np_rng.integers(0, real, size)
                vectors = base_matrix[picks] + np_rng.normal(0, corpus.noise, (size, base_matrix.shape[1])).astype(
                    np.float32
                )
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                rows, postings_in = [], []
                links: list[tuple[uuid.UUID, uuid.UUID, datetime]] = []
                named = entity_of[namespace]
                for i in range(size):
                    if real_used < real:  # the real texts with their own vectors come first
                        text, vector = base_texts[real_used], base_matrix[real_used]
                        real_used += 1
                    else:
                        text, vector = synthetic_text(rng), vectors[i]
                    memory_id = uuid.uuid4()
                    valid_at = now - timedelta(seconds=rng.randint(0, 365 * 86400))
                    rows.append(
                        (
                            memory_id,
                            namespace,
                            AGENT,
                            "team",
                            "experience",
                            "episodic",
                            text,
                            "bench",
                            vector,
                            round(rng.random(), 3),
                            valid_at,
                            hashlib.sha256(text.encode()).digest(),
                        )
                    )
                    links.extend((memory_id, named[w], valid_at) for w in set(text.split()) if w in named)
                    tfs, length = term_frequencies(text)
                    if length:
                        postings_in.append((memory_id, valid_at, tfs, length))
                await conn.copy_records_to_table("memories", records=rows, columns=MEMORY_COLUMNS)
                # BM25 postings exactly as KeywordIndex.index writes them (avgdl as of this batch)
                stats = lengths[namespace]
                stats[0] += len(postings_in)
                stats[1] += sum(p[3] for p in postings_in)
                avgdl = max(stats[1] / max(stats[0], 1), 1.0)
                counter = df[namespace]
                postings = []
                for memory_id, valid_at, tfs, length in postings_in:
                    counter.update(tfs.keys())
                    norm = k1 * (1 - b + b * length / avgdl)
                    for term, tf in tfs.items():
                        postings.append(
                            (namespace, term, memory_id, valid_at, min(tf, 32767), length, tf * (k1 + 1) / (tf + norm))
                        )
                await conn.copy_records_to_table("memory_terms", records=postings, columns=POSTING_COLUMNS)
                await conn.copy_records_to_table("memory_entities", records=links, columns=LINK_COLUMNS)
                loaded += size
                rate = loaded / (time.perf_counter() - started)
                bar("loaded memories", loaded, corpus.total, quiet, f" ({rate:,.0f}/s)")
        for namespace in corpus.sizes:
            terms = sorted(df[namespace])
            await conn.execute(
                sql.BM25_TERMS,
                namespace,
                terms,
                [df[namespace][t] for t in terms],
            )
            await conn.execute(
                sql.BM25_NAMESPACE,
                namespace,
                *lengths[namespace],
            )
            await conn.execute(sql.MEMORY_COUNT, namespace, corpus.sizes[namespace])
        await conn.execute(sql.LINK_TRIGGER_ON)
        timings["copy_s"] = time.perf_counter() - started

        started = time.perf_counter()
        if maintenance_work_mem == "auto":
            maintenance_work_mem = graph_build_memory(corpus.total, brain.engine.embedder.dim)
        await conn.execute(sql.SET_MAINTENANCE_WORK_MEM, maintenance_work_mem)
        for name, definition in constraints:
            say(f"  restoring {name}", quiet)
            await conn.execute(sql.add_constraint(name, definition))
        for name, definition in indexes:
            say(f"  building {name}", quiet)
            await conn.execute(sql.build_index(definition))  # and every partition's
        await conn.execute(sql.RESET_MAINTENANCE_WORK_MEM)
        for namespace in corpus.sizes:  # the mention counts, once the memories' keys are back
            await conn.execute(sql.BENCH_MENTIONS, namespace)
        timings["index_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for table in ("memories", "memory_ids", "memory_vectors", "memory_terms", "bm25_terms", "memory_entities"):
            await conn.execute(sql.vacuum_analyze(table))
        timings["vacuum_s"] = time.perf_counter() - started
    return timings


async def load_namespace(brain, n: int, real: int, noise: float, seed: int, quiet: bool) -> None:
    """N memories in the benchmark namespace, through :func:`bulk_load`."""
    await bulk_load(brain, Corpus({NAMESPACE: n}, real=real, noise=noise, seed=seed), quiet=quiet)
