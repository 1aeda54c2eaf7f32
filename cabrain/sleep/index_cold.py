"""The cold tier's vector index, kept by ``maintain`` (:mod:`cabrain.store.cold_index`).

A namespace is indexed once it holds ``CABRAIN_COLD_INDEX_MIN_ROWS`` cold rows, and indexed again
once the rows demoted since its index was built reach ``CABRAIN_COLD_INDEX_STALE_RATIO`` of those
indexed (archive recall reads those rows whole, so a stale index costs time, never answers). With
``CABRAIN_COLD_INDEX_PROBES=0`` nothing is built: archive recall always scans.
"""

from __future__ import annotations

import asyncio
import functools
from datetime import UTC, datetime

import asyncpg

from cabrain.progress import Say
from cabrain.sleep.context import StepContext, StepResult
from cabrain.store import cold_index as sql
from cabrain.store.cold import ColdTier


def due(cold_rows: int, indexed: int | None, min_rows: int, stale_ratio: float) -> bool:
    """Whether a namespace of ``cold_rows`` (``indexed`` of them in its index, None: no index) is (re)built."""
    if cold_rows < min_rows:
        return False
    return indexed is None or cold_rows - indexed >= stale_ratio * max(indexed, 1)


async def build(
    conn: asyncpg.Connection,
    cold: ColdTier,
    namespace: str,
    *,
    group_rows: int = sql.GROUP_ROWS,
    progress: Say | None = None,
) -> sql.Built | None:
    """Build ``namespace``'s index now (see :mod:`cabrain.store.cold_index` for the order of its
    writes; ``group_rows``: the rows it sorts at once); None when another build holds it, or it has
    no embeddings."""
    if not await conn.fetchval(sql.TRY_BUILD_LOCK, namespace):
        return None
    try:
        await conn.execute(sql.DROP_INDEX, namespace)
        built = await asyncio.to_thread(
            functools.partial(sql.ColdIndex(cold).build, namespace, group_rows=group_rows, progress=progress)
        )
        if built is not None:
            centroids = built.centroids
            async with conn.transaction():  # the centroids and their words together
                await conn.execute(
                    sql.SAVE_INDEX,
                    namespace,
                    built.snapshot_id,
                    centroids.shape[1],
                    centroids.shape[0],
                    centroids.astype("<f4").tobytes(),
                    built.files,
                    built.rows,
                    datetime.now(UTC),  # a record of when, not a decision: wall clock
                    None if built.quantized is None else built.quantized.astype("<f4").tobytes(),
                )
                await conn.copy_records_to_table(
                    "cold_index_terms",
                    records=[(namespace, term, df, clusters) for term, df, clusters in built.terms],
                    columns=sql.TERM_COLUMNS,
                )
        return built
    finally:
        await conn.execute(sql.BUILD_UNLOCK, namespace)


async def index_cold_tier(ctx: StepContext, result: StepResult) -> None:
    """(Re)build the index of every namespace that is due (see the module docstring)."""
    settings = ctx.settings
    if settings.cold_index_probes == 0:
        return
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        counts = await conn.fetch(sql.COLD_COUNTS)
        for row in counts:
            namespace = row["namespace"]
            if not due(
                row["cold_rows"], row["indexed_rows"], settings.cold_index_min_rows, settings.cold_index_stale_ratio
            ):
                continue
            built = await build(conn, ctx.cold(), namespace)
            if built is not None:
                result.add("cold_indexes_built")
                result.change(
                    action="cold index built", namespace=namespace, rows=built.rows, clusters=len(built.centroids)
                )


__all__ = ["build", "due", "index_cold_tier"]
