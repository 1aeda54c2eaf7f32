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

The statements are in :mod:`cabrain.store.vector`; this module chooses between them and steers
the planner.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import numpy as np

from cabrain.store import vector as sql
from cabrain.store.keyword import SearchFilters
from cabrain.store.memories import NAMESPACE_SIZE
from cabrain.store.planner import fetch_without

# Walk the graph in distance order and look each row up by its key: with these off it is the one
# plan left whatever the parameters, so it is planned once per connection (fetch_without's
# ``generic``) - planning it for each call's parameters cost more than the walk itself.
GRAPH_WALK = ("enable_sort", "enable_hashjoin", "enable_mergejoin", "enable_material")
# The exact scans: the nearest few rows are looked up by key, never joined by hashing.
EXACT = ("enable_hashjoin", "enable_mergejoin")


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
        total = await conn.fetchval(sql.GRAPH_SIZE) or 0
    if exact_is_cheaper(size, total or 0, limit, exact_max, skip_cost):
        return await fetch_without(conn, sql.SEARCH_EXACT.sql, sql.SEARCH_EXACT.args(params), disable=EXACT)
    local = {"hnsw.ef_search": ef_search} if ef_search else None
    rows = await fetch_without(
        conn, sql.SEARCH.sql, sql.SEARCH.args(params), disable=GRAPH_WALK, local=local, generic=True
    )
    if len(rows) < limit and size > len(rows):
        # The walk gave up (hnsw.max_scan_tuples) before finding enough rows that pass scope and
        # filters: the exact scan finds them all, slower but never short.
        return await fetch_without(conn, sql.SEARCH_EXACT.sql, sql.SEARCH_EXACT.args(params), disable=EXACT)
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
        return await fetch_without(conn, sql.PASSAGES_EXACT.sql, sql.PASSAGES_EXACT.args(params), disable=EXACT)
    return await fetch_without(conn, sql.PASSAGES.sql, sql.PASSAGES.args(params), disable=GRAPH_WALK, generic=True)


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
        row = await conn.fetchrow(sql.SIZES, namespace)
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
