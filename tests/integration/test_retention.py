"""Retention you can trust: captured raw text is not kept once it is a memory, a forget reaches the
raw text it came from and memories already in the cold tier, the cold tier's files are the
service user's alone, and with a retention set a forgotten memory's text leaves the cold tier."""

from __future__ import annotations

import stat
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pyarrow.parquet as pq

from cabrain.sleep.context import StepContext
from cabrain.sleep.cycle import run_cycle
from cabrain.sleep.maintain import maintain
from cabrain.sleep.purge import purge
from cabrain.types import ArchiveQuery, MemoryInput


async def _inbox_rows(dsn: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch("SELECT id, processed_at, memory_ids, items::text AS items FROM capture_inbox")
    finally:
        await conn.close()


async def _hand_over(brain, text: str) -> None:
    await brain.capture("alice", "proj", [{"content": text, "source_kind": "claude_code"}], decide=False)
    while await brain.drain_captures():
        pass


async def test_processed_capture_rows_are_removed_and_a_forget_removes_kept_raw_text(brain, open_brain, db_dsn) -> None:
    await _hand_over(brain, "User asked: rotate the staging TLS certificate on Friday.")
    assert await _inbox_rows(db_dsn) == []  # retained, then gone: the memory is the only copy

    keeping = await open_brain(capture_inbox_retention_s=3600)
    await _hand_over(keeping, "User asked: the quarterly report goes to finance@acme.test.")
    [row] = await _inbox_rows(db_dsn)
    assert row["processed_at"] is not None and len(row["memory_ids"]) == 1 and "quarterly report" in row["items"]
    await keeping.forget("alice", row["memory_ids"][0], reason="private")
    assert await _inbox_rows(db_dsn) == []  # the forget reached the raw text it came from

    # rows kept past their retention go with the next drain
    await _hand_over(keeping, "User asked: move the standup to 09:30.")
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE capture_inbox SET processed_at = processed_at - interval '2 hours'")
    finally:
        await conn.close()
    await keeping.drain_captures()
    assert await _inbox_rows(db_dsn) == []


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


async def test_an_archived_memory_can_be_forgotten_and_with_a_retention_its_text_leaves_the_cold_tier(
    brain,
    db_dsn,
    settings_for,
    home,
) -> None:
    kept = await brain.retain(
        "alice",
        [
            MemoryInput("The 2025 offsite was held in Luxor.", "proj"),
            MemoryInput("The lab door code is 4711, changed every quarter.", "proj"),
            MemoryInput("Quarterly planning happens in the second week.", "proj"),
        ],
        decide=False,
    )
    offsite, door, planning = (r.memory_id for r in kept)
    await brain.forget("alice", planning, reason="wrong")  # forgotten while hot, demoted later
    settings = settings_for(
        db_dsn, sleep_demote_after_days=0, sleep_demote_keep_importance=1.0, sleep_demote_invalid_after_days=0
    )
    report = await run_cycle(settings, db_dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 3

    # the cold tier's files and folders are the service user's alone
    cold = Path(home) / "cold"
    loose = {path: oct(mode) for path, mode in _modes(cold).items() if mode & 0o077}
    assert loose == {}, loose

    query = ArchiveQuery("door code of the lab", "proj", k=10)
    assert door in {h.memory.id for h in (await brain.recall_archive("alice", query)).hits}
    gone = await brain.forget("alice", door, reason="a secret")  # forgotten after its demotion
    assert gone.memory.tier == "cold" and gone.memory.invalid_at is not None
    assert gone.memory.metadata["forgotten_by"] == "alice"
    for text in ("door code of the lab", "quarterly planning week", "offsite Luxor"):
        hits = {h.memory.id for h in (await brain.recall_archive("alice", ArchiveQuery(text, "proj", k=10))).hits}
        assert door not in hits and planning not in hits
    assert offsite in {h.memory.id for h in (await brain.recall_archive("alice", ArchiveQuery("offsite", "proj"))).hits}

    # without a retention the cold tier keeps the text; with one, the purge and the history expiry remove it
    run_id = uuid.uuid4()
    later = datetime.now(UTC) + timedelta(hours=2)  # past the expiry's one-hour margin
    assert (await purge(StepContext(settings, db_dsn, run_id), "proj")).counts == {}
    retained = settings.model_copy(update={"cold_forgotten_retention_days": 0.0})
    purged = await purge(StepContext(retained, db_dsn, run_id), "proj")
    assert purged.counts == {"purged": 2}
    expired = await maintain(StepContext(retained, db_dsn, run_id, clock=lambda: later))
    assert expired.counts["snapshots_expired"] >= 1 and expired.counts["files_deleted"] >= 1
    assert (await purge(StepContext(retained, db_dsn, run_id), "proj")).counts == {}  # nothing left to do

    shown = await brain.get("alice", door)
    assert "purged from the cold tier" in shown.memory.content and "4711" not in shown.memory.content
    assert offsite in {h.memory.id for h in (await brain.recall_archive("alice", ArchiveQuery("offsite", "proj"))).hits}
    table = brain.engine.cold_tier().refresh()
    assert len(table.snapshots()) == 1
    left = []
    for path in (cold / "warehouse").rglob("*"):
        if path.suffix == ".parquet":
            left += pq.read_table(path, columns=["content"]).column("content").to_pylist()
        elif path.is_file():
            assert b"4711" not in path.read_bytes() and b"Quarterly planning" not in path.read_bytes(), path
    assert "The 2025 offsite was held in Luxor." in left
    assert not [c for c in left if "4711" in c or "Quarterly planning" in c]
    loose = {path: oct(mode) for path, mode in _modes(cold).items() if mode & 0o077}
    assert loose == {}, loose
