"""Roles, held actions, usage and caps (issue 22), on a real Brain and PostgreSQL: what a role may
do is the server's decision on every call; what it holds waits for a person; every operation and
model call is counted per agent, namespace and day; a cap answers 429."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cabrain.clock import utc_today
from cabrain.errors import AccessDenied, ConfirmationRequired, ConflictError, PolicyDenied, QuotaExceeded
from cabrain.types import MemoryInput, RecallQuery, Visibility


@pytest.fixture
async def live(brain):
    """alice's namespace 'proj' with a team memory; 'scout' is a live agent that may read it."""
    await brain.create_agent("scout")
    await brain.set_role("scout", "live")
    await brain.share("alice", "proj", "scout", can_read=True, can_write=True)
    with pytest.raises(ConfirmationRequired) as held:  # accepting a grant is held for a person, too
        await brain.accept_grant("scout", "proj")
    accepted = await brain.decide_action("alice", held.value.fix.params["action"], approve=True)
    assert accepted["status"] == "done", accepted["error"]
    [stored] = await brain.retain(
        "alice",
        MemoryInput("The feed page renders right-to-left for Arabic users.", "proj", visibility=Visibility.TEAM),
    )
    return brain, stored.memory_id


async def test_a_live_agent_recalls_and_nothing_else_and_the_refusal_names_the_policy(live):
    brain, memory_id = live
    answer = await brain.recall("scout", RecallQuery("feed page layout", "proj"))
    assert [h.memory.id for h in answer.hits] == [memory_id]
    assert (await brain.get("scout", memory_id)).memory.id == memory_id
    with pytest.raises(PolicyDenied, match="policy 'role live: retain' refuses") as refused:
        await brain.retain("scout", MemoryInput("planted text", "proj", visibility=Visibility.TEAM))
    assert refused.value.status == 403 and refused.value.policy == "role live: retain"
    with pytest.raises(PolicyDenied, match="role live: namespace"):
        await brain.create_namespace("scout", "scout-own")


async def test_a_forget_is_held_until_a_person_approves_it_and_then_runs_as_the_agent(live):
    brain, memory_id = live
    with pytest.raises(ConfirmationRequired, match="holds this forget") as held:
        await brain.forget("scout", memory_id, reason="stale")
    action_id = held.value.fix.params["action"]
    assert (await brain.get("alice", memory_id)).memory.invalid_at is None  # nothing happened yet
    [pending] = await brain.pending_actions("alice")
    assert (str(pending["id"]), pending["op"], pending["namespace"]) == (action_id, "forget", "proj")

    with pytest.raises(PolicyDenied, match="role live: decide"):  # a live agent decides nothing
        await brain.decide_action("scout", action_id, approve=True)
    with pytest.raises(AccessDenied, match="may not decide"):
        await brain.decide_action("bob", action_id, approve=True)  # not the namespace's owner, not an admin
    done = await brain.decide_action("alice", action_id, approve=True)
    assert (done["status"], done["decided_by"], done["error"]) == ("done", "alice", None)
    forgotten = await brain.get("alice", memory_id)
    assert forgotten.memory.invalid_at is not None
    with pytest.raises(ConflictError):
        await brain.decide_action("alice", action_id, approve=True)  # once
    # the approval let that one call through, not the agent's next
    [again] = await brain.retain(
        "alice", MemoryInput("The feed page has an RTL toggle.", "proj", visibility=Visibility.TEAM)
    )
    with pytest.raises(ConfirmationRequired):
        await brain.forget("scout", again.memory_id)


async def test_a_denied_action_never_runs_and_a_reader_may_not_share(live):
    brain, _memory_id = live
    with pytest.raises(ConfirmationRequired) as held:
        await brain.share("scout", "proj", "carol")
    denied = await brain.decide_action("root", held.value.fix.params["action"], approve=False)
    assert denied["status"] == "denied"
    assert [g for g in await brain.grants("alice", "proj") if g["agent_id"] == "carol"] == []
    await brain.set_role("carol", "reader")
    with pytest.raises(PolicyDenied, match="role reader: share"):
        await brain.share("carol", "proj", "bob")
    await brain.set_role("carol", "member")
    assert await brain.namespaces("carol") == []


async def test_usage_is_counted_per_agent_namespace_and_kind_and_a_cap_answers_429(live):
    brain, _ = live
    for _ in range(3):
        await brain.recall("scout", RecallQuery("feed page", "proj"))
    today = utc_today(brain.engine.clock)
    rows = (await brain.usage("scout", since=today, until=today))["rows"]
    counted = {(r["namespace"], r["op"]): (r["calls"], r["units"]) for r in rows}
    assert counted[("proj", "recall")] == (3, 0)
    assert counted[("proj", "embed")][0] >= 1  # the query embedding, metered to scout (cache hits aside)
    assert {r["agent_id"] for r in rows} == {"scout"}
    with pytest.raises(AccessDenied, match="its own usage"):
        await brain.usage("scout", since=today, until=today, agent_id="alice")
    everyone = (await brain.usage("root", since=today - timedelta(days=1), until=today))["rows"]
    assert {"alice", "scout"} <= {r["agent_id"] for r in everyone}

    await brain.set_cap("root", "scout", "recall", 4)
    await brain.recall("scout", RecallQuery("feed page", "proj"))  # the 4th
    with pytest.raises(QuotaExceeded, match="reached its cap of 4 recall calls per day") as capped:
        await brain.recall("scout", RecallQuery("feed page", "proj"))
    assert capped.value.status == 429
    await brain.set_cap("root", "scout", "recall", None)
    await brain.recall("scout", RecallQuery("feed page", "proj"))
    with pytest.raises(Exception, match="unknown kind"):
        await brain.set_cap("root", "scout", "teleport", 1)


async def test_a_held_call_is_stored_redacted(live, db_dsn):
    import asyncpg

    brain, memory_id = live
    with pytest.raises(ConfirmationRequired):
        await brain.reconsolidate("scout", memory_id, "The feed page key is AKIAIOSFODNN7EXAMPLE now.")
    conn = await asyncpg.connect(db_dsn)
    try:
        stored = await conn.fetchval("SELECT args::text FROM pending_actions WHERE op = 'correct'")
    finally:
        await conn.close()
    assert "AKIAIOSFODNN7EXAMPLE" not in stored and "[REDACTED]" in stored
