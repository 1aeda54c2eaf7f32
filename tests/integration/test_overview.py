"""The overview: counts kept as memories change (never a scan) that always equal a scan, activity per
hour and day, sleep runs and pending actions, and no reader counts another agent's private memories."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cabrain import overview as overview_mod
from cabrain.cli.overview import render
from cabrain.errors import InputError
from cabrain.overview import size
from cabrain.sleep.cycle import run_cycle
from cabrain.store import browse as browse_sql
from cabrain.store.browse import BrowseFilters
from cabrain.types import MemoryInput, MemoryType, RecallQuery, Visibility

# What the counters must always equal: the rows themselves, grouped (the test's own scan).
SCAN = """
SELECT namespace, coalesce(owner_agent_id, '') AS owner, visibility, tier, memory_type, coalesce(source_kind, '') AS source,
       CASE WHEN invalid_at IS NULL THEN 'current' WHEN superseded_by IS NOT NULL THEN 'superseded' ELSE 'forgotten' END AS state,
       count(*) AS n
FROM memories GROUP BY 1, 2, 3, 4, 5, 6, 7
UNION ALL
SELECT namespace, coalesce(owner_agent_id, ''), coalesce(visibility, 'private'), 'cold', '', coalesce(source_kind, ''),
       CASE WHEN forgotten_at IS NULL THEN 'archived' ELSE 'forgotten' END, count(*)
