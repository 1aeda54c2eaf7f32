"""*purge*: a forgotten memory's text leaves the cold tier, when the operator asks for that.

The cold tier keeps everything by default: a forgotten memory (forgotten while hot or after its
demotion) is only left out of archive recall. With ``CABRAIN_COLD_FORGOTTEN_RETENTION_DAYS`` set,
once a forget is that old (by the step's clock) this step removes the memory's row from the Iceberg
table (one snapshot per namespace, rewriting the files that held it) and records ``purged_at`` on its
identity, which stays; ``maintain`` then expires the table's snapshots from before the purge and
deletes the files only they still held. From the first sleep cycle after the retention, nothing of
the text is left in the cold tier. Idempotent: rows already gone match nothing.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from cabrain.sleep.context import StepContext, StepResult
from cabrain.store import maintain as maintain_sql

BATCH = 5000


async def purge(ctx: StepContext, namespace: str, month: str = "") -> StepResult:
    result = ctx.result()
    days = ctx.settings.cold_forgotten_retention_days
    if days is None:
        return result
    pool = await ctx.pool()
    cold = ctx.cold()
    while True:
        async with pool.acquire() as conn:
            ids = [r["id"] for r in await conn.fetch(maintain_sql.DUE, namespace, days * 86400.0, BATCH, ctx.clock())]
        if not ids:
            return result
        await asyncio.to_thread(cold.purge, namespace, [str(i) for i in ids])
        async with pool.acquire() as conn:
            await conn.execute(maintain_sql.MARK_PURGED, ids)
        result.add("purged", len(ids))
        for memory_id in ids:
            result.change(memory_id=memory_id, action="purged from the cold tier")
        if len(ids) < BATCH:
            return result


async def expire_history(ctx: StepContext, result: StepResult) -> None:
    """The snapshots that still hold purged rows, and their files (``maintain``, with a retention)."""
    if ctx.settings.cold_forgotten_retention_days is None:
        return
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        in_flight = await conn.fetchval(maintain_sql.OLDEST_OPEN_BATCH)
    cutoff = ctx.clock() - timedelta(hours=1)
    if in_flight is not None:
        cutoff = min(cutoff, in_flight - timedelta(hours=1))
    counts = await asyncio.to_thread(ctx.cold().expire, cutoff)
    for key, n in counts.items():
        if n:
            result.add(key, n)


__all__ = ["expire_history", "purge"]
