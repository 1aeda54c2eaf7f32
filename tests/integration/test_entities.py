"""Entities and their summaries, read back: listed and opened as the memories they come from are
scoped, and returned with recall (schema: entities, memory_entities; sleep writes the summaries)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from cabrain.errors import AccessDenied, InputError, NotFound
from cabrain.sleep.cycle import run_cycle
from cabrain.types import MemoryInput, Network, RecallMode, RecallQuery, Visibility

TEAM = [
    "We moved the job queue to Valkey last sprint.",
    "Valkey needs 4 GB of memory on the cache node.",
    "The team watches Valkey with Grafana dashboards.",
]
PRIVATE = [
    "My Valkey admin password hint is in the vault.",  # mentions Valkey, alice's alone
    "Project Falcon is my secret side project.",  # the only memory that names Project Falcon
]


async def _store(brain) -> dict[str, uuid.UUID]:
    ids = {}
    for text in TEAM:
        [r] = await brain.retain("alice", MemoryInput(text, "proj", visibility=Visibility.TEAM, network=Network.FACT))
        ids[text] = r.memory_id
    for text in PRIVATE:
        [r] = await brain.retain("alice", MemoryInput(text, "proj"))
        ids[text] = r.memory_id
    return ids


async def _summarise(dsn: str, name: str, summary: str, sources: list[uuid.UUID]) -> None:
    """What a sleep run writes (cabrain/sleep/consolidate.py SET_SUMMARY), written here directly."""
    conn = await asyncpg.connect(dsn)
    try:
        status = await conn.execute(
            "UPDATE entities SET summary = $3, summary_sources = $4, summarized_at = now() "
            "WHERE namespace = $1 AND name = $2",
            "proj",
            name,
            summary,
            sources,
        )
        assert status == "UPDATE 1", name
    finally:
        await conn.close()


@pytest.fixture
async def summarised(brain, db_dsn):
    """Valkey summarised from team memories; Grafana from a team memory and one of alice's private ones."""
    ids = await _store(brain)
    await _summarise(db_dsn, "Valkey", "Valkey runs the job queue and needs 4 GB.", [ids[TEAM[0]], ids[TEAM[1]]])
    await _summarise(
        db_dsn,
        "Grafana",
        "Grafana watches Valkey; the admin password hint is in the vault.",
        [ids[TEAM[2]], ids[PRIVATE[0]]],
    )
    return ids


async def test_an_agent_without_access_to_the_namespace_is_told_it_is_not_there(brain, summarised) -> None:
    for call in (brain.entities("bob", "proj"), brain.entity("bob", "proj", "Valkey")):
        with pytest.raises(NotFound, match="does not exist or is not visible") as missing:
            await call
    # the same answer as for a namespace that does not exist: existence does not leak
    with pytest.raises(NotFound) as nowhere:
        await brain.entities("bob", "nowhere")
    assert str(missing.value).replace("'proj'", "'nowhere'") == str(nowhere.value)
    with pytest.raises(AccessDenied):
        await brain.entities("mallory", "proj")
    assert (await brain.recall("bob", RecallQuery("where is the job queue?", "proj"))).entities == []


async def test_a_granted_agent_sees_team_summaries_never_one_made_from_a_private_memory(brain, summarised) -> None:
    ids = summarised
    await brain.share("alice", "proj", "bob")  # read at once, before accepting
    page = await brain.entities("bob", "proj")
    by_name = {e.name: e for e in page.entities}
    assert "Project Falcon" not in by_name  # only a private memory of alice names it
    assert by_name["Valkey"].summary == "Valkey runs the job queue and needs 4 GB." and by_name["Valkey"].summarized_at
    assert by_name["Grafana"].summary is None and by_name["Grafana"].summarized_at is None
    assert [e.name for e in page.entities] == sorted(by_name, key=str.lower) and page.next_cursor is None

    valkey = await brain.entity("bob", "proj", "valkey")  # any case
    assert valkey.entity.summary == by_name["Valkey"].summary
    assert [m.id for m in valkey.memories] == [ids[t] for t in reversed(TEAM)]  # newest first, no private one
    assert ids[PRIVATE[0]] not in {m.id for m in valkey.memories}
    assert (await brain.entity("bob", "proj", str(valkey.entity.id))).entity.name == "Valkey"  # or by id
    with pytest.raises(NotFound) as hidden:
        await brain.entity("bob", "proj", "Project Falcon")
    with pytest.raises(NotFound) as unknown:
        await brain.entity("bob", "proj", "Project Condor")
    assert "Falcon" in str(hidden.value) and "Condor" in str(unknown.value)  # told apart by nothing but the name
    assert hidden.value.fix.action == "entities" and "memory_entities" in hidden.value.hint_for("mcp")

    # the owner reads it all, her private memory and the summary drawn from it included
    mine = {e.name: e for e in (await brain.entities("alice", "proj")).entities}
    assert mine["Grafana"].summary.startswith("Grafana watches Valkey") and "Project Falcon" in mine
    assert ids[PRIVATE[0]] in {m.id for m in (await brain.entity("alice", "proj", "Valkey")).memories}
    # an admin sees team summaries, never another agent's private memory
    root = await brain.entity("root", "proj", "Valkey")
    assert root.entity.summary and ids[PRIVATE[0]] not in {m.id for m in root.memories}
    assert (await brain.entity("root", "proj", "Grafana")).entity.summary is None