FROM memory_ids WHERE tier = 'cold' GROUP BY 1, 2, 3, 4, 5, 6, 7
"""
KEPT = """
SELECT namespace, owner_agent_id AS owner, visibility, tier, memory_type, source_kind AS source, state, n
FROM memory_counts WHERE n <> 0
"""


async def _same_as_a_scan(dsn: str) -> dict[tuple, int]:
    conn = await asyncpg.connect(dsn)
    try:
        scanned = {tuple(r.values())[:-1]: r["n"] for r in await conn.fetch(SCAN)}
        kept = {tuple(r.values())[:-1]: r["n"] for r in await conn.fetch(KEPT)}
    finally:
        await conn.close()
    assert kept == scanned
    return kept


def _ns(found: dict, name: str) -> dict:
    return next(n for n in found["namespaces"] if n["name"] == name)


async def _seed(brain) -> list:
    items = [
        MemoryInput(f"Team note {i}: the deploy window is Tuesday {i}.", "proj", visibility=Visibility.TEAM)
        for i in range(4)
    ]
    items += [MemoryInput("Alice's private note: my dentist is on Friday.", "proj")]
    items += [
        MemoryInput(
            "Everyone: the office wifi is cabrain-guest.",
            "proj",
            visibility=Visibility.GLOBAL,
            memory_type=MemoryType.SEMANTIC,
            source_kind="chat",
        )
    ]
    return [r.memory_id for r in await brain.retain("alice", items, decide=False)]


async def test_counts_are_kept_through_every_change_and_equal_a_scan(brain, db_dsn) -> None:
    ids = await _seed(brain)
    await _same_as_a_scan(db_dsn)
    await brain.forget("alice", ids[0], reason="obsolete")
    # a write-time supersession (UPDATE) and its revert
    first = await brain.retain(
        "alice", [MemoryInput("The staging database runs PostgreSQL 15.", "proj", visibility=Visibility.TEAM)]
    )
    second = await brain.retain(
        "alice", [MemoryInput("The staging database now runs PostgreSQL 16.", "proj", visibility=Visibility.TEAM)]
    )
    kept = await _same_as_a_scan(db_dsn)
    states = {k[-1] for k in kept}
    assert "forgotten" in states
    judgments = await brain.judgments("alice", first[0].memory_id)
    if judgments:  # the writer judged the second a new version of the first
        assert "superseded" in states
        await brain.revert("alice", judgment_id=judgments[0]["id"])
        await _same_as_a_scan(db_dsn)
    assert second[0].memory_id is not None

    # a demotion to the cold tier, then an unarchive back
    old = datetime.now(UTC) - timedelta(days=90)
    [aged] = await brain.retain(
        "alice",
        [MemoryInput("An old episode about the 2025 offsite.", "proj", visibility=Visibility.TEAM, valid_at=old)],
        decide=False,
    )
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '90 days' WHERE id = $1", aged.memory_id)
    finally:
        await conn.close()
    demoting = brain.settings.model_copy(update={"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0})
    report = await run_cycle(demoting, db_dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] >= 1
    kept = await _same_as_a_scan(db_dsn)
    assert any(k[3] == "cold" for k in kept)
    found = await brain.overview("alice", namespace="proj")
    assert _ns(found, "proj")["archived"] >= 1 and found["totals"]["by_tier"]["cold"] >= 1
    await brain.unarchive("alice", aged.memory_id)
    await _same_as_a_scan(db_dsn)


async def test_no_reader_counts_another_agents_private_memories(brain) -> None:
    await _seed(brain)  # 4 team, 1 private (alice's), 1 global, all alice's, in proj
    await brain.create_namespace("bob", "bobs")
    await brain.retain("bob", [MemoryInput("Bob's own secret plan for the weekend.", "bobs")], decide=False)
    await brain.retain(
        "bob", [MemoryInput("Bob's team note: lunch at noon.", "bobs", visibility=Visibility.TEAM)], decide=False
    )

    alice = await brain.overview("alice")
    assert _ns(alice, "proj")["current"] == 6 and _ns(alice, "proj")["private_of_others"] == 0
    assert "bobs" not in {n["name"] for n in alice["namespaces"]}  # neither hers, nor shared, nor global

    # an admin sees every namespace whole, but never counts another's private memory: only its number
    root = await brain.overview("root")
    assert _ns(root, "proj")["current"] == 5 and _ns(root, "proj")["private_of_others"] == 1
    assert _ns(root, "bobs")["current"] == 1 and _ns(root, "bobs")["private_of_others"] == 1
    assert root["storage"]["hot_bytes"] > 0

    # carol reads proj only where it is global: one memory, no number of others' private ones
    carol = await brain.overview("carol")
    assert _ns(carol, "proj") == _ns(carol, "proj") | {"current": 1, "private_of_others": 0}
    assert carol["days"][-1]["retained"] == 1 and carol["days"][-1]["recalled"] == 0
    assert carol["storage"]["hot_bytes"] is None

    # a read grant lets bob see proj whole: the team memories too, alice's private one as a number
    await brain.share("alice", "proj", "bob", can_write=False)
    bob = await brain.overview("bob", namespace="proj")
    assert [n["name"] for n in bob["namespaces"]] == ["proj"]
    assert _ns(bob, "proj")["current"] == 5 and _ns(bob, "proj")["private_of_others"] == 1
    assert bob["totals"]["by_type"] == {"episodic": 4, "semantic": 1}
    assert bob["totals"]["by_source"]["chat"] == 1


async def test_activity_per_hour_and_day_runs_and_pending(brain, db_dsn) -> None:
    await _seed(brain)
    await brain.recall("alice", RecallQuery("deploy window", "proj", k=3))
    conn = await asyncpg.connect(db_dsn)
    try:
        for _ in range(200):  # the bookkeeper writes the recall's event off the response path
            if await conn.fetchval("SELECT count(*) FROM memory_events WHERE op = 'recall'"):
                break
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    found = await brain.overview("alice")
    today, hour = found["days"][-1], found["hours"][-1]
    assert (today["retained"], today["recalled"]) == (6, 1) and (hour["retained"], hour["recalled"]) == (6, 1)
    assert len(found["days"]) == 7 and len(found["hours"]) == 24
    assert sum(d["retained"] for d in found["days"][:-1]) == 0
    assert found["pending_actions"] == 0 and found["last_runs"] == []
    report = await run_cycle(brain.settings, db_dsn, steps=["decay"], use_ray=False)
    found = await brain.overview("alice")
    assert found["days"][-1]["slept"] == 1 and found["last_runs"][0]["id"] == report.run_id
    assert "Other agents' private memories" in "\n".join(render(found))


@settings(max_examples=50)
@given(runs=st.integers())
def test_a_number_of_runs_outside_0_to_50_is_refused_clearly(runs: int) -> None:
    if 0 <= runs <= 50:
        overview_mod.check_runs(runs)
    else:
        with pytest.raises(InputError, match="runs must be between 0 and 50"):
            overview_mod.check_runs(runs)


async def test_the_operation_refuses_a_bad_number_of_runs(brain) -> None:
    with pytest.raises(InputError, match="runs must be between 0 and 50"):
        await brain.overview("alice", runs=51)


def test_sizes_read_as_a_person_reads_them() -> None:
    assert [size(None), size(512), size(2048), size(5 * 1024**3)] == ["-", "512 B", "2.0 KiB", "5.0 GiB"]


async def _turns(brain) -> list:
    said = [
        ("Dana", "t-1", "The invoice service moves to Frankfurt next sprint."),
        ("Omar", "t-1", "Then the invoice exports need the new bucket name."),
        ("Dana", "t-2", "Lunch on Friday is at the harbour."),
        ("Omar", "t-2", "I will book the harbour table for Friday."),
    ]
    items = [
        MemoryInput(
            text, "proj", visibility=Visibility.TEAM, source_kind="chat", metadata={"speaker": who, "thread": t}
        )
        for who, t, text in said
    ]
    return [r.memory_id for r in await brain.retain("alice", items, decide=False)]


async def test_search_speaker_and_thread_filter_the_list_and_count_it_without_counting_a_use(brain, db_dsn) -> None:
    ids = await _turns(brain)
    await _seed(brain)

    async def listed(**narrow) -> list:
        return [m.id for m in (await brain.browse("bob", "proj", BrowseFilters(**narrow), limit=50)).memories]

    await brain.share("alice", "proj", "bob", can_write=False)
    invoice = await listed(text="invoice")
    assert set(invoice) >= {ids[0], ids[1]} and ids[2] not in invoice
    # every word, as the keyword index holds it: a turn is found by the turns before it too (recall's rule)
    assert set(await listed(text="invoice Frankfurt")) == {ids[0], ids[1]}
    assert await listed(text="harbour table") == [ids[3]]
    assert sorted(await listed(speaker="Dana")) == sorted([ids[2], ids[0]])
    assert sorted(await listed(thread="t-2")) == sorted([ids[3], ids[2]])
    assert await listed(speaker="Omar", thread="t-1") == [ids[1]]
    assert await listed(text="nothing-like-this-word") == []

    # counts: the whole list from the kept counts (exact), a narrowed one counted up to a cap
    whole = await brain.browse_count("bob", "proj", BrowseFilters())
    assert whole == {"count": 9, "more": False}  # alice's private note is not bob's to count
    assert await brain.browse_count("bob", "proj", BrowseFilters(speaker="Dana")) == {"count": 2, "more": False}
    assert await brain.browse_count("bob", "proj", BrowseFilters(text="harbour")) == {"count": 2, "more": False}
    assert (await brain.browse_count("bob", "proj", BrowseFilters(min_importance=0.1)))["count"] is None
    assert (await brain.browse_count("alice", "proj", BrowseFilters()))["count"] == 10

    # browsing and searching are not uses
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await conn.fetchval("SELECT sum(access_count) FROM memories") == 0
        assert await conn.fetchval("SELECT count(*) FROM memory_events WHERE op IN ('recall', 'read')") == 0
    finally:
        await conn.close()

    # the list opens where memories the agent may read were written last
    await brain.create_namespace("bob", "bobs")
    assert await brain.last_written("bob") == "proj"
    await brain.retain("bob", [MemoryInput("Bob's own plan.", "bobs")], decide=False)
    assert await brain.last_written("bob") == "bobs"  # the same hour: the newest write decides
    assert await brain.last_written("carol") == "proj"  # a global memory there


async def test_a_cap_says_more_than(brain, monkeypatch) -> None:
    await _turns(brain)
    monkeypatch.setattr(browse_sql, "COUNT_CAP", 1)
    assert await brain.browse_count("alice", "proj", BrowseFilters(speaker="Dana")) == {"count": 1, "more": True}


@settings(max_examples=40)
@given(text=st.text(max_size=300))
def test_a_search_is_words_or_a_clear_refusal(text: str) -> None:
    try:
        chosen = BrowseFilters(text=text)
    except InputError as exc:
        assert "characters" in str(exc) or "no word" in str(exc)
        return
    assert chosen.terms() and chosen.narrowed and len(text) <= 200


def test_a_search_and_an_importance_floor_and_the_archive_are_refused_together() -> None:
    with pytest.raises(InputError, match="do not go together"):
        BrowseFilters(text="invoice", min_importance=0.5)
    with pytest.raises(InputError, match="characters"):
        BrowseFilters(speaker="  ")


async def test_a_search_pages_newest_first_with_its_cursor(brain) -> None:
    ids = await _turns(brain)
    pages, cursor = [], None
    while True:
        found = await brain.browse("alice", "proj", BrowseFilters(text="harbour"), limit=1, cursor=cursor)
        pages += [m.id for m in found.memories]
        if not (cursor := found.next_cursor):
            break
    assert sorted(pages) == sorted([ids[2], ids[3]]) and len(pages) == 2
