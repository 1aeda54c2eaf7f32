"""A person's corrections (issue 36): correct a memory as a new version, forget as a revertible
judgment, restore a forgotten memory (also one forgotten before forgets were judgments, and one in the
cold tier), and the audit of a namespace's judgments with bulk revert - never showing another agent's
private memory."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cabrain.errors import AccessDenied, ConflictError, InputError, NotFound
from cabrain.sleep.cycle import run_cycle
from cabrain.types import ArchiveQuery, Decision, MemoryInput, RecallMode, RecallQuery, Visibility


def _team(text: str) -> MemoryInput:
    return MemoryInput(text, "proj", visibility=Visibility.TEAM)


async def _recalled(brain, agent: str, query: str) -> set:
    result = await brain.recall(agent, RecallQuery(query, "proj", k=10))
    return {h.memory.id for h in result.hits}


async def _writer(brain, agent: str = "bob") -> None:
    await brain.share("alice", "proj", agent, can_write=True)
    await brain.accept_grant(agent, "proj")


async def test_a_correction_is_a_new_version_and_its_revert_brings_the_old_one_back(brain):
    [old] = await brain.retain("alice", _team("The staging database listens on port 5433."))
    result = await brain.correct("alice", old.memory_id, "The staging database listens on port 6543.", reason="typo")
    assert result.decision is Decision.UPDATE and result.superseded == (old.memory_id,)
    new = (await brain.get("alice", result.memory_id)).memory
    before = (await brain.get("alice", old.memory_id)).memory
    assert new.content == "The staging database listens on port 6543." and new.invalid_at is None
    assert new.visibility is Visibility.TEAM and new.namespace == "proj"
    assert before.invalid_at is not None and before.superseded_by == new.id
    assert await _recalled(brain, "alice", "staging database port") >= {new.id}
    assert old.memory_id not in await _recalled(brain, "alice", "staging database port")

    [judgment] = [j for j in await brain.judgments("alice", old.memory_id) if j["kind"] == "correction"]
    assert (judgment["origin"], judgment["decided_by"], judgment["agent"]) == ("person", "person", "alice")
    assert judgment["reason"] == "typo"  # the person's own words

    undo = await brain.revert("alice", judgment_id=judgment["id"], reason="the old port was right")
    assert undo["kind"] == "revert" and undo["decided_by"] == "person"
    assert (await brain.get("alice", old.memory_id)).memory.invalid_at is None
    assert (await brain.get("alice", new.id)).memory.invalid_at is not None  # out of recall
    hits = await _recalled(brain, "alice", "staging database port")
    assert old.memory_id in hits and new.id not in hits
    # and the revert of the revert applies the correction again
    await brain.revert("alice", judgment_id=undo["id"])
    assert (await brain.get("alice", new.id)).memory.invalid_at is None
    assert (await brain.get("alice", old.memory_id)).memory.superseded_by == new.id


async def test_only_writers_correct_and_restore_and_nobody_reaches_what_they_may_not_read(brain):
    [mine] = await brain.retain("alice", MemoryInput("Alice's private note: the vault code is 1234.", "proj"))
    [team] = await brain.retain("alice", _team("The release train leaves on Thursdays."))
    await brain.share("alice", "proj", "bob")  # read only
    with pytest.raises(AccessDenied):
        await brain.correct("bob", team.memory_id, "The release train leaves on Fridays.")
    with pytest.raises(NotFound):
        await brain.correct("bob", mine.memory_id, "changed")  # private to alice: not even there for bob
    with pytest.raises(NotFound):
        await brain.correct("carol", team.memory_id, "changed")
    await brain.forget("alice", team.memory_id)
    with pytest.raises(AccessDenied):
        await brain.restore("bob", team.memory_id)
    with pytest.raises(NotFound):
        await brain.restore("carol", team.memory_id)
    assert (await brain.get("alice", team.memory_id)).memory.invalid_at is not None


async def test_a_forget_is_a_judgment_and_restore_or_revert_brings_the_memory_back(brain, db_dsn):
    [memory] = await brain.retain("alice", _team("The VPN gateway is vpn-2.example.org."))
    await brain.forget("alice", memory.memory_id, reason="wrong gateway")
    assert memory.memory_id not in await _recalled(brain, "alice", "VPN gateway")
    [forget] = await brain.judgments("alice", memory.memory_id)
    assert (forget["kind"], forget["decided_by"], forget["reason"]) == ("forget", "person", "wrong gateway")
    await brain.forget("alice", memory.memory_id)  # again: nothing more to record
    assert len(await brain.judgments("alice", memory.memory_id)) == 1

    undo = await brain.revert("alice", memory_id=memory.memory_id)  # `cabrain revert` of a forget works
    assert undo["reverts"] == forget["id"]
    assert (await brain.get("alice", memory.memory_id)).memory.invalid_at is None
    assert memory.memory_id in await _recalled(brain, "alice", "VPN gateway")
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await conn.fetchval("SELECT forgotten_at FROM memory_ids WHERE id = $1", memory.memory_id) is None
    finally:
        await conn.close()

    await brain.revert("alice", judgment_id=undo["id"])  # forgotten again
    assert memory.memory_id not in await _recalled(brain, "alice", "VPN gateway")
    restored = await brain.restore("alice", memory.memory_id, reason="it was right after all")
    assert restored["kind"] == "revert" and restored["reason"] == "it was right after all"
    assert memory.memory_id in await _recalled(brain, "alice", "VPN gateway")
    with pytest.raises(InputError, match="not forgotten"):
        await brain.restore("alice", memory.memory_id)


async def test_a_memory_forgotten_before_forgets_were_judgments_is_restored_directly(brain, db_dsn):
    [memory] = await brain.retain("alice", _team("The office wifi is called Falcon."))
    conn = await asyncpg.connect(db_dsn)
    try:  # a forget as it was recorded before: the memory invalid, its identity forgotten, no judgment
        await conn.execute(
            'UPDATE memories SET invalid_at = now(), metadata = metadata || \'{"forgotten_by": "alice"}\' '
            "WHERE id = $1",
            memory.memory_id,
        )
        await conn.execute(
            "UPDATE memory_ids SET forgotten_at = now(), forgotten_by = 'alice' WHERE id = $1", memory.memory_id
        )
    finally:
        await conn.close()
    assert await brain.judgments("alice", memory.memory_id) == []
    done = await brain.restore("alice", memory.memory_id)
    assert (done["kind"], done["decided_by"], done["agent"]) == ("restore", "person", "alice")
    assert (await brain.get("alice", memory.memory_id)).memory.invalid_at is None
    assert memory.memory_id in await _recalled(brain, "alice", "office wifi")
    await brain.revert("alice", judgment_id=done["id"])  # the restore is revertible: forgotten again
    got = await brain.get("alice", memory.memory_id)
    assert got.memory.invalid_at is not None
    assert memory.memory_id not in await _recalled(brain, "alice", "office wifi")


async def test_a_restore_keeps_a_superseded_memory_superseded(brain):
    [old] = await brain.retain("alice", _team("The printer on floor 2 is named Atlas."))
    [new] = await brain.retain("alice", _team("The printer on floor 2 is now named Orion."))
    assert new.superseded == (old.memory_id,)
    await brain.forget("alice", old.memory_id)
    await brain.restore("alice", old.memory_id)
    back = (await brain.get("alice", old.memory_id)).memory
    assert back.invalid_at is not None and back.superseded_by == new.memory_id  # forgotten no more, still old


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bad=st.one_of(
        st.text(min_size=0, max_size=20).map(lambda t: t + "\x00"),
        st.text(max_size=10).map(lambda t: t + "\ud800"),
        st.just(""),
        st.just("   "),
        st.integers(min_value=1, max_value=5).map(lambda n: "x" * (40_000 * n)),
    )
)
async def test_a_bad_correction_is_refused_clearly_and_writes_nothing(brain, bad):
    [memory] = await brain.retain("alice", _team("The build cache lives on node cache-3."))
    with pytest.raises(InputError):
        await brain.correct("alice", memory.memory_id, bad)
    assert (await brain.get("alice", memory.memory_id)).memory.invalid_at is None
    assert await brain.judgments("alice", memory.memory_id) == []
    with pytest.raises(InputError, match="as it is"):
        await brain.correct("alice", memory.memory_id, "The build cache lives on node cache-3.")
    with pytest.raises(InputError, match="reason"):
        await brain.correct("alice", memory.memory_id, "The build cache lives on node cache-4.", reason="a\x00b")


async def test_the_audit_lists_judgments_with_both_texts_filters_and_pages(brain):
    await _writer(brain)
    [a] = await brain.retain("alice", _team("The on-call phone is 555-0100."))
    [b] = await brain.retain("alice", _team("The on-call phone is now 555-0199."))  # a write's supersede
    assert b.superseded == (a.memory_id,)
    [c] = await brain.retain("alice", _team("Lunch is served at noon in the cafeteria."))
    corrected = await brain.correct("bob", c.memory_id, "Lunch is served at 12:30 in the cafeteria.", reason="moved")
    [d] = await brain.retain("alice", _team("The old wiki lives at wiki.example.org."))
    await brain.forget("alice", d.memory_id, reason="retired")

    page = await brain.audit("alice", "proj")
    kinds = [j["kind"] for j in page["judgments"]]
    assert kinds == ["forget", "correction", "supersede"]  # newest first
    forget, correction, supersede = page["judgments"]
    assert forget["before"] == [{"memory_id": str(d.memory_id), "content": "The old wiki lives at wiki.example.org."}]
    assert forget["after"] == [] and forget["reason"] == "retired"
    assert [s["content"] for s in correction["before"]] == ["Lunch is served at noon in the cafeteria."]
    assert correction["after"] == [
        {"memory_id": str(corrected.memory_id), "content": "Lunch is served at 12:30 in the cafeteria."}
    ]
    assert (correction["agent"], correction["decided_by"]) == ("bob", "person")
    assert (supersede["decided_by"], [s["content"] for s in supersede["after"]]) == (
        "write",
        ["The on-call phone is now 555-0199."],
    )
    counts = {(c["decided_by"], c["kind"]): c["count"] for c in page["counts"]}
    assert counts == {("person", "forget"): 1, ("person", "correction"): 1, ("write", "supersede"): 1}

    assert [j["kind"] for j in (await brain.audit("alice", "proj", origin="write"))["judgments"]] == ["supersede"]
    assert [j["kind"] for j in (await brain.audit("alice", "proj", kind="forget"))["judgments"]] == ["forget"]
    later = await brain.audit("alice", "proj", since=datetime.fromisoformat(correction["created_at"]))
    assert {j["kind"] for j in later["judgments"]} == {"forget", "correction"}
    assert (await brain.audit("alice", "proj", until=datetime.fromisoformat(supersede["created_at"])))[
        "judgments"
    ] == []

    first = await brain.audit("alice", "proj", limit=2)
    assert [j["id"] for j in first["judgments"]] == [forget["id"], correction["id"]]
    second = await brain.audit("alice", "proj", limit=2, cursor=first["next_cursor"])
    assert [j["id"] for j in second["judgments"]] == [supersede["id"]] and second["next_cursor"] is None


async def test_the_audit_never_shows_another_agents_private_memory(brain):
    await _writer(brain)
    [private] = await brain.retain("alice", MemoryInput("Alice's salary is 9000.", "proj"))  # private
    await brain.correct("alice", private.memory_id, "Alice's salary is 9500.")
    [team] = await brain.retain("alice", _team("The standup is at 9:15."))
    await brain.forget("alice", team.memory_id)
    mine = await brain.audit("alice", "proj")
    assert {j["kind"] for j in mine["judgments"]} == {"correction", "forget"}
    theirs = await brain.audit("bob", "proj")
    assert [j["kind"] for j in theirs["judgments"]] == ["forget"]
    assert "salary" not in json.dumps(theirs) and str(private.memory_id) not in json.dumps(theirs)
    assert {(c["kind"], c["count"]) for c in theirs["counts"]} == {("forget", 1)}
    with pytest.raises(NotFound):
        await brain.audit("carol", "proj")  # not hers to read at all


async def test_the_audit_refuses_bad_filters(brain):
    for kwargs, words in (
        ({"kind": "nonsense"}, "kind must be one of"),
        ({"origin": "robot"}, "origin must be one of"),
        ({"limit": 0}, "limit must be between"),
        ({"cursor": "%%%"}, "cursor"),
        ({"cursor": "bm9wZQ"}, "cursor"),
    ):
        with pytest.raises(InputError, match=words):
            await brain.audit("alice", "proj", **kwargs)
    moment = datetime.now(UTC)
    with pytest.raises(InputError, match="before its end"):
        await brain.audit("alice", "proj", since=moment, until=moment)


async def test_bulk_revert_reverts_each_and_reports_failures_per_id(brain):
    [a] = await brain.retain("alice", _team("The deploy window is Tuesday."))
    [b] = await brain.retain("alice", _team("The coffee machine is on floor 3."))
    await brain.forget("alice", a.memory_id)
    await brain.forget("alice", b.memory_id)
    page = await brain.audit("alice", "proj", kind="forget")
    ids = [j["id"] for j in page["judgments"]]
    results = await brain.revert_judgments("alice", [*ids, ids[0], "00000000-0000-0000-0000-000000000001"])
    by_id = {r["id"]: r for r in results}
    assert all(by_id[i]["ok"] for i in ids)
    missing = by_id["00000000-0000-0000-0000-000000000001"]
    assert (missing["ok"], missing["status"]) == (False, 404)
    assert (await brain.get("alice", a.memory_id)).memory.invalid_at is None
    assert (await brain.get("alice", b.memory_id)).memory.invalid_at is None
    again = await brain.revert_judgments("alice", ids)  # reverted already: each says so, nothing raised
    assert all(not r["ok"] and r["status"] == 409 for r in again)
    with pytest.raises(InputError, match="at most 100"):
        await brain.revert_judgments("alice", ids * 51)
    with pytest.raises(InputError):
        await brain.revert_judgments("alice", [])


async def test_a_cold_forget_is_undone_on_its_identity(brain, db_dsn):
    """A memory sleep moved to the cold tier is forgotten on its identity (the cold copy stays as it
    was archived); restoring it undoes that forget, so archive recall finds it again."""
    when = datetime.now(UTC) - timedelta(days=90)
    item = MemoryInput("The 2019 offsite was in Porto.", "proj", visibility=Visibility.TEAM, valid_at=when)
    [memory] = await brain.retain("alice", [item], decide=False)
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '90 days'")
    finally:
        await conn.close()
    demoting = brain.settings.model_copy(update={"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0})
    report = await run_cycle(demoting, db_dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 1

    async def archived() -> set:
        found = await brain.recall_archive("alice", ArchiveQuery("offsite Porto", "proj", k=5, mode=RecallMode.BM25))
        return {h.memory.id for h in found.hits}

    assert memory.memory_id in await archived()
    await brain.forget("alice", memory.memory_id, reason="old news")
    assert memory.memory_id not in await archived()
    [forget] = (await brain.audit("alice", "proj", kind="forget"))["judgments"]
    assert forget["inputs"]["tier"] == "cold" and forget["changes"] == []
    assert forget["before"] == [{"memory_id": str(memory.memory_id), "content": None}]  # archived: no hot text
    await brain.restore("alice", memory.memory_id)
    assert memory.memory_id in await archived()
    with pytest.raises(ConflictError):
        await brain.revert("alice", judgment_id=forget["id"])  # reverted by the restore already


async def test_a_judgment_written_without_its_decider_is_given_one(brain, db_dsn):
    """An export made before judgments said who decided them imports with it derived (schema 0021)."""
    [memory] = await brain.retain("alice", _team("The release notes live in the wiki."))
    conn = await asyncpg.connect(db_dsn)
    try:
        rows = []
        for origin, run, reason in (
            ("write", None, "a revision"),
            ("dedup", None, "a duplicate"),
            ("decay", "00000000-0000-0000-0000-000000000009", "decayed"),
            (
                "correction",
                None,
                "corrected by the caller: a newer version of the record in the re-imported mem0 source",
            ),
            ("correction", None, "corrected by the caller: typo"),
        ):
            rows.append(
                await conn.fetchval(
                    "INSERT INTO judgments (id, namespace, kind, origin, run_id, reason, changes, memory_ids) "
                    "VALUES (gen_random_uuid(), 'proj', 'supersede', $1, $2::uuid, $3, '[]', ARRAY[$4::uuid]) "
                    "RETURNING decided_by",
                    origin,
                    run,
                    reason,
                    memory.memory_id,
                )
            )
    finally:
        await conn.close()
    assert rows == ["write", "sleep", "sleep", "import", "person"]


async def test_every_reason_a_person_gives_is_stored_with_its_secrets_redacted(brain, db_dsn):
    """A reason is free text a person types: a key pasted into it is redacted before it is stored,
    in the judgment and in the memory's metadata alike (correct, forget, restore, revert, bulk
    revert, an entity's rename and merge)."""
    secret = "AKIAIOSFODNN7EXAMPLE"
    said = f"the old key {secret} leaked"
    [old] = await brain.retain("alice", _team("The nightly export job runs at 02:00 on Lisbon's replica."))
    fixed = await brain.correct("alice", old.memory_id, "The nightly export job runs at 03:00.", reason=said)
    await brain.forget("alice", fixed.memory_id, reason=said)
    await brain.restore("alice", fixed.memory_id, reason=said)
    [judgment] = [j for j in await brain.judgments("alice", old.memory_id) if j["kind"] == "correction"]
    undo = await brain.revert("alice", judgment_id=judgment["id"], reason=said)
    await brain.revert_judgments("alice", [undo["id"]], reason=said)
    await brain.retain("alice", _team("Lisbon and Porto share the export replica."))
    await brain.rename_entity("alice", "proj", "Porto", "Oporto", reason=said)
    await brain.merge_entity("alice", "proj", "Oporto", "Lisbon", reason=said)
    conn = await asyncpg.connect(db_dsn)
    try:
        stored = [
            *(r["reason"] for r in await conn.fetch("SELECT reason FROM judgments")),
            *(r["metadata"] for r in await conn.fetch("SELECT metadata::text AS metadata FROM memories")),
            *(r["metadata"] for r in await conn.fetch("SELECT metadata::text AS metadata FROM entities")),
            *(r["forget_reason"] for r in await conn.fetch("SELECT forget_reason FROM memory_ids")),
        ]
    finally:
        await conn.close()
    assert sum("leaked" in (text or "") for text in stored) >= 5  # the reasons are there...
    assert not any(secret in (text or "") for text in stored)  # ...without the key
