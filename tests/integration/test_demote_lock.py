"""Demotion is a writer like any other: it takes the namespace's writer lock before it touches the
namespace's rows and counters, so it waits for a retain in progress instead of deadlocking with it
(a retain updates the counters, then the keyword statistics, then may supersede a row)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg

from cabrain.sleep.cycle import run_cycle
from cabrain.store.namespaces import NAMESPACE_LOCK
from cabrain.types import MemoryInput, Visibility


async def test_demotion_waits_for_the_namespace_writer(brain, settings_for, db_dsn: str) -> None:
    old = datetime(2024, 2, 10, tzinfo=UTC)
    await brain.retain(
        "alice",
        [
            MemoryInput(f"Old episode {i} about the Q1 budget.", "proj", visibility=Visibility.TEAM, valid_at=old)
            for i in range(3)
        ],
        decide=False,
    )
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '90 days'")
        settings = settings_for(db_dsn, sleep_demote_after_days=30, sleep_demote_keep_importance=1.0)
        writer = await asyncpg.connect(db_dsn)
        try:
            tx = writer.transaction()
            await tx.start()
            await writer.execute(NAMESPACE_LOCK, "proj")  # a retain into proj, in progress
            cycle = asyncio.create_task(run_cycle(settings, db_dsn, steps=["demote"], use_ray=False))
            await asyncio.sleep(3)
            assert not cycle.done()
            hot = await conn.fetchval("SELECT count(*) FROM memories WHERE namespace = 'proj'")
            assert hot == 3  # nothing left the hot tier while the writer held the namespace
            await tx.commit()
            report = await asyncio.wait_for(cycle, 120)
        finally:
            await writer.close()
        assert report.steps["demote"]["demoted"] == 3
        assert await conn.fetchval("SELECT count(*) FROM memories WHERE namespace = 'proj'") == 0
    finally:
        await conn.close()
