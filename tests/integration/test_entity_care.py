"""Entities looked after by people: mention counts that never count another agent's private memory,
kept as memories change; rename and merge as judgments that ``revert`` undoes exactly."""

from __future__ import annotations

import io
import uuid

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cabrain.errors import AccessDenied, ConflictError, InputError, NotFound
from cabrain.portable.facade import Portable
from cabrain.types import MemoryInput, Network, Visibility
from tests.conftest import _create_database, _drop_database

TEAM = [
    "We moved the job queue to Valkey last sprint.",
    "Valkey needs 4 GB of memory on the cache node.",
    "The team watches Valkey with Grafana dashboards.",
    "Grafana alerts page the on-call engineer.",
]
BOB_PRIVATE = "Bob's note: Valkey and Grafana both need upgrades."


async def _retain(brain, agent: str, text: str, visibility: Visibility = Visibility.TEAM) -> uuid.UUID:
    [r] = await brain.retain(agent, MemoryInput(text, "proj", visibility=visibility, network=Network.FACT))
    return r.memory_id


@pytest.fixture
async def second_dsn(pg_server, template_db):
    name = await _create_database(pg_server, template_db)
    yield pg_server.dsn(name)
    await _drop_database(pg_server, name)


@pytest.fixture
async def team(brain) -> dict[str, uuid.UUID]:
    """alice's team memories in proj; bob may read and write it and keeps a private memory there."""
    ids = {text: await _retain(brain, "alice", text) for text in TEAM}
    await brain.share("alice", "proj", "bob", can_read=True, can_write=True)
    await brain.accept_grant("bob", "proj")
    ids[BOB_PRIVATE] = await _retain(brain, "bob", BOB_PRIVATE, Visibility.PRIVATE)
    return ids


async def _links(dsn: str, name: str) -> set[uuid.UUID]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT me.memory_id FROM memory_entities me JOIN entities e ON e.id = me.entity_id "
            "WHERE e.namespace = 'proj' AND e.name = $1",
            name,
        )
        return {r["memory_id"] for r in rows}
    finally:
        await conn.close()


def _counts(page) -> dict[str, tuple[int, int]]:
    return {e.name: (e.mentions, e.own_private_mentions) for e in page.entities}


async def test_counts_are_of_readable_memories_only_and_follow_forgets(brain, team) -> None:
    alice = _counts(await brain.entities("alice", "proj", limit=200))
    bob = _counts(await brain.entities("bob", "proj", limit=200))
    # bob's private memory counts for bob (as his own) and never for alice
    assert alice["Valkey"] == (3, 0) and bob["Valkey"] == (3, 1)
    assert alice["Grafana"] == (2, 0) and bob["Grafana"] == (2, 1)
    # the count is what the entity's page counts
    assert (await brain.entity("alice", "proj", "Valkey")).mentions == 3
    assert (await brain.entity("bob", "proj", "Valkey")).mentions == 4
    # forgetting a memory takes it out of the count; the order by mentions follows
    await brain.forget("alice", team[TEAM[0]])
    assert _counts(await brain.entities("alice", "proj", limit=200))["Valkey"] == (2, 0)
    ranked = await brain.entities("alice", "proj", sort="mentions", limit=200)
    mentions = [e.mentions for e in ranked.entities]
    assert mentions == sorted(mentions, reverse=True)
    # paging by mentions walks the same order
    first = await brain.entities("alice", "proj", sort="mentions", limit=1)
    second = await brain.entities("alice", "proj", sort="mentions", limit=1, cursor=first.next_cursor)
    assert [first.entities[0].name, second.entities[0].name] == [e.name for e in ranked.entities[:2]]
    with pytest.raises(InputError):
        await brain.entities("alice", "proj", sort="size")
    with pytest.raises(InputError):
        await brain.entities("alice", "proj", sort="mentions", cursor="not-a-cursor")


async def test_merge_then_revert_puts_every_link_back_exactly(brain, team, db_dsn) -> None:
    valkey, grafana = await _links(db_dsn, "Valkey"), await _links(db_dsn, "Grafana")
    judgment = await brain.merge_entity("alice", "proj", "Grafana", "Valkey", reason="one dashboard")
    assert (judgment["kind"], judgment["origin"]) == ("entity_merge", "person")
    assert await _links(db_dsn, "Grafana") == set() and await _links(db_dsn, "Valkey") == valkey | grafana
    merged = (await brain.entity("alice", "proj", "Grafana")).entity  # kept, marked
    assert merged.merged_into == (await brain.entity("alice", "proj", "Valkey")).entity.id
    assert "Grafana" not in _counts(await brain.entities("alice", "proj", limit=200))
    # a memory that names it after the merge mentions the entity it was merged into
    later = await _retain(brain, "alice", "Grafana got a new theme.")
    assert later in await _links(db_dsn, "Valkey")
    undo = await brain.revert("alice", judgment_id=judgment["id"])
    assert await _links(db_dsn, "Grafana") == grafana
    assert await _links(db_dsn, "Valkey") == valkey | {later}
    assert (await brain.entity("alice", "proj", "Grafana")).entity.merged_into is None
    assert _counts(await brain.entities("alice", "proj", limit=200))["Grafana"] == (2, 0)
    # and the revert of the revert merges them again
    await brain.revert("alice", judgment_id=undo["id"])
    assert await _links(db_dsn, "Grafana") == set()


