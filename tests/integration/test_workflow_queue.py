"""The dispatch queue: several worker processes, no task run twice, priorities, dead workers' claims."""

import json
import random
import subprocess
import sys

import pytest

from cabrain.errors import AccessDenied, InputError, NotFound
from cabrain.workflows import queue
from cabrain.workflows.dispatch import TaskRequest
from tests.conftest import cli_env
from tests.integration.test_workflows import invoice, models, setup_brain  # noqa: F401 - models: a fixture


async def test_several_workers_run_every_task_exactly_once(open_brain, models, db_dsn, home):  # noqa: F811
    brain = await setup_brain(open_brain, models)
    rng = random.Random(5)
    queued = [
        await queue.enqueue(
            brain.pool,
            "alice",
            TaskRequest("ops", invoice(rng), task_type="json"),
            priority=rng.randint(0, 9),
            max_chars=20_000,
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
    async with brain.pool.acquire() as conn:
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
    low = await queue.enqueue(
        brain.pool, "alice", TaskRequest("ops", invoice(rng), task_type="json"), priority=1, max_chars=10_000
    )
    high = await queue.enqueue(
        brain.pool, "alice", TaskRequest("ops", invoice(rng), task_type="json"), priority=9, max_chars=10_000
    )
    claimed = await queue.claim(brain.pool, "w", lease_s=60, max_tries=3)
    assert claimed["id"] == high["id"] and claimed["status"] == "picked"
    assert (await queue.claim(brain.pool, "w2", lease_s=60, max_tries=3))["id"] == low["id"]
    assert await queue.claim(brain.pool, "w3", lease_s=60, max_tries=3) is None
    assert await queue.counts(brain.pool) == {"pending": 0, "picked": 2, "done": 0, "failed": 0}


async def test_a_dead_workers_claim_goes_back_to_pending_then_fails(open_brain, models):  # noqa: F811
    brain = await setup_brain(open_brain, models)
    item = await queue.enqueue(
        brain.pool, "alice", TaskRequest("ops", "Extract it", task_type="json"), max_chars=10_000
    )
    assert (await queue.claim(brain.pool, "dead", lease_s=60, max_tries=2))["tries"] == 1
    async with brain.pool.acquire() as conn:
        await conn.execute("UPDATE dispatch_queue SET picked_at = now() - interval '2 minutes'")
    again = await queue.claim(brain.pool, "alive", lease_s=60, max_tries=2)
    assert again["id"] == item["id"] and again["tries"] == 2 and again["picked_by"] == "alive"
    async with brain.pool.acquire() as conn:
        await conn.execute("UPDATE dispatch_queue SET picked_at = now() - interval '2 minutes'")
    assert await queue.claim(brain.pool, "third", lease_s=60, max_tries=2) is None
    failed = await queue.get(brain.pool, "alice", item["id"])
    assert failed["status"] == "failed" and "stopped before finishing" in failed["error"]


async def test_queued_tasks_are_scoped_and_checked(open_brain, models):  # noqa: F811
    brain = await setup_brain(open_brain, models)
    with pytest.raises(AccessDenied):
        await queue.enqueue(brain.pool, "bob", TaskRequest("ops", "Extract", task_type="json"), max_chars=10_000)
    with pytest.raises(InputError, match="priority"):
        await queue.enqueue(brain.pool, "alice", TaskRequest("ops", "Extract"), priority=10**6, max_chars=10_000)
    item = await queue.enqueue(brain.pool, "alice", TaskRequest("ops", "Extract"), max_chars=10_000)
    with pytest.raises(NotFound):
        await queue.get(brain.pool, "bob", item["id"])  # bob cannot read ops
    assert (await queue.get(brain.pool, "alice", item["id"]))["status"] == "pending"
    with pytest.raises(InputError, match="not a queue id"):
        await queue.get(brain.pool, "alice", "nope")
