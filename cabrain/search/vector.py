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
from typing import Any

import asyncpg
import numpy as np

from cabrain.store.access import ACCESS_CTE, RECALL_FILTER
from cabrain.store.keyword import SearchFilters
from cabrain.store.memories import COLUMNS, NAMESPACE_SIZE
from cabrain.store.planner import fetch_without
from cabrain.store.statement import Statement

# Through the one HNSW graph of memory_vectors, joined back to the rows for scope and filters (run
# with sorting disabled, so the index order is kept and the scan stops after :limit survivors).
SEARCH = Statement(
    f"""
WITH {ACCESS_CTE},
nearest AS MATERIALIZED (
    SELECT {COLUMNS}, v.embedding <=> :vector AS distance
    FROM memory_vectors v JOIN memories m ON m.id = v.id AND m.valid_at = v.valid_at
    WHERE v.namespace = :namespace AND {RECALL_FILTER}
    ORDER BY v.embedding <=> :vector
    LIMIT :limit
)
SELECT * FROM nearest ORDER BY distance, id
"""
)
# Exact: "+ 0" keeps the HNSW index out, so the namespace's rows are found by its btree and the
# nearest chosen by distance alone; only those are then read whole (sorting the namespace's rows
# with all their columns cost a fifth more: a 10k namespace 21.5 -> 17.7 ms).
SEARCH_EXACT = Statement(
    f"""
WITH {ACCESS_CTE},
nearest AS MATERIALIZED (
    SELECT m.id, m.valid_at, m.embedding <=> :vector AS distance
    FROM memories m
    WHERE {RECALL_FILTER} AND m.embedding IS NOT NULL
    ORDER BY (m.embedding <=> :vector) + 0
    LIMIT :limit
)
SELECT {COLUMNS}, n.distance
FROM nearest n JOIN memories m ON m.id = n.id AND m.valid_at = n.valid_at
ORDER BY n.distance, m.id
"""
)

_PASSAGES = """
WITH {access},
near AS MATERIALIZED (
    SELECT c.memory_id, c.valid_at, c.embedding <=> :vector AS d
    FROM memory_chunks c
    WHERE c.namespace = :namespace
    ORDER BY {order}
    LIMIT :passages
),
best AS (SELECT memory_id, valid_at, min(d) AS passage_distance FROM near GROUP BY memory_id, valid_at)
SELECT {columns}, m.embedding <=> :vector AS distance, b.passage_distance
FROM best b JOIN memories m ON m.id = b.memory_id AND m.valid_at = b.valid_at
WHERE {where} AND m.embedding IS NOT NULL
ORDER BY b.passage_distance, m.id
LIMIT :limit
"""
PASSAGES = Statement(
    _PASSAGES.format(access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="c.embedding <=> :vector")
)
PASSAGES_EXACT = Statement(
    _PASSAGES.format(access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="(c.embedding <=> :vector) + 0")
)

# Walk the graph in distance order and look each row up by its key: with these off it is the one
# plan left whatever the parameters, so it is planned once per connection (fetch_without's
# ``generic``) - planning it for each call's parameters cost more than the walk itself.
GRAPH_WALK = ("enable_sort", "enable_hashjoin", "enable_mergejoin", "enable_material")
# The exact scans: the nearest few rows are looked up by key, never joined by hashing.
EXACT = ("enable_hashjoin", "enable_mergejoin")

# The graph's size as the planner last counted it (autovacuum keeps it current): free to read.
GRAPH_SIZE = "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'memory_vectors'::regclass"
SIZES = f"""
SELECT n.memory_count, n.chunk_count, ({GRAPH_SIZE}) AS vectors,
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'memory_chunks'::regclass) AS passages
FROM namespaces n WHERE n.name = $1
"""


def exact_is_cheaper(size: int, total: int, limit: int, exact_max: int, skip_cost: float) -> bool:
    """Whether a namespace of ``size`` vectors, among ``total`` in the graph, is better searched
    exactly than through HNSW for ``limit`` results.

    The exact scan reads the namespace's rows: cost ~ ``size``. The graph walk, filtered to the
    namespace, steps over about ``limit * total / size`` vectors to find ``limit`` of it, each
    ``skip_cost`` times dearer than a row the exact scan reads. So a small namespace in a large
    brain is searched exactly even above ``exact_max`` (measured in docs/BENCHMARKS.md: a 10k
    namespace among 1.19M vectors takes 8 ms exactly, 45-75 ms through the graph)."""
    if size <= exact_max:
        return True
    return size * size <= skip_cost * limit * max(total, size)