async def test_rename_then_revert_and_a_taken_name(brain, team) -> None:
    judgment = await brain.rename_entity("alice", "proj", "Valkey", "Valkey cluster")
    assert judgment["kind"] == "entity_rename"
    assert (await brain.entity("alice", "proj", "valkey CLUSTER")).entity.name == "Valkey cluster"
    with pytest.raises(NotFound):
        await brain.entity("alice", "proj", "Valkey")
    with pytest.raises(ConflictError) as taken:
        await brain.rename_entity("alice", "proj", "Grafana", "valkey cluster")
    assert "merge" in (taken.value.hint or "")
    await brain.revert("alice", judgment_id=judgment["id"])
    assert (await brain.entity("alice", "proj", "Valkey")).entity.name == "Valkey"


async def test_only_writers_of_the_namespace_merge_or_rename(brain, team) -> None:
    await brain.share("alice", "proj", "carol", can_read=True)
    with pytest.raises((AccessDenied, NotFound)):
        await brain.rename_entity("carol", "proj", "Valkey", "Redis")
    with pytest.raises((AccessDenied, NotFound)):
        await brain.merge_entity("carol", "proj", "Grafana", "Valkey")
    with pytest.raises(ConflictError):
        await brain.merge_entity("alice", "proj", "Valkey", "Valkey")


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(max_size=300))
async def test_any_new_name_is_renamed_or_refused_clearly(brain, team, name: str) -> None:
    try:
        judgment = await brain.rename_entity("alice", "proj", "Grafana", name)
    except (InputError, ConflictError) as refused:
        assert refused.message
        return
    await brain.revert("alice", judgment_id=judgment["id"])


async def test_counts_come_back_with_an_export_imported_elsewhere(
    brain, team, settings_for, second_dsn, embedder
) -> None:
    from cabrain.brain import Brain

    await brain.merge_entity("alice", "proj", "Grafana", "Valkey")  # a merged entity travels marked
    exported = io.StringIO()
    await Portable(brain.engine).export(None, ["proj"], exported)
    assert '"mentions"' not in exported.getvalue()  # derived: counted again where it is imported
    before = {e.name: e.mentions for e in (await brain.entities("alice", "proj", limit=200)).entities}
    other = await Brain.open(settings_for(second_dsn), dsn=second_dsn, embedder=embedder)
    try:
        await Portable(other.engine).restore(None, io.StringIO(exported.getvalue()))
        after = {e.name: e.mentions for e in (await other.entities("alice", "proj", limit=200)).entities}
        assert after == before and after["Valkey"] == 4
        assert (await other.entity("alice", "proj", "Grafana")).entity.merged_into is not None
    finally:
        await other.close()


async def test_a_merge_shows_no_trace_of_the_private_mentions_it_moved(brain, team) -> None:
    # bob's private memory mentions Grafana: alice's merge moves its link, and says nothing of it
    judgment = await brain.merge_entity("alice", "proj", "Grafana", "Valkey")
    [entry] = judgment["entities"]
    assert (entry["change"], entry["name"], entry["into_name"]) == ("merge", "Grafana", "Valkey")
    assert "moved" not in entry and "added" not in entry
    assert str(team[BOB_PRIVATE]) not in repr(judgment)
    # the same for any reader of the namespace later, through the memory it names
    for seen in await brain.judgments("alice", team[TEAM[0]]):
        assert str(team[BOB_PRIVATE]) not in repr(seen)


RECOUNT = """
WITH live AS (
    SELECT me.entity_id, m.visibility, m.owner_agent_id
    FROM memory_entities me
    JOIN memory_ids i ON i.id = me.memory_id
    JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
    WHERE m.tier = 'hot' AND m.invalid_at IS NULL
)
SELECT
    (SELECT count(*) FROM entities e
     WHERE e.mentions <> (SELECT count(*) FROM live WHERE live.entity_id = e.id AND live.visibility <> 'private'))
  + (SELECT count(*) FROM (
        SELECT entity_id, owner_agent_id, count(*) AS n FROM live WHERE visibility = 'private' GROUP BY 1, 2
     ) r FULL JOIN (SELECT * FROM entity_private_mentions WHERE n <> 0) p USING (entity_id, owner_agent_id)
     WHERE r.n IS DISTINCT FROM p.n)
"""


async def test_the_kept_counts_equal_a_recount_after_batches_merges_reverts_forgets_and_restores(
    brain, team, db_dsn
) -> None:
    """The mention counts are kept once per statement (migration 0025): a batch linking many
    memories to several entities at once, a merge (links deleted and inserted), its revert, a forget
    and a restore leave them equal to a recount of the current hot links, shared and per owner."""

    async def wrong() -> int:
        conn = await asyncpg.connect(db_dsn)
        try:
            return int(await conn.fetchval(RECOUNT))
        finally:
            await conn.close()

    batch = [
        MemoryInput(f"Valkey and Grafana checked on node {i}.", "proj", visibility=v)
        for i, v in enumerate([Visibility.TEAM, Visibility.PRIVATE, Visibility.TEAM, Visibility.GLOBAL])
    ]
    kept = await brain.retain("bob", batch, decide=False)
    assert await wrong() == 0
    merged = await brain.merge_entity("alice", "proj", "Grafana", "Valkey", reason="one tool")
    assert await wrong() == 0
    await brain.revert("alice", judgment_id=merged["id"])
    assert await wrong() == 0
    await brain.forget("bob", kept[1].memory_id)
    await brain.forget("alice", team[TEAM[0]])
    assert await wrong() == 0
    await brain.restore("bob", kept[1].memory_id)
    assert await wrong() == 0