async def test_entities_page_by_name_filter_and_history(brain, summarised) -> None:
    ids = summarised
    first = await brain.entities("alice", "proj", limit=1)
    assert len(first.entities) == 1 and first.next_cursor
    rest = await brain.entities("alice", "proj", cursor=first.next_cursor)
    names = [e.name for e in first.entities + rest.entities]
    assert names == [e.name for e in (await brain.entities("alice", "proj")).entities]
    assert len(set(names)) == len(names) and rest.next_cursor is None
    assert [e.name for e in (await brain.entities("alice", "proj", query="VALK")).entities] == ["Valkey"]
    assert (await brain.entities("alice", "proj", query="no such name")).entities == []
    await brain.forget("alice", ids[TEAM[0]])
    current = await brain.entity("alice", "proj", "Valkey")
    assert ids[TEAM[0]] not in {m.id for m in current.memories}
    history = await brain.entity("alice", "proj", "Valkey", history=True)
    assert ids[TEAM[0]] in {m.id for m in history.memories}
    assert len((await brain.entity("alice", "proj", "Valkey", limit=1)).memories) == 1
    for bad in (
        brain.entities("alice", "proj", limit=0),
        brain.entity("alice", "proj", " "),
        brain.entity("alice", "proj", "Valkey", limit=201),
    ):
        with pytest.raises(InputError):
            await bad


async def test_recall_returns_the_summaries_its_hits_mention_that_the_caller_may_read(
    brain, summarised, open_brain, redis_url
) -> None:
    ids = summarised
    query = RecallQuery("Valkey job queue cache node Grafana", "proj", k=5)
    mine = await brain.recall("alice", query)
    hit_ids = [h.memory.id for h in mine.hits]
    entities = {e.name: e for e in mine.entities}
    assert set(entities) == {"Valkey", "Grafana"}  # only summarised entities come back
    assert mine.entities[0].name == "Valkey"  # mentioned by the most hits
    assert entities["Valkey"].summary.startswith("Valkey runs") and entities["Valkey"].summarized_at
    assert set(entities["Valkey"].memory_ids) <= set(hit_ids) and len(entities["Valkey"].memory_ids) >= 3
    assert entities["Valkey"].memory_ids == [i for i in hit_ids if i in set(entities["Valkey"].memory_ids)]
    assert entities["Grafana"].memory_ids == [ids[TEAM[2]]]

    await brain.share("alice", "proj", "bob")
    theirs = await brain.recall("bob", query)
    assert [e.name for e in theirs.entities] == ["Valkey"]  # Grafana's summary draws on a private memory
    assert ids[PRIVATE[0]] not in {i for e in theirs.entities for i in e.memory_ids}

    assert (await brain.recall("alice", RecallQuery(query.query, "proj", k=5, expand=False))).entities == []
    one = await open_brain(recall_entity_summaries=1)
    assert [e.name for e in (await one.recall("alice", query)).entities] == ["Valkey"]
    assert (await (await open_brain(recall_entity_summaries=0)).recall("alice", query)).entities == []
    assert (await brain.recall("alice", RecallQuery("zzqx wqzz", "proj", mode=RecallMode.BM25))).entities == []

    cached = await open_brain(redis_url=redis_url)
    first = await cached.recall("alice", query)
    again = await cached.recall("alice", query)
    assert again.cached and again.entities == first.entities == mine.entities


