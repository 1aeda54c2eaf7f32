"""Dense vector search: pgvector HNSW (cosine), scoped and filtered in SQL.

The pool sets ``hnsw.iterative_scan = relaxed_order``, so when filters reject rows the index scan
keeps going instead of returning too few; the outer ORDER BY restores exact order.
"""

from __future__ import annotations

import asyncpg
import numpy as np

from cabrain.search.keyword import SearchFilters
from cabrain.store.memories import COLUMNS
from cabrain.store.scope import ACCESS_CTE, RECALL_FILTER

SEARCH = f"""
WITH {ACCESS_CTE},
nearest AS MATERIALIZED (
    SELECT {COLUMNS}, m.embedding <=> $10 AS distance
    FROM memories m
    WHERE {RECALL_FILTER} AND m.embedding IS NOT NULL
    ORDER BY m.embedding <=> $10
    LIMIT $9
)
SELECT * FROM nearest ORDER BY distance, id
"""


async def search(
    conn: asyncpg.Connection, vector: list[float] | np.ndarray, filters: SearchFilters, limit: int
) -> list[asyncpg.Record]:
    """Rows (memory columns + ``distance``, cosine distance) nearest to ``vector``, best first."""
    return list(await conn.fetch(SEARCH, *filters.args(), limit, np.asarray(vector, dtype=np.float32)))
