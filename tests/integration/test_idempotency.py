"""Idempotent retains: a retry after the connection dropped right after the commit writes nothing
twice. The drop is real: the failpoint ``retain.after_commit`` makes PostgreSQL end the session
(``pg_terminate_backend``) once the write transaction has committed, and the caller retries as the
service does (:func:`cabrain.store.reconnect.retrying`)."""

from __future__ import annotations

import pytest

from cabrain.errors import ConflictError, InputError
from cabrain.store import reconnect, requests
from cabrain.types import Decision, MemoryInput

TEXT = "The payroll export now runs on the 25th of each month at 06:00."


def mem(content: str, namespace: str = "proj") -> MemoryInput:
    return MemoryInput(content=content, namespace=namespace, source_kind="manual")


async def rows(brain, content: str) -> int:
    async with brain.engine.pool.acquire() as conn:
        return await conn.fetchval("SELECT count(*) FROM memories WHERE content = $1", content)


async def writes(brain, content: str) -> tuple[int, int]:
    """(how often the memory was reinforced by a write of it again, retain events about it)."""
    async with brain.engine.pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT m.access_count, (SELECT count(*) FROM memory_events e WHERE e.memory_id = m.id AND e.op = 'retain')
               AS events FROM memories m WHERE m.content = $1""",
            content,
        )
    return row["access_count"], row["events"]


async def drop_once_after_commit(monkeypatch, brain, op):
    """Run ``op`` as the service does (retried on a lost connection); the first attempt's connection
    is dropped right after its commit."""
    attempts = []

    async def attempt():
        attempts.append(1)
        if len(attempts) == 1:
            monkeypatch.setenv("CABRAIN_FAILPOINTS", "retain.after_commit")
        else:
            monkeypatch.delenv("CABRAIN_FAILPOINTS", raising=False)
        return await op()

    result = await reconnect.retrying(attempt, pool=brain.engine.pool, timeout_s=30)
    return result, len(attempts)


async def test_a_retry_after_the_connection_dropped_past_the_commit_writes_exactly_once(brain, monkeypatch) -> None:
    key = requests.new_key()
    results, attempts = await drop_once_after_commit(
        monkeypatch, brain, lambda: brain.retain("alice", [mem(TEXT)], decide=False, idempotency_key=key)
    )
    assert attempts == 2  # the first attempt committed, then lost its connection
    assert await rows(brain, TEXT) == 1
    assert await writes(brain, TEXT) == (0, 1)  # written once, never written again
    [result] = results
    assert result.decision is Decision.ADD and result.memory_id is not None
    # the same key again, later: the same answer, still one memory
    assert await brain.retain("alice", [mem(TEXT)], decide=False, idempotency_key=key) == results
    assert await rows(brain, TEXT) == 1 and await writes(brain, TEXT) == (0, 1)


async def test_without_a_key_the_same_retry_writes_again(brain, monkeypatch) -> None:
    """What the key prevents: an unkeyed retry after a drop past the commit is a second write (the
    same text from the same source: a reinforcement, with its own event), and its answer is not the
    first one's."""
    text = "The staging cluster's certificates now rotate every 30 days."
    [result], attempts = await drop_once_after_commit(
        monkeypatch, brain, lambda: brain.retain("alice", [mem(text)], decide=False)
    )
    assert attempts == 2
    assert result.decision is Decision.NOOP  # the first attempt's ADD was lost with its connection
    assert await writes(brain, text) == (1, 2)


async def test_a_batch_and_a_reconsolidation_are_idempotent_too(brain, monkeypatch) -> None:
    texts = [f"Runbook step {i}: restart the ingest worker on node {i}." for i in range(3)]
    key = requests.new_key()
    first, attempts = await drop_once_after_commit(
        monkeypatch, brain, lambda: brain.retain("alice", [mem(t) for t in texts], idempotency_key=key)
    )
    assert attempts == 2 and [await rows(brain, t) for t in texts] == [1, 1, 1]
    assert await brain.retain("alice", [mem(t) for t in texts], idempotency_key=key) == first

    fixed = "Runbook step 0: restart the ingest worker on node 7."
    key = requests.new_key()
    corrected, attempts = await drop_once_after_commit(
        monkeypatch,
        brain,
        lambda: brain.reconsolidate("alice", first[0].memory_id, fixed, reason="node moved", idempotency_key=key),
    )
    assert attempts == 2 and await rows(brain, fixed) == 1
    assert corrected.superseded == (first[0].memory_id,)


async def test_a_key_names_one_request_and_bad_keys_are_refused(brain) -> None:
    key = requests.new_key()
    await brain.retain("alice", [mem("The VPN gateway moved to 10.8.0.1.")], idempotency_key=key)
    with pytest.raises(ConflictError, match="was used for another retain"):
        await brain.retain("alice", [mem("The VPN gateway moved to 10.9.0.1.")], idempotency_key=key)
    # keys are per agent: bob's same key is his own
    await brain.create_namespace("bob", "bobs")
    [mine] = await brain.retain("bob", [mem("Bob's desk is on floor 3.", "bobs")], idempotency_key=key)
    assert mine.decision is Decision.ADD
    for bad in ("", "x" * 201, "tab\there"):
        with pytest.raises(InputError, match="idempotency key"):
            await brain.retain("alice", [mem("anything at all")], idempotency_key=bad)