async def test_a_sleep_run_writes_summaries_that_recall_and_get_entity_then_show(brain, db_dsn, settings_for) -> None:
    sessions = [
        "The staging database runs PostgreSQL 16 on host db-stg-1.",
        "Staging's database is PostgreSQL 16 on the host db-stg-1.",
        "The staging DB is PostgreSQL 16, hosted on db-stg-1.",
        "Our staging database: PostgreSQL 16 running on db-stg-1.",
    ]
    for n, text in enumerate(sessions):
        await brain.retain(
            "alice", MemoryInput(text, "proj", visibility=Visibility.TEAM, source_ref=f"session-{n}"), decide=False
        )
    report = await run_cycle(settings_for(db_dsn), db_dsn, steps=["consolidate"], use_ray=False)
    assert report.status == "done", report.tasks
    summarised = [e for e in (await brain.entities("alice", "proj")).entities if e.summary]
    assert summarised, "the run summarised the entities of the facts it distilled"
    assert any("db-stg-1" in e.summary for e in summarised)
    found = await brain.recall("alice", RecallQuery("which host runs the staging database?", "proj", k=5))
    assert found.entities and all(e.summary for e in found.entities)
    assert {e.name for e in found.entities} <= {e.name for e in summarised}
    opened = await brain.entity("alice", "proj", found.entities[0].name)
    assert opened.entity.summary == found.entities[0].summary and opened.memories
    await brain.share("alice", "proj", "bob")  # team facts, team summaries: a granted agent reads them
    assert [e.name for e in (await brain.recall("bob", RecallQuery("staging database host", "proj"))).entities]


async def test_an_entity_shows_its_newest_readable_memories_past_any_number_it_may_not_read(brain, db_dsn) -> None:
    """An entity's memories are its links walked newest first, a window at a time, by the time each
    link carries (memory_entities.valid_at, migration 0025): with 130 newer private memories of
    another agent naming it (more than the first window), alice's page still holds her own newest
    readable ones, in order, exactly; the graph draws the same ones; bob sees his."""
    from datetime import UTC, datetime, timedelta

    await brain.share("alice", "proj", "bob", can_write=True)
    await brain.accept_grant("bob", "proj")
    start = datetime(2026, 1, 30, 23, 0, tzinfo=UTC)  # across a month's end: links and rows in two partitions
    team = [
        MemoryInput(
            f"The night shift checked Valkey rack {i}.",
            "proj",
            visibility=Visibility.TEAM,
            valid_at=start + timedelta(minutes=20 * i),
        )
        for i in range(8)
    ]
    mine = [r.memory_id for r in await brain.retain("alice", team, decide=False)]
    private = [
        MemoryInput(f"A private note {i} about Valkey.", "proj", valid_at=start + timedelta(days=2, seconds=i))
        for i in range(130)
    ]
    his = [r.memory_id for r in await brain.retain("bob", private, decide=False)]

    page = await brain.entity("alice", "proj", "Valkey", limit=5)
    assert [m.id for m in page.memories] == mine[::-1][:5]  # newest first, none of bob's
    assert page.mentions == 8
    everything = await brain.entity("alice", "proj", "Valkey", limit=200)
    assert [m.id for m in everything.memories] == mine[::-1]
    graph = await brain.entity_graph("alice", "proj", "Valkey", limit=3)
    drawn = [n["ref"] for n in graph["nodes"] if n["kind"] == "memory"]
    assert drawn == [str(i) for i in mine[::-1][:3]]
    bobs = await brain.entity("bob", "proj", "Valkey", limit=140)
    assert [m.id for m in bobs.memories] == his[::-1] + mine[::-1][: 140 - 130]

    conn = await asyncpg.connect(db_dsn)
    try:  # every link carries its memory's time, filled in by the database where the writer left it out
        wrong = await conn.fetchval(
            "SELECT count(*) FROM memory_entities me JOIN memory_ids i ON i.id = me.memory_id "
            "WHERE me.valid_at IS DISTINCT FROM i.valid_at"
        )
        linked = await conn.fetchval("SELECT count(*) FROM memory_entities")
    finally:
        await conn.close()
    assert wrong == 0 and linked >= 138
