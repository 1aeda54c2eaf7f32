"""Dense vector search: pgvector HNSW (cosine), scoped and filtered in SQL.

Two strategies, by the namespace's size:

- up to ``exact_max`` memories, an exact scan: the namespace's rows through its btree index,
  distances for those rows only, sorted - exact, and fast at that size;
- above it, the HNSW indexes: sorting is disabled for the statement so PostgreSQL walks each
  monthly partition's HNSW index in distance order and merges them (Merge Append), stopping after
  ``limit`` rows. The pool sets ``hnsw.iterative_scan = relaxed_order``, so when scope and filters
  reject rows an index scan keeps going instead of returning too few; the outer ORDER BY restores
  exact order among the survivors.

Without this, the planner's cost model - summing one HNSW start-up cost per partition - often
prefers sorting the whole namespace, which is exact but grows linearly with it.
"""

from __future__ import annotations

import asyncpg
import numpy as np

from cabrain.search.keyword import SearchFilters
from cabrain.store.memories import COLUMNS, NAMESPACE_SIZE
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
# Through the HNSW indexes (run with sorting disabled, see below).
SEARCH = _TEMPLATE.format(access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="m.embedding <=> $10")
# Exact: "+ 0" keeps the HNSW index out, so the namespace's rows are found by its btree and sorted.
SEARCH_EXACT = _TEMPLATE.format(
    access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="(m.embedding <=> $10) + 0"
)


async def search(
    conn: asyncpg.Connection,
    vector: list[float] | np.ndarray,
    filters: SearchFilters,
    limit: int,
    *,
    exact_max: int = 5000,
) -> list[asyncpg.Record]:
    """Rows (memory columns + ``distance``, cosine distance) nearest to ``vector``, best first."""
    args = (*filters.args(), limit, np.asarray(vector, dtype=np.float32))
    size = await conn.fetchval(NAMESPACE_SIZE, filters.namespace) or 0
    if size <= exact_max:
        return list(await conn.fetch(SEARCH_EXACT, *args))
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_sort = off")
        try:
            return list(await conn.fetch(SEARCH, *args))
        finally:
            await conn.execute("SET LOCAL enable_sort = on")  # the caller's transaction may go on
