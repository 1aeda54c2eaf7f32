"""The asyncpg connection pool of the hot tier."""

from __future__ import annotations

import asyncpg
from pgvector.asyncpg import register_vector

from cabrain.settings import Settings


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


async def create_pool(dsn: str, settings: Settings, *, timeout_s: float | None = None) -> asyncpg.Pool:
    """A pool whose connections know the vector type and search with pgvector's iterative scans.

    ``hnsw.iterative_scan`` keeps namespace and visibility filters from starving HNSW results.
    Statements are prepared once per connection and their plans cached (planning a query over a
    dozen monthly partitions costs more than running it); each query is written so that one plan
    fits every parameter value (see :mod:`cabrain.search.vector` and :mod:`cabrain.store.keyword`).
    ``timeout_s``: to connect (default ``db_connect_timeout_s``; a replica's is shorter).
    """
    from cabrain.store.db import connect

    timeout = settings.db_connect_timeout_s if timeout_s is None else timeout_s
    probe = await connect(dsn, timeout=timeout)  # clear errors, early
    await probe.close()
    return await asyncpg.create_pool(
        dsn,
        min_size=settings.db_pool_min,
        max_size=settings.db_pool_max,
        timeout=timeout,
        init=_init_connection,
        server_settings={
            "hnsw.iterative_scan": "relaxed_order",
            "hnsw.ef_search": str(settings.recall_ef_search),
            "application_name": "cabrain",
        },
    )
