"""A sleep cycle runs wherever the service runs (issue 32): beside replicas that hold most of a
two-CPU node, and beside replicas that hold all of it; one that cannot fit says why and can be
cancelled. On a real Ray cluster (tests/integration/scripts/sleep_room.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cabrain.sleep.room import Room, step_room
from cabrain.types import MemoryInput, Visibility
from tests.conftest import REPO, make_scratch_dir


def test_steps_ask_for_what_the_nodes_have_free() -> None:
    assert step_room(None, [(2.0, 2.0)]) == Room(1.0, None, "one CPU per step")
    half = step_room(None, [(0.5, 2.0)])
    assert (half.cpus, half.at_once) == (0.5, None) and "0.5 of 2" in half.why
    assert step_room(None, [(0.0, 2.0), (0.3, 1.0)]).cpus == 0.3  # the node with the most room
    none = step_room(None, [(0.0, 2.0), (0.01, 1.0)])
    assert (none.cpus, none.at_once) == (0.0, 1)  # nothing free: one at a time, no reservation
    assert step_room(2.0, [(0.5, 2.0)]) == Room(2.0, None, "CABRAIN_SLEEP_STEP_CPUS=2")


@pytest.mark.ray
async def test_a_cycle_runs_beside_replicas_and_a_stuck_one_is_cancelled(brain, db_dsn) -> None:
    await brain.create_agent("root", is_admin=True)
    await brain.create_namespace("alice", "proj")
    await brain.retain(
        "alice",
        [
            MemoryInput(f"Note {i}: the staging cluster has {i} nodes.", "proj", visibility=Visibility.TEAM)
            for i in range(5)
        ],
    )
    home = make_scratch_dir("cabrain-sleep-room-")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration.scripts.sleep_room", db_dsn, str(home)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    seen = json.loads(lines[-1].removeprefix("RESULT "))
    beside, full, stopped = seen["beside"], seen["full"], seen["cancelled"]
    assert beside["status"] == "done" and beside["tasks"] >= 6, beside
    assert "0.5 CPU per step" in beside["room"]
    assert full["status"] == "done" and "no CPU free" in full["room"], full
    assert stopped["note"].startswith("waiting for room on the cluster:") and "asks for 8 CPU" in stopped["note"]
    assert stopped["status"] == "cancelled" and stopped["withdrawn"] >= 1, stopped
    assert stopped["seen"] == {"status": "cancelled", "note": None, "withdrawn": stopped["withdrawn"]}


async def test_a_waiting_note_names_another_namespace_only_to_who_may_read_it(brain, db_dsn) -> None:
    import uuid

    import asyncpg

    from cabrain.sleep.runs import SleepRuns

    await brain.create_agent("root", is_admin=True)
    await brain.create_agent("bob")
    await brain.create_namespace("alice", "proj")
    await brain.create_namespace("bob", "bob-secret-plans")
    run_id = uuid.uuid4()
    note = "waiting for room on the cluster: dedup bob-secret-plans asks for 1 CPU"
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute(
            "INSERT INTO sleep_runs (id, status, steps, namespaces, note) VALUES ($1, 'running', '{dedup}', $2, $3)",
            run_id,
            ["proj", "bob-secret-plans"],
            note,
        )
    finally:
        await conn.close()
    runs = SleepRuns(brain.engine)
    seen = await runs.run("alice", run_id)
    assert seen["namespaces"] == ["proj"] and seen["note"] == "waiting for room on the cluster"
    assert "bob-secret-plans" not in str(await runs.runs("alice"))
    assert (await runs.run("root", run_id))["note"] == note
