"""Secrets stay out of workflow learning, end to end against the scripted model server on loopback:
a task's secrets and ``<private>`` blocks reach no model and no table, and a model that quotes a key
in its answer has it taken out of the output, the reference, the attempts and the queue."""

import random

import httpx
import pytest

from cabrain.workflows.facade import TaskRequest
from tests.fakes.llm_server import LEAK
from tests.integration.test_workflows import flows, invoice, learn, setup_brain

TASK_SECRET = "sk-ant-api03-" + "Xy9" * 30  # an Anthropic key's form
PRIVATE = "the board meets on the roof"
TABLES = ("workflow_tasks", "frontier_runs", "chain_attempts", "llm_calls", "dispatch_queue", "workflow_audits")


@pytest.fixture
async def models(llm_server):
    httpx.post(f"{llm_server}/_reset")
    return llm_server


def leaky_task(rng: random.Random) -> TaskRequest:
    return TaskRequest(
        "ops",
        invoice(rng),
        context=f"ANTHROPIC_API_KEY={TASK_SECRET}\n<private>{PRIVATE}</private>\nThe invoice came by mail.",
        task_type="json",
    )


async def stored_text(brain) -> str:
    """Every row of workflow learning's tables, as text."""
    async with brain.engine.pool.acquire() as conn:
        rows = [await conn.fetch(f"SELECT t::text AS row FROM {table} t") for table in TABLES]
    return "\n".join(r["row"] for table in rows for r in table)


async def test_a_tasks_secrets_reach_no_model_and_a_models_leaked_key_is_stored_nowhere(open_brain, models, db_dsn):
    brain = await setup_brain(open_brain, models)
    for model in ("frontier-large", "local-good"):
        httpx.post(f"{models}/_mode", json={"model": model, "mode": "leaky"})
    rng = random.Random(5)

    result = await flows(brain).dispatch("alice", leaky_task(rng))
    assert result.route == "frontier"
    assert LEAK not in result.output and "[REDACTED]" in result.output  # the caller gets it redacted too
    assert result.output.startswith("{")  # the answer itself is kept
    queued = await flows(brain).enqueue("alice", leaky_task(rng))
    assert await flows(brain).work("worker-1", drain=True) == 1
    done = await flows(brain).queued("alice", queued["id"])
    assert done["status"] == "done"

    report = await learn(brain, db_dsn)  # the local model leaks too: its attempts are stored redacted
    assert report["runs"] == 2 and report["failed"] == 0

    sent = httpx.get(f"{models}/_log").json()
    assert sent and all(TASK_SECRET not in r["user"] and PRIVATE not in r["user"] for r in sent)
    assert any("[PRIVATE]" in r["user"] and "The invoice came by mail." in r["user"] for r in sent)
    stored = await stored_text(brain)
    assert "The invoice came by mail." in stored and "[REDACTED]" in stored
    for secret in (TASK_SECRET, PRIVATE, LEAK):
        assert secret not in stored
    async with brain.engine.pool.acquire() as conn:
        attempts = await conn.fetchval("SELECT count(*) FROM chain_attempts WHERE output LIKE '%[REDACTED]%'")
        memories = await conn.fetch("SELECT content FROM memories WHERE source_kind = 'workflow'")
    assert attempts > 0 and len(memories) == 2
    assert not any(secret in m["content"] for m in memories for secret in (TASK_SECRET, PRIVATE, LEAK))


async def test_with_redaction_turned_off_a_task_and_its_answer_are_kept_as_they_are(open_brain, models):
    brain = await setup_brain(open_brain, models, redact_secrets=False)  # the owner's choice (CABRAIN_REDACT_SECRETS)
    httpx.post(f"{models}/_mode", json={"model": "frontier-large", "mode": "leaky"})
    result = await flows(brain).dispatch("alice", leaky_task(random.Random(6)))
    assert LEAK in result.output
    [sent] = httpx.get(f"{models}/_log").json()
    assert TASK_SECRET in sent["user"] and PRIVATE in sent["user"]
    stored = await stored_text(brain)
    assert LEAK in stored and TASK_SECRET in stored
