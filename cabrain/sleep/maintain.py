"""*maintain*: partitions ahead, fresh planner statistics, and index rebuilds where demotion
emptied a partition enough to matter.

- The current month's (by the step's clock) and the next ``sleep_partitions_ahead`` months'
  partitions of ``memories`` are created, and so is a partition for any month whose rows sit in
  the default partition.
- ``ANALYZE`` on the tables the cycle changed.
- ``REINDEX`` of a month partition when the rows demoted from it since the last maintain are at
  least ``sleep_reindex_dead_ratio`` of what it held (an HNSW graph keeps the holes of deleted
  rows until rebuilt). Old partitions take no writes, so the lock is harmless.
- The cold tier's vector index of each namespace with enough cold rows, built or rebuilt once the
  rows demoted since reach a share of it (:mod:`cabrain.sleep.index_cold`).
- With ``CABRAIN_COLD_FORGOTTEN_RETENTION_DAYS`` set: the cold table's snapshots from before the
  last hour are expired and the files only they held deleted (see :mod:`cabrain.sleep.purge`).

Runs once per cycle, over the whole database, through ``cabrain_maintain`` (SECURITY DEFINER) so
the sleep role needs no ownership.
"""

from __future__ import annotations

from datetime import date

from cabrain.clock import utc_today
from cabrain.sleep.context import StepContext, StepResult
from cabrain.sleep.index_cold import index_cold_tier
from cabrain.sleep.purge import expire_history
from cabrain.store import maintain as maintain_sql


def _months_ahead(today: date, n: int) -> list[date]:
    out, year, month = [], today.year, today.month
    for _ in range(n + 1):
        out.append(date(year, month, 1))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


async def maintain(ctx: StepContext, namespace: str = "", month: str = "") -> StepResult:
    result = ctx.result()
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        existing = {r["relname"] for r in await conn.fetch(maintain_sql.PARTITIONS)}
        wanted = _months_ahead(utc_today(ctx.clock), ctx.settings.sleep_partitions_ahead)
        wanted += [
            date(int(m[:4]), int(m[5:7]), 1)
            for m in (r["month"] for r in await conn.fetch(maintain_sql.DEFAULT_MONTHS))
        ]
        for first in sorted(set(wanted)):
            name = await conn.fetchval(maintain_sql.ENSURE_PARTITION, first)
            if name not in existing:
                result.add("partitions_created")
                result.change(action="partition created", partition=name)
        since = await conn.fetchval(maintain_sql.LAST_MAINTAIN, ctx.run_id)
        removed = {r["month"]: r["removed"] for r in await conn.fetch(maintain_sql.DEMOTED_SINCE, since)}
        live = {r["relname"]: r["live"] for r in await conn.fetch(maintain_sql.PARTITIONS)}
        for month_key, gone in sorted(removed.items()):
            part = "memories_p" + month_key.replace("-", "")
            held = max(live.get(part, 0), 0) + gone
            if part in live and held and gone / held >= ctx.settings.sleep_reindex_dead_ratio:
                await conn.execute(maintain_sql.REINDEX, part)
                result.add("partitions_reindexed")
                result.change(action="reindexed", partition=part, removed=gone, held=held)
        for table in ("memories", "memory_terms", "bm25_terms", "memory_chunks", "entities", "memory_ids"):
            await conn.execute(maintain_sql.ANALYZE, table)
            result.add("tables_analyzed")
    await index_cold_tier(ctx, result)
    await expire_history(ctx, result)
    return result


__all__ = ["maintain"]