async def _documents(
    conn: asyncpg.Connection,
    params: dict[str, Any],
    size: int,
    exact_max: int,
    ef_search: int | None = None,
    *,
    total: int | None = None,
    skip_cost: float = 0.0,
) -> list:
    """``params``: the filters' parameters with ``limit`` and ``vector``."""
    limit = params["limit"]
    if size > exact_max and skip_cost > 0 and total is None:
        total = await conn.fetchval(GRAPH_SIZE) or 0
    if exact_is_cheaper(size, total or 0, limit, exact_max, skip_cost):
        return await fetch_without(conn, SEARCH_EXACT.sql, SEARCH_EXACT.args(params), disable=EXACT)
    local = {"hnsw.ef_search": ef_search} if ef_search else None
    rows = await fetch_without(conn, SEARCH.sql, SEARCH.args(params), disable=GRAPH_WALK, local=local, generic=True)
    if len(rows) < limit and size > len(rows):
        # The walk gave up (hnsw.max_scan_tuples) before finding enough rows that pass scope and
        # filters: the exact scan finds them all, slower but never short.
        return await fetch_without(conn, SEARCH_EXACT.sql, SEARCH_EXACT.args(params), disable=EXACT)
    return rows


async def _passages(
    conn: asyncpg.Connection,
    params: dict[str, Any],
    chunks: int,
    exact_max: int,
    *,
    total: int = 0,
    skip_cost: float = 0.0,
) -> list:
    """``params``: the filters' parameters with ``limit``, ``vector`` and ``passages`` (how many to read)."""
    if exact_is_cheaper(chunks, total, params["passages"], exact_max, skip_cost):
        return await fetch_without(conn, PASSAGES_EXACT.sql, PASSAGES_EXACT.args(params), disable=EXACT)
    return await fetch_without(conn, PASSAGES.sql, PASSAGES.args(params), disable=GRAPH_WALK, generic=True)


async def search(
    conn: asyncpg.Connection,
    vector: list[float] | np.ndarray,
    filters: SearchFilters,
    limit: int,
    *,
    exact_max: int = 5000,
    ef_search: int | None = None,
    size: int | None = None,
    total: int | None = None,
    skip_cost: float = 0.0,
) -> list:
    """Rows (memory columns + ``distance``, cosine distance) nearest to ``vector``, best first,
    by the memories' own vectors (the write path's neighbours); ``ef_search`` overrides the
    connection's HNSW candidate list for this search; ``size``, the namespace's size when the caller
    knows it; ``total``, the graph's size likewise; ``skip_cost``, see :func:`exact_is_cheaper`
    (0: by ``exact_max`` alone)."""
    params = {**filters.params(), "limit": limit, "vector": np.asarray(vector, dtype=np.float32)}
    if size is None:
        size = await conn.fetchval(NAMESPACE_SIZE, filters.namespace) or 0
    return await _documents(conn, params, size, exact_max, ef_search, total=total, skip_cost=skip_cost)


async def namespace_sizes(pool: asyncpg.Pool, namespace: str) -> tuple[int, int, int, int]:
    """(the namespace's memories, its passages, every hot vector, every passage): what chooses
    between the exact scan and the graph walk (:func:`exact_is_cheaper`)."""
    async with pool.acquire() as conn:
        row = await conn.fetchrow(SIZES, namespace)
    return tuple(row) if row else (0, 0, 0, 0)


async def search_with_passages(
    pool: asyncpg.Pool,
    vector: list[float] | np.ndarray,
    filters: SearchFilters,
    limit: int,
    *,
    exact_max: int = 5000,
    skip_cost: float = 0.0,
    sizes: tuple[int, int, int, int] | None = None,
) -> list:
    """Like :func:`search`, scoring each memory by its vector and its best passage (recall).
    The two searches run at once on two connections. ``distance`` is 1 - the mean of both
    similarities; ``doc_distance`` and ``passage_distance`` carry the parts. ``sizes``: the
    namespace's :func:`namespace_sizes`, when read ahead (recall reads them with its other lookups)."""
    params = {**filters.params(), "limit": limit, "vector": np.asarray(vector, dtype=np.float32)}
    if sizes is None:
        sizes = await namespace_sizes(pool, filters.namespace)
    size, chunks, vectors, passages_total = sizes

    async def documents() -> list:
        async with pool.acquire() as conn:
            return await _documents(conn, params, size, exact_max, total=vectors, skip_cost=skip_cost)

    async def passages() -> list:
        if chunks == 0:
            return []
        async with pool.acquire() as conn:
            return await _passages(
                conn, {**params, "passages": limit * 4}, chunks, exact_max, total=passages_total, skip_cost=skip_cost
            )

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
