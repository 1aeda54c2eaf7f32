"""Demotion killed at several points and run again: no memory lost, none in both tiers, none twice."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cabrain.failpoints import EXIT_CODE
from cabrain.store.cold import ColdTier
from cabrain.types import MemoryInput
from tests.conftest import cli_env, run_cli, run_cli_process

POINTS = ["demote.after_plan", "demote.after_cold_commit", "demote.before_hot_delete", "demote.after_hot_delete"]


@pytest.mark.subprocess
@pytest.mark.parametrize("point", POINTS)
async def test_a_crash_anywhere_in_demotion_loses_and_duplicates_nothing(
    brain, db_dsn, settings_for, home, point
) -> None:
    then = datetime.now(UTC) - timedelta(days=90)
    await brain.retain(
        "alice",
        [
            MemoryInput(
                f"Old episode {i}: the nightly build {i} took {i * 3} minutes.",
                "proj",
                valid_at=then + timedelta(hours=i),
            )
            for i in range(12)
        ],
        decide=False,
    )
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = created_at - interval '90 days'")
        everything = {r["id"] for r in await conn.fetch("SELECT id FROM memory_ids WHERE namespace = 'proj'")}
    finally:
        await conn.close()
    env = cli_env(database_url=db_dsn, home=str(home), sleep_demote_batch="5", sleep_demote_keep_importance="1.0")
    crashed = run_cli_process("sleep", "--inline", "--steps", "demote", env={**env, "CABRAIN_FAILPOINTS": point})
    assert crashed.returncode == EXIT_CODE, crashed.stderr
    assert f"failpoint {point}" in crashed.stderr
    again = run_cli("sleep", "--inline", "--steps", "demote", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    conn = await asyncpg.connect(db_dsn)
    try:
        hot = {r["id"] for r in await conn.fetch("SELECT id FROM memories WHERE namespace = 'proj'")}
        marked = {
            r["id"] for r in await conn.fetch("SELECT id FROM memory_ids WHERE namespace = 'proj' AND tier = 'cold'")
        }
        open_batches = await conn.fetchval("SELECT count(*) FROM cold_batches WHERE state <> 'done'")
        postings = await conn.fetchval(
            "SELECT count(*) FROM memory_terms WHERE memory_id = ANY($1::uuid[])", list(marked)
        )
    finally:
        await conn.close()
    cold_rows = ColdTier(settings_for(db_dsn)).scan("proj").to_pylist()
    cold = [r["id"] for r in cold_rows]
    assert len(cold) == len(set(cold)), "a memory was written to the cold tier twice"
    cold_ids = {uuid.UUID(i) for i in cold}
    assert hot == set() and cold_ids == everything == marked, "every memory is in exactly one tier"
    assert open_batches == 0 and postings == 0
    by_id = {r["id"]: r for r in cold_rows}
    assert all(by_id[str(i)]["content"].startswith("Old episode") for i in everything)
