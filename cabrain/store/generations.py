"""The L1 cache's key parts, read from PostgreSQL before an answer is computed (schema 0009; see
:mod:`cabrain.providers.cache`): the cluster-wide epoch and each namespace's generation, which
every write moves, so a cached answer is never older than the writes before it."""

from __future__ import annotations

import uuid

import asyncpg

SCOPE = "SELECT g.gen AS cache_gen, e.gen FROM cache_generations g CROSS JOIN cache_epoch e WHERE g.namespace = $1"
SCOPE_OF_ID = """
SELECT i.namespace, g.gen AS cache_gen, e.gen
FROM memory_ids i LEFT JOIN cache_generations g ON g.namespace = i.namespace CROSS JOIN cache_epoch e
WHERE i.id = $1
"""


async def of_namespace(conn: asyncpg.Connection, namespace: str) -> asyncpg.Record | None:
    """(``gen``, ``cache_gen``) of ``namespace``, None when it has none yet."""
    return await conn.fetchrow(SCOPE, namespace)


async def of_memory(conn: asyncpg.Connection, memory_id: uuid.UUID) -> asyncpg.Record | None:
    """(``namespace``, ``gen``, ``cache_gen``) of the memory's namespace, None for an unknown id."""
    return await conn.fetchrow(SCOPE_OF_ID, memory_id)
