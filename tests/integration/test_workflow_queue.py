"""The dispatch queue: several worker processes, no task run twice, priorities, dead workers' claims."""

import json
import random
import subprocess
import sys

import pytest

from cabrain.errors import AccessDenied, InputError, NotFound
from cabrain.workflows.facade import TaskRequest
from tests.conftest import cli_env
from tests.integration.test_workflows import flows, invoice, models, setup_brain  # noqa: F401 - models: a fixture


async def test_several_workers_run_every_task_exactly_once(open_brain, models, db_dsn, home):  # noqa: F811
    brain = await setup_brain(open_brain, models)
    rng = random.Random(5)
    queued = [
        await flows(brain).enqueue(
            "alice", TaskRequest("ops", invoice(rng), task_type="json"), priority=rng.randint(0, 9)
        )
        for _ in range(24)
    ]
    env = cli_env(database_url=db_dsn, home=str(home), workflow_judge="judge")
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "cabrain", "workflows", "worker", "--drain", "--name", f"w{i}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    outputs = [w.communicate(timeout=300) for w in workers]
    assert all(w.returncode == 0 for w in workers), [o[1][-2000:] for o in outputs]
    async with brain.engine.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, status, picked_by, task_id, tries, result FROM dispatch_queue")
        frontier_calls = await conn.fetch(
            "SELECT task_id, count(*) AS n FROM llm_calls WHERE purpose = 'frontier' GROUP BY task_id"
        )
        tasks = await conn.fetchval("SELECT count(*) FROM workflow_tasks")
    assert len(rows) == 24 and {r["status"] for r in rows} == {"done"}
    assert {r["tries"] for r in rows} == {1}
    assert tasks == 24 and len(frontier_calls) == 24 and {r["n"] for r in frontier_calls} == {1}  # none ran twice
    assert len({r["picked_by"] for r in rows}) >= 2  # the work was shared
    assert all(json.loads(r["result"])["output"] for r in rows)
    assert {str(r["id"]) for r in rows} == {q["id"] for q in queued}


async def test_a_single_worker_takes_the_most_urgent_task_first(open_brain, models):  # noqa: F811
    brain = await setup_brain(open_brain, models)
    rng = random.Random(9)
    wf = flows(brain)
    low = await wf.enqueue("alice", TaskRequest("ops", invoice(rng), task_type="json"), priority=1)
    high = await wf.enqueue("alice", TaskRequest("ops", invoice(rng), task_type="json"), priority=9)
    claimed = await wf.claim("w")
    assert claimed["id"] == high["id"] and claimed["status"] == "picked"
    assert (await wf.claim("w2"))["id"] == low["id"]
    assert await wf.claim("w3") is None
    assert await wf.queue_counts() == {"pending": 0, "picked": 2, "done": 0, "failed": 0}


async def test_a_dead_workers_claim_goes_back_to_pending_then_fails(open_brain, models):  # noqa: F811
    brain = await setup_brain(open_brain, models, workflow_lease_s=60, workflow_max_tries=2)
    wf = flows(brain)
    item = await wf.enqueue("alice", TaskRequest("ops", "Extract it", task_type="json"))
    assert (await wf.claim("dead"))["tries"] == 1
    async with brain.engine.pool.acquire() as conn:
        await conn.execute("UPDATE dispatch_queue SET picked_at = now() - interval '2 minutes'")
    again = await wf.claim("alive")
    assert again["id"] == item["id"] and again["tries"] == 2 and again["picked_by"] == "alive"
    async with brain.engine.pool.acquire() as conn:
        await conn.execute("UPDATE dispatch_queue SET picked_at = now() - interval '2 minutes'")
    assert await wf.claim("third") is None
    failed = await wf.queued("alice", item["id"])
    assert failed["status"] == "failed" and "stopped before finishing" in failed["error"]


async def test_queued_tasks_are_scoped_and_checked(open_brain, models):  # noqa: F811
    brain = await setup_brain(open_brain, models)
    wf = flows(brain)
    with pytest.raises(AccessDenied):
        await wf.enqueue("bob", TaskRequest("ops", "Extract", task_type="json"))
    with pytest.raises(InputError, match="priority"):
        await wf.enqueue("alice", TaskRequest("ops", "Extract"), priority=10**6)
    item = await wf.enqueue("alice", TaskRequest("ops", "Extract"))
    with pytest.raises(NotFound):
        await wf.queued("bob", item["id"])  # bob cannot read ops
    assert (await wf.queued("alice", item["id"]))["status"] == "pending"
    with pytest.raises(InputError, match="not a queue id"):
        await wf.queued("alice", "nope")
