"""Write decisions and entities from a chat model (a scripted OpenAI-compatible server on loopback)."""

import json
import subprocess
import sys

import pytest

from cabrain.errors import ConfigError
from cabrain.types import Decision, MemoryInput
from tests.conftest import REPO, brings, free_port, wait_for_port


@pytest.fixture(scope="module")
@brings("subprocess")
def chat_server(tmp_path_factory):
    log = tmp_path_factory.mktemp("chat") / "requests.jsonl"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.chat_server", "--port", str(port), "--log", str(log)], cwd=REPO
    )
    assert wait_for_port(port), "the chat server did not start"
    yield f"http://127.0.0.1:{port}/v1", log
    proc.terminate()
    proc.wait(10)


@pytest.fixture
async def llm_brain(open_brain, chat_server):
    brain = await open_brain(llm_url=chat_server[0], llm_model="scripted")
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    return brain


def mem(text):
    return MemoryInput(text, "proj")


async def test_the_chat_model_decides_update_noop_and_invalidate(llm_brain, chat_server):
    [base] = await llm_brain.retain("alice", mem("The weekly sync is on Monday mornings."))
    assert base.decision is Decision.ADD
    [revised] = await llm_brain.retain("alice", mem("revise: the weekly sync moved to Tuesday mornings."))
    assert (revised.decision, revised.superseded) == (Decision.UPDATE, (base.memory_id,))
    assert revised.reason == "scripted: revise"
    [same] = await llm_brain.retain("alice", mem("same as above: weekly sync on Tuesday mornings."))
    assert (same.decision, same.memory_id) == (Decision.NOOP, revised.memory_id)
    [gone] = await llm_brain.retain("alice", mem("retract that, there is no weekly sync any more."))
    assert gone.decision is Decision.INVALIDATE and gone.memory_id is None
    assert gone.superseded == (revised.memory_id,)
    assert (await llm_brain.get("alice", revised.memory_id)).memory.invalid_at is not None
    prompts = [json.loads(line) for line in chat_server[1].read_text().splitlines()]
    decisions = [p for p in prompts if p["messages"][0]["content"].startswith("You keep")]
    assert decisions and all(str(base.memory_id) not in p["messages"][1]["content"] for p in decisions), (
        "memory ids never reach the model: neighbours are numbered"
    )


async def test_malformed_or_out_of_range_answers_fall_back_to_the_deterministic_decision(llm_brain, caplog):
    await llm_brain.retain("alice", mem("Deploys happen on Fridays."))
    with caplog.at_level("WARNING", logger="cabrain.write.llm"):
        [a] = await llm_brain.retain("alice", mem("garbage: deploys happen on fridays."))
        [b] = await llm_brain.retain("alice", mem("out of range: a completely different note about lunch."))
    for result in (a, b):
        assert result.decision is Decision.ADD and result.reason == "new information", "the deterministic decision"
    assert sum(r.msg == "write_decision.llm_fallback" for r in caplog.records) == 2


async def test_the_chat_model_names_entities(llm_brain):
    [r] = await llm_brain.retain("alice", mem("ProjAtlas and مشروع_النور share a database."))
    assert set(r.entities) >= {"ProjAtlas", "مشروع_النور"}


async def test_asking_for_llm_decisions_without_a_chat_model_is_a_config_error(open_brain):
    with pytest.raises(ConfigError, match="no chat model is configured"):
        await open_brain(write_decider="llm")
