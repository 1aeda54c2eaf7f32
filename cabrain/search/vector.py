"""Dense vector search: pgvector HNSW (cosine), scoped and filtered in SQL.

Two strategies, by the namespace's size:

- up to ``exact_max`` rows, an exact scan: the namespace's rows through its btree index,
  distances for those rows only, sorted - exact, and fast at that size;
- above it, the one HNSW graph of ``memory_vectors`` (all hot vectors, kept in step with the rows
  by a trigger): sorting and hash/merge joins are disabled for the statement so PostgreSQL walks
  the graph in distance order and looks each row up (by id and month), stopping after ``limit``
  rows that pass scope and filters. The pool sets ``hnsw.iterative_scan = relaxed_order``, so when
  scope and filters reject rows the scan keeps going instead of returning too few; the outer
  ORDER BY restores exact order among the survivors. Left to its cost model, the planner often
  prefers sorting the whole namespace, which is exact but grows linearly with it.

One graph rather than one per monthly partition: a walk costs about the logarithm of the graph's
size, so one walk over a million vectors is several times cheaper than fourteen over 75,000 each.

Long memories also have passage vectors (``memory_chunks``). In recall a memory's
similarity to the query is the mean of its own vector's similarity and its best passage's (its
own again when it has no passage, or none among the nearest): a question about one sentence of
a long text finds it, and a memory that matches as a whole keeps its place.
"""

from __future__ import annotations

import asyncio

import asyncpg
import numpy as np

from cabrain.search.keyword import SearchFilters
from cabrain.store.memories import COLUMNS, NAMESPACE_SIZE
from cabrain.store.planner import fetch_without
from cabrain.store.scope import ACCESS_CTE, RECALL_FILTER

_TEMPLATE = """
WITH {access},
nearest AS MATERIALIZED (
    SELECT {columns}, m.embedding <=> $10 AS distance
    FROM memories m
    WHERE {where} AND m.embedding IS NOT NULL
    ORDER BY {order}
    LIMIT $9
)
SELECT * FROM nearest ORDER BY distance, id
"""
# Through the one HNSW graph of memory_vectors, joined back to the rows for scope and filters (run
# with sorting disabled, so the index order is kept and the scan stops after $9 survivors).
SEARCH = f"""
WITH {ACCESS_CTE},
nearest AS MATERIALIZED (
    SELECT {COLUMNS}, v.embedding <=> $10 AS distance
    FROM memory_vectors v JOIN memories m ON m.id = v.id AND m.valid_at = v.valid_at
    WHERE v.namespace = $1 AND {RECALL_FILTER}
    ORDER BY v.embedding <=> $10
    LIMIT $9
)
SELECT * FROM nearest ORDER BY distance, id
"""
# Exact: "+ 0" keeps the HNSW index out, so the namespace's rows are found by its btree and sorted.
SEARCH_EXACT = _TEMPLATE.format(
    access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="(m.embedding <=> $10) + 0"
)

_PASSAGES = """
WITH {access},
near AS MATERIALIZED (
    SELECT c.memory_id, c.valid_at, c.embedding <=> $10 AS d
    FROM memory_chunks c
    WHERE c.namespace = $1
    ORDER BY {order}
    LIMIT $11
),
best AS (SELECT memory_id, valid_at, min(d) AS passage_distance FROM near GROUP BY memory_id, valid_at)
SELECT {columns}, m.embedding <=> $10 AS distance, b.passage_distance
FROM best b JOIN memories m ON m.id = b.memory_id AND m.valid_at = b.valid_at
WHERE {where} AND m.embedding IS NOT NULL
ORDER BY b.passage_distance, m.id
LIMIT $9
"""
PASSAGES = _PASSAGES.format(access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="c.embedding <=> $10")
PASSAGES_EXACT = _PASSAGES.format(
    access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="(c.embedding <=> $10) + 0"
)


SIZES = "SELECT memory_count, chunk_count FROM namespaces WHERE name = $1"


async def _documents(
    conn: asyncpg.Connection, args: tuple, size: int, exact_max: int, ef_search: int | None = None
) -> list:
    if size <= exact_max:
        return await fetch_without(conn, SEARCH_EXACT, args, disable=())
    local = {"hnsw.ef_search": ef_search} if ef_search else None
    disable = ("enable_sort", "enable_hashjoin", "enable_mergejoin")  # walk the graph, look rows up
    return await fetch_without(conn, SEARCH, args, disable=disable, local=local)


async def _passages(conn: asyncpg.Connection, args: tuple, chunks: int, exact_max: int) -> list:
    if chunks <= exact_max:
        return await fetch_without(conn, PASSAGES_EXACT, args, disable=("enable_hashjoin", "enable_mergejoin"))
    return await fetch_without(conn, PASSAGES, args, disable=("enable_sort", "enable_hashjoin", "enable_mergejoin"))


async def search(
    conn: asyncpg.Connection,
    vector: list[float] | np.ndarray,
    filters: SearchFilters,
    limit: int,
    *,
    exact_max: int = 5000,
    ef_search: int | None = None,
    size: int | None = None,
) -> list:
    """Rows (memory columns + ``distance``, cosine distance) nearest to ``vector``, best first,
    by the memories' own vectors (the write path's neighbours); ``ef_search`` overrides the
    connection's HNSW candidate list for this search; ``size``, the namespace's size when the caller
    knows it."""
    args = (*filters.args(), limit, np.asarray(vector, dtype=np.float32))
    if size is None:
        size = await conn.fetchval(NAMESPACE_SIZE, filters.namespace) or 0
    return await _documents(conn, args, size, exact_max, ef_search)


async def search_with_passages(
    pool: asyncpg.Pool,
    vector: list[float] | np.ndarray,
    filters: SearchFilters,
    limit: int,
    *,
    exact_max: int = 5000,
) -> list:
    """Like :func:`search`, scoring each memory by its vector and its best passage (recall).
    The two searches run at once on two connections. ``distance`` is 1 - the mean of both
    similarities; ``doc_distance`` and ``passage_distance`` carry the parts."""
    args = (*filters.args(), limit, np.asarray(vector, dtype=np.float32))
    async with pool.acquire() as conn:
        sizes = await conn.fetchrow(SIZES, filters.namespace)
    size, chunks = (sizes["memory_count"], sizes["chunk_count"]) if sizes else (0, 0)

    async def documents() -> list:
        async with pool.acquire() as conn:
            return await _documents(conn, args, size, exact_max)

    async def passages() -> list:
        if chunks == 0:
            return []
        async with pool.acquire() as conn:
            return await _passages(conn, (*args, limit * 4), chunks, exact_max)

    docs, near = await asyncio.gather(documents(), passages())
    merged: dict = {}
    for row in docs:
        merged[row["id"]] = {**dict(row), "passage_distance": None}
    for row in near:
        merged.setdefault(row["id"], dict(row))["passage_distance"] = row["passage_distance"]
    out = []
    for row in merged.values():
        doc = float(row["distance"])
        passage = float(row["passage_distance"]) if row["passage_distance"] is not None else doc
        out.append({**row, "doc_distance": doc, "distance": (doc + passage) / 2})
    out.sort(key=lambda r: (r["distance"], str(r["id"])))
    return out[:limit]
