"""The bulk path of an import (:mod:`cabrain.portable.restore`): a batch of new memories written at
database speed, as the row path writes them.

The row path inserts a batch's rows with their vectors, indexes them for keywords and then sets each
row's state (its times, counts and invalidation) with a second statement whose row triggers fire
once per memory. The bulk path stages the whole batch with ``COPY`` into a temporary table of the
import's transaction and writes it with one statement per table (:mod:`cabrain.store.bulk`):
``memories`` with their state as the export had it (registering ``memory_ids`` and
``memory_vectors`` by their triggers, counted by the statement-level ones), and the BM25 postings,
tokenized as :class:`cabrain.store.keyword.PostgresBM25` tokenizes them, copied in, with the
per-term and per-namespace statistics upserted once per namespace. The rest of an import (what
points at memories: supersession, forgets, mentions, links, judgments) is already set-based and is
the same for both paths.

A large import into a small hot tier (at least ``CABRAIN_IMPORT_REBUILD_INDEX_AT`` memories, more
than the hot tier's vectors) drops what grows a row at a time in its transaction - the HNSW graph of
``memory_vectors``, the keys and keyword index of ``memory_terms`` - and makes them again, as they
were defined, once every row is in: an index built in bulk costs several times less than one grown
a row at a time (the benchmarks' loader does the same). Until the import commits, searches and
writes wait for it; a crash rolls the drop back with the rest. Everything happens in the import's one transaction: a crash midway leaves
nothing, and running it again imports it whole.

What differs from the row path: nothing a reader sees. A posting's ``impact`` (the BM25 tf part the
keyword search reads a term's strongest postings by) is computed with the namespace's average
document length after the batch that indexed it, as the row path does; the bulk path's batches are
larger, so the average is taken at other points (scores are computed with the namespace's current
statistics at query time either way).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import MutableMapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from cabrain.engine import Engine
from cabrain.store import bulk as sql
from cabrain.store import memories as memory_sql
from cabrain.store.keyword import IndexedDoc, PostgresBM25
from cabrain.text.tokenizer import term_frequencies

__all__ = ["BATCH", "build_indexes", "defer_indexes", "may_defer", "write"]

BATCH = 2000  # memories per staged batch


def _vector_text(vector: Sequence[float] | str | None) -> str | None:
    """A vector as pgvector's text (an export's is that text already): the database parses it."""
    if vector is None or isinstance(vector, str):
        return vector
    return "[" + ",".join(map(repr, map(float, vector))) + "]"


def _staged(row: dict[str, Any], state: dict[str, Any]) -> tuple[Any, ...]:
    """A memory row (``insert_memories``'s dict, its vector a list or an export's text) and its state
    as one stage record."""
    values = {
        **row,
        "embedding": _vector_text(row["embedding"]),
        "metadata": json.dumps(row["metadata"], ensure_ascii=False),
        "pinned": bool(row.get("pinned", False)),
        "thread_turn": row.get("thread_turn"),
        **state,
    }
    return tuple(values[c] for c in sql.STAGE_COLUMNS)


async def _index(
    engine: Engine,
    conn: asyncpg.Connection,
    docs: Sequence[IndexedDoc],
    counted: MutableMapping[uuid.UUID, tuple[Counter[str], int]] | None = None,
) -> None:
    """Keyword postings of new memories: copied in for CaBrain's own BM25, through the backend's own
    ``index`` for any other. ``counted``: words already counted (taken out as used) for memories
    indexed without a conversation's context, as :meth:`PostgresBM25.indexed_text` has them."""
    backend = engine.keyword
    if not isinstance(backend, PostgresBM25):
        await backend.index(conn, docs)
        return
    counted = {} if counted is None else counted
    by_namespace: dict[str, list[tuple[IndexedDoc, Counter[str], int]]] = {}
    for doc in docs:
        ahead = counted.pop(doc.memory_id, None)
        tfs, length = ahead if ahead is not None and not doc.context else term_frequencies(backend.indexed_text(doc))
        if length:
            by_namespace.setdefault(doc.namespace, []).append((doc, tfs, length))
    k1, b = backend.k1, backend.b
    for namespace, entries in sorted(by_namespace.items()):
        df: Counter[str] = Counter()
        for _, tfs, _ in entries:
            df.update(tfs.keys())
        avgdl = await sql.count_terms(conn, namespace, len(entries), sum(n for _, _, n in entries), dict(df))
        postings = []
        for doc, tfs, length in entries:
            # PostgresBM25._impact's arithmetic, in its order, its per-document part once
            norm = k1 * (1 - b + b * length / avgdl)
            memory_id, valid_at = doc.memory_id, doc.valid_at
            postings += [
                (namespace, term, memory_id, valid_at, min(tf, 32767), length, tf * (k1 + 1) / (tf + norm))
                for term, tf in tfs.items()
            ]
        await sql.copy_postings(conn, postings)


async def write(
    engine: Engine,
    conn: asyncpg.Connection,
    rows: Sequence[dict[str, Any]],
    states: Sequence[dict[str, Any]],
    docs: Sequence[IndexedDoc],
    chunks: Sequence[tuple[uuid.UUID, int, str, datetime, str, list[float]]],
    counted: MutableMapping[uuid.UUID, tuple[Counter[str], int]] | None = None,
) -> None:
    """Write a batch of new memories: ``rows`` as ``insert_memories`` takes them, each with its state
    (``created_at``, ``invalid_at``, ``access_count``, ``last_accessed_at``, ``consolidated_at``,
    ``decayed_at``), their keyword ``docs`` (their words ``counted`` ahead, see :func:`_index`) and
    their passages (``insert_chunks``' rows)."""
    await sql.stage(conn, [_staged(row, state) for row, state in zip(rows, states, strict=True)])
    await sql.write_staged(conn)
    await _index(engine, conn, docs, counted)
    await memory_sql.insert_chunks(conn, chunks)


async def defer_indexes(engine: Engine, conn: asyncpg.Connection, memories: int) -> list[tuple[str, str]]:
    """An import of ``memories`` memories, at least ``CABRAIN_IMPORT_REBUILD_INDEX_AT`` and more
    than the hot tier holds, builds the indexes that grow a row at a time (the vector graph, the
    keyword postings' keys and index) once after its rows (:func:`build_indexes`): what was dropped
    until then (inside the import's transaction, which holds those tables until it commits), or
    nothing."""
    if not may_defer(engine, memories):
        return []
    return await sql.drop_indexes(conn, memories)


def may_defer(engine: Engine, memories: int) -> bool:
    """Whether an import of ``memories`` memories is large enough that :func:`defer_indexes` may
    drop indexes (it does when the hot tier also holds fewer vectors): its transaction then holds
    those tables, ``memory_ids`` among them, until it commits."""
    return memories >= engine.settings.import_rebuild_index_at


async def build_indexes(engine: Engine, conn: asyncpg.Connection, dropped: list[tuple[str, str]]) -> None:
    """Make again what :func:`defer_indexes` dropped, before the import commits."""
    await sql.build_indexes(conn, dropped, engine.embedder.dim)
