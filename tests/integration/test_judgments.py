"""Memory integrity: distinct facts stay current, every automatic judgment is recorded and can be
undone exactly (and the undoing undone), pinned memories never fade or leave (issue 17)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cabrain.errors import AccessDenied, ConflictError, NotFound
from cabrain.sleep.cycle import run_cycle
from cabrain.types import Decision, MemoryInput, MemoryType, Network, RecallQuery, Visibility

# The four examples, and more of the same kinds: the second is about another subject.
DISTINCT = [
    ("Server alpha has 16 GB of RAM.", "Server beta has 32 GB of RAM."),
    ("Invoice 1001 from Acme totals 250 USD.", "Invoice 1002 from Acme totals 900 USD."),
    ("The staging cluster runs 3 nodes.", "The production cluster runs 12 nodes."),
    ("Ahmed's phone extension is 214.", "Mona's phone extension is 377."),
    ("The staging database listens on port 5433.", "The production database listens on port 5432."),
    ("الخادم ألفا لديه ١٦ جيجابايت من الذاكرة.", "الخادم بيتا لديه ٣٢ جيجابايت من الذاكرة."),
    ("راتب خالد الشهري ١٢٠٠٠ ريال.", "راتب فاطمة الشهري ١٤٥٠٠ ريال."),
]
STATE = "SELECT id, content, valid_at, invalid_at, superseded_by, metadata, importance, access_count, pinned FROM memories WHERE id = $1"


async def _state(dsn: str, memory_id) -> dict:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(STATE, memory_id)
        links = await conn.fetch(
            "SELECT memory_id, source_id, relation FROM memory_sources "
            "WHERE memory_id = $1 OR source_id = $1 ORDER BY 1, 2",
            memory_id,
        )
        entities = await conn.fetch("SELECT entity_id FROM memory_entities WHERE memory_id = $1 ORDER BY 1", memory_id)
    finally:
        await conn.close()
    return {
        **dict(row),
        "metadata": json.loads(row["metadata"]),
        "links": [tuple(r) for r in links],
        "entities": [r["entity_id"] for r in entities],
    }


def _facts(texts: list[str], namespace: str = "proj", start: datetime | None = None) -> list[MemoryInput]:
    start = start or datetime.now(UTC) - timedelta(days=3)
    return [
        MemoryInput(
            t,
            namespace,
            visibility=Visibility.TEAM,
            network=Network.FACT,
            memory_type=MemoryType.SEMANTIC,
            valid_at=start + timedelta(hours=i),
        )
        for i, t in enumerate(texts)
    ]


async def test_distinct_facts_stay_current_on_write_and_through_a_full_sleep_cycle(brain, db_dsn, settings_for):
    for old, new in DISTINCT:
        [first] = await brain.retain(
            "alice", MemoryInput(old, "proj", visibility=Visibility.TEAM, network=Network.FACT)
        )
        [second] = await brain.retain(
            "alice", MemoryInput(new, "proj", visibility=Visibility.TEAM, network=Network.FACT)
        )
        assert (first.decision, second.decision) == (Decision.ADD, Decision.ADD), (new, second.reason)
        assert second.superseded == ()
    # a real revision still supersedes, on write
    [rate] = await brain.retain(
        "alice",
        MemoryInput(
            "The public API rate limit is 100 requests per minute.",
            "proj",
            visibility=Visibility.TEAM,
            network=Network.FACT,
        ),
    )
    [raised] = await brain.retain(
        "alice",
        MemoryInput(
            "The public API rate limit is now 250 requests per minute.",
            "proj",
            visibility=Visibility.TEAM,
            network=Network.FACT,
        ),
    )
    assert (raised.decision, raised.superseded) == (Decision.UPDATE, (rate.memory_id,))
    report = await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["proj"], use_ray=False)
    assert report.status == "done", report.tasks
    current = {m.content for m in await brain.list_memories("alice", "proj")}
    for old, new in DISTINCT:
        assert {old, new} <= current, (old, new)
    hits = await brain.recall("alice", RecallQuery("Which port does the production database listen on?", "proj", k=3))
    assert hits.hits[0].memory.content == "The production database listens on port 5432."


async def test_a_write_revision_is_reverted_exactly_and_the_revert_reverted(brain, db_dsn):
    [old] = await brain.retain(
        "alice", MemoryInput("The weekly sync is on Monday mornings.", "proj", visibility=Visibility.TEAM)
    )
    before = await _state(db_dsn, old.memory_id)
    [new] = await brain.retain(
        "alice", MemoryInput("The weekly sync moved to Tuesday mornings.", "proj", visibility=Visibility.TEAM)
    )
    assert (new.decision, new.superseded) == (Decision.UPDATE, (old.memory_id,))
    superseded = await _state(db_dsn, old.memory_id)
    [judgment] = await brain.judgments("alice", old.memory_id)
    assert (judgment["kind"], judgment["origin"], judgment["agent"]) == ("supersede", "write", "alice")
    assert judgment["inputs"]["text"] == "The weekly sync moved to Tuesday mornings."
    assert judgment["inputs"]["similarity"] > 0.8 and judgment["reason"] == new.reason
    assert superseded["metadata"]["judgment"] == judgment["id"]

    undo = await brain.revert("alice", memory_id=old.memory_id, reason="the sync did not move")
    assert (undo["kind"], undo["reverts"]) == ("revert", judgment["id"])
    assert await _state(db_dsn, old.memory_id) == before  # exactly as it was: id, content, validity, metadata, links
    assert (await _state(db_dsn, new.memory_id))["invalid_at"] is None  # both current now
    with pytest.raises(ConflictError, match="already reverted"):
        await brain.revert("alice", judgment_id=judgment["id"])

    again = await brain.revert("alice", judgment_id=undo["id"])  # the revert, reverted
    assert again["reverts"] == undo["id"]
    assert await _state(db_dsn, old.memory_id) == superseded
    kinds = [j["kind"] for j in await brain.judgments("alice", old.memory_id)]
    assert kinds == ["revert", "revert", "supersede"]


async def test_a_retraction_and_a_correction_are_revertible(brain, db_dsn):
    [offsite] = await brain.retain("alice", MemoryInput("The team offsite is on March 14.", "proj"))
    before = await _state(db_dsn, offsite.memory_id)
    [gone] = await brain.retain("alice", MemoryInput("The team offsite on March 14 has been cancelled.", "proj"))
    assert (gone.decision, gone.superseded) == (Decision.INVALIDATE, (offsite.memory_id,))
    [judgment] = await brain.judgments("alice", offsite.memory_id)
    assert (judgment["kind"], judgment["origin"]) == ("invalidate", "write")
    await brain.revert("alice", judgment_id=judgment["id"])
    assert await _state(db_dsn, offsite.memory_id) == before

    fixed = await brain.reconsolidate("alice", offsite.memory_id, "The team offsite is on March 21.", reason="typo")
    [correction, *_] = await brain.judgments("alice", offsite.memory_id)
    assert (correction["origin"], correction["inputs"]["new_memory_id"]) == ("correction", str(fixed.memory_id))
    await brain.revert("alice", memory_id=offsite.memory_id)
    assert await _state(db_dsn, offsite.memory_id) == before


async def test_sleep_merges_and_supersessions_are_revertible(brain, db_dsn, settings_for):
    texts = [
        "Deploys to staging go through the deploy.yml workflow.",
        "Deploys to staging go through the deploy.yml workflow!",
        "The public API rate limit is 100 requests per minute.",
        "The public API rate limit is 250 requests per minute now.",
    ]
    stored = [r for item in _facts(texts) for r in await brain.retain("alice", item, decide=False)]  # one by one:
    keeper, duplicate, old_rate, new_rate = (r.memory_id for r in stored)  # the earliest stored survives a merge
    keeper_before, duplicate_before = await _state(db_dsn, keeper), await _state(db_dsn, duplicate)
    rate_before = await _state(db_dsn, old_rate)
    report = await run_cycle(
        settings_for(db_dsn), db_dsn, namespaces=["proj"], steps=["dedup", "reconsolidate"], use_ray=False
    )
    assert report.status == "done", report.tasks
    merged, superseded = await _state(db_dsn, duplicate), await _state(db_dsn, old_rate)
    assert merged["superseded_by"] == keeper and superseded["superseded_by"] == new_rate
    assert (keeper, duplicate, "merged") in (await _state(db_dsn, keeper))["links"]

    [merge] = await brain.judgments("alice", duplicate)
    assert (merge["kind"], merge["origin"], merge["run_id"]) == ("merge", "dedup", str(report.run_id))
    assert set(merge["memory_ids"]) == {str(keeper), str(duplicate)}
    await brain.revert("alice", judgment_id=merge["id"])
    assert await _state(db_dsn, duplicate) == duplicate_before
    assert await _state(db_dsn, keeper) == keeper_before  # its absorbed use and the merge link undone too

    [contradiction] = await brain.judgments("alice", old_rate)
    assert (contradiction["kind"], contradiction["origin"]) == ("supersede", "reconsolidate")
    undo = await brain.revert("alice", memory_id=old_rate)
    assert await _state(db_dsn, old_rate) == rate_before
    await brain.revert("alice", judgment_id=undo["id"])
    assert await _state(db_dsn, old_rate) == superseded


async def test_only_writers_of_the_namespace_may_revert_and_others_learn_nothing(brain, db_dsn):
    [old] = await brain.retain(
        "alice", MemoryInput("The roadmap review is on Monday.", "proj", visibility=Visibility.TEAM)
    )
    await brain.retain(
        "alice", MemoryInput("The roadmap review moved to Wednesday.", "proj", visibility=Visibility.TEAM)
    )
    with pytest.raises(NotFound):  # carol has no access at all: the memory does not exist for her
        await brain.revert("carol", memory_id=old.memory_id)
    with pytest.raises(NotFound):
        await brain.judgments("carol", old.memory_id)
    await brain.share("alice", "proj", "bob")  # read only
    assert len(await brain.judgments("bob", old.memory_id)) == 1  # a reader sees why
    with pytest.raises(AccessDenied):  # but may not undo it
        await brain.revert("bob", memory_id=old.memory_id)
    [private] = await brain.retain("alice", MemoryInput("My desk is on floor 3.", "proj"))
    await brain.retain("alice", MemoryInput("My desk moved to floor 5.", "proj"))
    with pytest.raises(NotFound):  # alice's private memory: not even its judgment is visible to bob
        await brain.judgments("bob", private.memory_id)


async def test_pinned_memories_neither_fade_below_their_floor_nor_leave_the_hot_tier(brain, db_dsn, settings_for):
    [pinned] = await brain.retain(
        "alice",
        MemoryInput(
            "Never deploy on Fridays.", "proj", important=True, valid_at=datetime.now(UTC) - timedelta(days=400)
        ),
    )
    [plain] = await brain.retain(
        "alice",
        MemoryInput("The coffee machine on floor 2 is slow.", "proj", valid_at=datetime.now(UTC) - timedelta(days=400)),
    )
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '400 days', importance = 0.9")
    finally:
        await conn.close()
    settings = settings_for(db_dsn, sleep_demote_after_days=30)
    for _ in range(3):  # any number of cycles
        report = await run_cycle(settings, db_dsn, namespaces=["proj"], use_ray=False)
        assert report.status == "done", report.tasks
    kept = await brain.get("alice", pinned.memory_id)
    assert kept.memory.tier == "hot" and kept.memory.invalid_at is None
    assert kept.memory.importance >= settings.sleep_decay_pinned_floor - 1e-6
    assert (await brain.get("alice", plain.memory_id)).memory.tier == "cold"  # the unpinned one was archived


async def test_the_new_version_leads_to_the_judgment_too(brain, db_dsn):
    [old] = await brain.retain("alice", MemoryInput("The on-call phone is 555-0100.", "proj"))
    [new] = await brain.retain("alice", MemoryInput("The on-call phone is now 555-0199.", "proj"))
    assert new.superseded == (old.memory_id,)
    [judgment] = await brain.judgments("alice", new.memory_id)  # "what did this write replace?"
    assert judgment["inputs"]["new_memory_id"] == str(new.memory_id)
    await brain.revert("alice", memory_id=new.memory_id)  # undo what that write decided
    assert (await brain.get("alice", old.memory_id)).memory.invalid_at is None
    assert (await brain.get("alice", new.memory_id)).memory.invalid_at is None


async def test_a_forgotten_memory_is_not_brought_back_by_a_revert(brain):
    [old] = await brain.retain("alice", MemoryInput("The printer on floor 2 is named Atlas.", "proj"))
    await brain.retain("alice", MemoryInput("The printer on floor 2 is now named Orion.", "proj"))
    await brain.forget("alice", old.memory_id, reason="we have no printers any more")
    [forget, supersede] = await brain.judgments("alice", old.memory_id)
    assert (forget["kind"], supersede["kind"]) == ("forget", "supersede")
    with pytest.raises(ConflictError, match="forgotten since"):  # the forget is undone first (issue 36)
        await brain.revert("alice", judgment_id=supersede["id"])
    assert (await brain.get("alice", old.memory_id)).memory.invalid_at is not None


async def test_the_new_calls_answer_bad_input_clearly_and_change_nothing(brain):
    from cabrain.errors import InputError

    [memory] = await brain.retain("alice", MemoryInput("The build cache lives on node cache-3.", "proj"))
    with pytest.raises(InputError, match="not both"):
        await brain.revert("alice")
    with pytest.raises(InputError, match="not both"):
        await brain.revert("alice", memory_id=memory.memory_id, judgment_id=memory.memory_id)
    with pytest.raises(InputError, match="is not a judgment id"):
        await brain.revert("alice", judgment_id="nope")
    with pytest.raises(NotFound, match="no judgment to revert"):
        await brain.revert("alice", memory_id=memory.memory_id)
    with pytest.raises(InputError, match="limit must be between"):
        await brain.judgments("alice", memory.memory_id, limit=0)
    with pytest.raises(InputError, match="is not archived"):
        await brain.unarchive("alice", memory.memory_id)
    with pytest.raises(NotFound):
        await brain.unarchive("carol", memory.memory_id)
    with pytest.raises(InputError, match="give it"):
        await brain.list_memories("alice", "proj", include_archived=True)
    with pytest.raises(InputError, match="at most 1000"):
        await brain.touch("alice", [memory.memory_id] * 1001)
    assert await brain.touch("carol", [memory.memory_id]) == 0  # not hers to read: not counted
    assert await brain.touch("alice", [memory.memory_id]) == 1
    still = (await brain.get("alice", memory.memory_id)).memory
    assert still.invalid_at is None and still.tier == "hot"
