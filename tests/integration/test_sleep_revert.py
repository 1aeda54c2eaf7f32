"""A sleep run is readable and reversible: its page lists every fact, summary, merge, supersession,
decay and archive it made, with the texts; reverting the run undoes all of it in one judgment per
namespace, and reverting that revert puts it back. Real PostgreSQL and a real Iceberg cold tier."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cabrain.errors import ConflictError, InputError, NotFound
from cabrain.sleep.cycle import run_cycle
from cabrain.sleep.runs import SleepRuns
from cabrain.types import MemoryInput, MemoryType, Network, RecallQuery, Visibility

EPISODES = [
    "The staging database runs PostgreSQL 16 on host db-stg-1.",
    "Staging's database is PostgreSQL 16 on the host db-stg-1.",
    "The staging DB is PostgreSQL 16, hosted on db-stg-1.",
    "Our staging database: PostgreSQL 16 running on db-stg-1.",
    "Lunch order: falafel for everyone.",
]
STATE = """
SELECT i.id, i.tier, m.invalid_at, m.superseded_by, m.importance, m.source_kind
FROM memory_ids i LEFT JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.namespace = 'proj' ORDER BY i.id
"""
SUMMARIES = "SELECT id, summary, summary_sources FROM entities WHERE namespace = 'proj' ORDER BY id"


async def _snapshot(dsn: str) -> tuple[dict, dict]:
    conn = await asyncpg.connect(dsn)
    try:
        memories = {r["id"]: dict(r) for r in await conn.fetch(STATE)}
        entities = {r["id"]: (r["summary"], list(r["summary_sources"])) for r in await conn.fetch(SUMMARIES)}
    finally:
        await conn.close()
    return memories, entities


async def test_a_whole_run_is_listed_reverted_and_brought_back(brain, db_dsn, settings_for) -> None:
    now = datetime.now(UTC)
    stored = await brain.retain(
        "alice",
        [
            MemoryInput(text, "proj", visibility=Visibility.TEAM, valid_at=now - timedelta(days=60 - n))
            for n, text in enumerate(EPISODES)
        ],
        decide=False,
    )
    old = [r.memory_id for r in stored]
    conn = await asyncpg.connect(db_dsn)
    try:  # stored back then, so the run decays them and archives the ones distilled into a fact
        await conn.execute("UPDATE memories SET created_at = created_at - interval '60 days' WHERE namespace = 'proj'")
    finally:
        await conn.close()
    for text, days in (
        ("The public API rate limit is 100 requests per minute.", 2),
        ("The public API rate limit is 250 requests per minute now.", 1),
    ):
        await brain.retain(
            "alice",
            [
                MemoryInput(
                    text,
                    "proj",
                    network=Network.FACT,
                    memory_type=MemoryType.SEMANTIC,
                    valid_at=now - timedelta(days=days),
                )
            ],
            decide=False,
        )
    before, entities_before = await _snapshot(db_dsn)
    settings = settings_for(
        db_dsn, sleep_demote_after_days=30, sleep_consolidate_window_days=90, sleep_demote_invalid_after_days=0
    )
    report = await run_cycle(settings, db_dsn, use_ray=False)
    assert report.status == "done", report.tasks
    after, entities_after = await _snapshot(db_dsn)

    # the run's page: every kind of change, with the texts of what is still hot
    page = await SleepRuns(brain.engine).run("alice", report.run_id)
    kinds = {j["kind"] for j in page["judgments"]}
    assert {"distill", "summarize", "supersede", "decay", "archive"} <= kinds, kinds
    [distill] = [j for j in page["judgments"] if j["kind"] == "distill"]
    facts = list(distill["inputs"]["facts"])
    assert facts and all(page["memories"][f]["network"] == "fact" for f in facts)
    assert any("db-stg-1" in page["memories"][f]["content"] for f in facts)
    assert all(set(distill["inputs"]["facts"][f]["sources"]) <= {str(i) for i in old} for f in facts)
    [summarize] = [j for j in page["judgments"] if j["kind"] == "summarize"]
    assert all(e["before"]["summary"] is None and e["after"]["summary"] for e in summarize["entities"])
    assert "[1]" in summarize["entities"][0]["after"]["summary"]  # each sentence cites its fact
    archived = [m for j in page["judgments"] if j["kind"] == "archive" for m in j["inputs"]["memories"]]
    assert archived and all(after[uuid.UUID(m)]["tier"] == "cold" for m in archived)
    texts = [v["text"] for j in page["judgments"] if j["kind"] == "archive" for v in j["inputs"]["memories"].values()]
    assert any("db-stg-1" in t for t in texts)  # one archive judgment per month partition, with the texts

    # bob may not see it; with a read grant he sees it but may not revert it
    with pytest.raises(NotFound):
        await brain.revert_run("bob", report.run_id)
    await brain.share("alice", "proj", "bob")
    with pytest.raises(ConflictError, match="may write"):
        await brain.revert_run("bob", report.run_id)

    [undo] = await brain.revert_run("alice", report.run_id, reason="bad night")
    assert undo["kind"] == "revert" and undo["inputs"]["run"] == str(report.run_id) and undo["reason"] == "bad night"
    reverted, entities_reverted = await _snapshot(db_dsn)
    for memory_id, was in before.items():  # everything that was there is as it was, hot again
        now_ = reverted[memory_id]
        assert (now_["tier"], now_["invalid_at"], now_["superseded_by"]) == (
            was["tier"],
            was["invalid_at"],
            was["superseded_by"],
        ), memory_id
        assert now_["importance"] == pytest.approx(was["importance"])
    new = [m for m in reverted if m not in before]
    assert new and all(reverted[m]["source_kind"] == "sleep" and reverted[m]["invalid_at"] for m in new)
    assert entities_reverted == entities_before  # no summary written
    hits = await brain.recall("alice", RecallQuery("staging database host", "proj", k=10))
    assert {h.memory.id for h in hits.hits} & set(old)  # the archived episodes answer again
    assert not {h.memory.id for h in hits.hits} & set(new)  # the run's facts do not
    page = await SleepRuns(brain.engine).run("alice", report.run_id)
    assert all(j["reverted_by"] == undo["id"] for j in page["judgments"] if j["kind"] != "revert")
    with pytest.raises(ConflictError, match="nothing to revert"):
        await brain.revert_run("alice", report.run_id)

    # the revert is a judgment like any other: reverting it puts the run's work back
    again = await brain.revert("alice", judgment_id=undo["id"])
    assert again["reverts"] == undo["id"]
    redone, entities_redone = await _snapshot(db_dsn)
    assert entities_redone == entities_after
    for memory_id, was in after.items():
        if was["tier"] == "cold":
            assert redone[memory_id]["tier"] == "hot"  # brought back from the archive, they stay
            continue
        assert (redone[memory_id]["invalid_at"], redone[memory_id]["superseded_by"]) == (
            was["invalid_at"],
            was["superseded_by"],
        ), memory_id
        assert redone[memory_id]["importance"] == pytest.approx(was["importance"])


async def test_a_running_or_unknown_run_is_not_reverted(brain, db_dsn) -> None:
    running = uuid.uuid4()
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute(
            "INSERT INTO sleep_runs (id, status, steps, namespaces) VALUES ($1, 'running', '{dedup}', '{proj}')",
            running,
        )
    finally:
        await conn.close()
    with pytest.raises(ConflictError, match="still running"):
        await brain.revert_run("alice", running)
    with pytest.raises(NotFound):
        await brain.revert_run("alice", uuid.uuid4())
    with pytest.raises(InputError):
        await brain.revert_run("alice", "not-a-run-id")
