"""Limits per agent and usage after a refused request, on a real Brain and PostgreSQL (issue 31,
findings 7 and 8): a refused input is never counted and never breaks a flush, counts survive a
restart, and one agent runs at most its slots while another's operations still run."""

from __future__ import annotations

import asyncio
import json
import logging

import asyncpg
import pytest

from cabrain.errors import InputError, ServiceBusy
from cabrain.types import MemoryInput, RecallQuery, Visibility


def recalls(report: dict, agent: str, namespace: str) -> int:
    return sum(
        r["calls"] for r in report["rows"] if (r["agent_id"], r["namespace"], r["op"]) == (agent, namespace, "recall")
    )


async def test_a_refused_namespace_is_not_counted_and_the_counts_survive_a_restart(open_brain, db_dsn) -> None:
    brain = await open_brain(usage_flush_s=3600)  # nothing is written but by a report or the close
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    for bad in ("pr\x00oj", "pr\udc80oj"):
        with pytest.raises(InputError, match="namespace"):
            await brain.retain("alice", MemoryInput("planted", bad, visibility=Visibility.TEAM))
        with pytest.raises(InputError, match="namespace"):
            await brain.recall("alice", RecallQuery("anything", bad))
    for _ in range(3):
        await brain.recall("alice", RecallQuery("what is here", "proj"))
    await brain.close()  # a restart: what was counted in memory is written as the process ends

    again = await open_brain(usage_flush_s=3600)
    report = await again.usage("alice")
    assert recalls(report, "alice", "proj") == 3
    assert {r["namespace"] for r in report["rows"]} <= {"", "proj"}  # nothing of the refused calls
    await again.recall("alice", RecallQuery("what is here", "proj"))
    assert recalls(await again.usage("alice"), "alice", "proj") == 4  # and counting goes on


async def test_a_row_no_column_holds_is_dropped_and_the_others_are_written(brain, caplog) -> None:
    """Should anything count a name the gate did not see (a bug), its row alone is dropped: every
    later flush and report still works."""
    governor = brain.engine.governor
    governor.count("alice", "bad\x00name", "recall")
    governor.count("alice", "bad\udc80name", "recall")
    governor.count("alice", "proj", "recall", calls=2)
    with caplog.at_level(logging.WARNING, logger="cabrain.governance"):
        report = await brain.usage("alice")
    assert recalls(report, "alice", "proj") == 2
    assert sum("usage row dropped" in r.getMessage() for r in caplog.records) == 2
    governor.count("alice", "proj", "recall")
    assert await governor.flush() >= 1  # written: the new count (and the report's own)
    assert recalls(await brain.usage("alice"), "alice", "proj") == 3


async def test_one_agent_runs_at_most_its_slots_and_another_agent_still_runs(open_brain, db_dsn) -> None:
    brain = await open_brain(max_concurrent_per_agent=2, max_queued_per_agent=1)
    for agent in ("alice", "bob"):
        await brain.create_agent(agent)
        await brain.create_namespace(agent, f"{agent}-ns")
    await brain.retain("bob", MemoryInput("Bob's builds run at night.", "bob-ns", visibility=Visibility.TEAM))
    slots = brain.engine.running
    locker = await asyncpg.connect(db_dsn)
    tx = locker.transaction()
    await tx.start()
    await locker.execute("LOCK TABLE memories IN SHARE MODE")  # every write waits; reads go on
    try:
        writes = [
            asyncio.create_task(
                brain.retain("alice", MemoryInput(f"Alice's note {i}.", "alice-ns", visibility=Visibility.TEAM))
            )
            for i in range(3)
        ]
        for _ in range(2000):  # two run (and wait on the lock), one waits for a slot
            if slots.running("alice") == 2 and slots.waiting("alice") == 1:
                break
            await asyncio.sleep(0.01)
        assert (slots.running("alice"), slots.waiting("alice")) == (2, 1)

        with pytest.raises(ServiceBusy, match="CABRAIN_MAX_CONCURRENT_PER_AGENT") as refused:
            await brain.retain("alice", MemoryInput("One too many.", "alice-ns", visibility=Visibility.TEAM))
        assert refused.value.status == 429 and refused.value.retry_after_s > 0

        answer = await brain.recall("bob", RecallQuery("when do builds run", "bob-ns"))  # bob is not held up
        assert [h.memory.content for h in answer.hits] == ["Bob's builds run at night."]
        assert not any(w.done() for w in writes)
    finally:
        await tx.rollback()
        await locker.close()
    stored = await asyncio.gather(*writes)
    assert all(r[0].memory_id is not None for r in stored)
    assert (slots.running("alice"), slots.waiting("alice")) == (0, 0)
    report = await brain.usage("alice")
    assert sum(r["calls"] for r in report["rows"] if r["op"] == "retain" and r["namespace"] == "alice-ns") == 3
    assert json.dumps(report)  # the refused call was not counted, and the report is plain JSON
