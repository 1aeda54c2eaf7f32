"""Model providers over real HTTP on loopback: both wire formats, retries, timeouts, failures -
every call recorded with its tokens, cost, time and error."""

import random
import re

import pytest

from cabrain.errors import ConfigError, InputError
from cabrain.providers.llm_calls import AnthropicModel, CallPolicy, ModelCallError, OpenAIModel
from cabrain.workflows import registry
from tests.conftest import free_port, loopback_egress
from tests.integration.test_workflows import (  # noqa: F401 - models: a fixture
    dispatch,
    flows,
    invoice,
    learn,
    models,
    setup_brain,
    tighten,
)

FAST = CallPolicy(timeout_s=0.5, retries=2, backoff_s=0.01, egress=loopback_egress())


async def test_both_wire_formats_report_tokens(models):  # noqa: F811
    done = await OpenAIModel(f"{models}/v1", "frontier-x", policy=FAST).complete(
        "You complete tasks.", "Task:\nsay hi", max_tokens=50
    )
    assert done.text == "Done." and done.tokens_in == 6 and done.tokens_out == 1 and done.attempts == 1
    done = await AnthropicModel(models, "frontier-x", api_key="test-key", policy=FAST).complete(
        "sys", "Task:\nhi", max_tokens=50
    )
    assert done.text == "Done." and done.tokens_in == 3 and done.tokens_out == 1
    with pytest.raises(ModelCallError, match="401") as info:  # a bad key is not retried
        await AnthropicModel(models, "frontier-x", api_key="wrong", policy=FAST).complete("s", "u", max_tokens=5)
    assert info.value.attempts == 1


async def test_retries_timeouts_and_failures(models):  # noqa: F811
    flaky = await OpenAIModel(f"{models}/v1", "flaky-1", policy=FAST).complete("s", "Task:\nx", max_tokens=5)
    assert flaky.attempts == 3  # two 503s, then an answer
    with pytest.raises(ModelCallError, match="answered 500") as info:
        await OpenAIModel(f"{models}/v1", "down-1", policy=FAST).complete("s", "u", max_tokens=5)
    assert info.value.attempts == 3
    with pytest.raises(ModelCallError, match=re.escape("no answer within 0.5 s")):
        await OpenAIModel(f"{models}/v1", "slow-1", policy=CallPolicy(0.5, 0, 0.01, loopback_egress())).complete(
            "s", "u", max_tokens=5
        )
    with pytest.raises(ModelCallError, match="cannot reach"):
        await OpenAIModel(f"http://127.0.0.1:{free_port()}/v1", "any", policy=FAST).complete("s", "u", max_tokens=5)


async def test_a_failing_frontier_model_fails_the_task_and_is_recorded(open_brain, models):  # noqa: F811
    brain = await setup_brain(open_brain, models, workflow_retries=1, workflow_retry_backoff_s=0.01)
    await flows(brain).update_model("claude", {"model": "down-frontier"})
    with pytest.raises(ModelCallError, match="answered 500"):
        await dispatch(brain, invoice(random.Random(1)), "json")
    async with brain.engine.pool.acquire() as conn:
        task = await conn.fetchrow("SELECT status, error FROM workflow_tasks")
        call = await conn.fetchrow("SELECT agent, purpose, error, attempts, cost_usd FROM llm_calls")
        agent = await registry.get(conn, "claude")
    assert task["status"] == "failed" and "answered 500" in task["error"]
    assert call["agent"] == "claude" and call["purpose"] == "frontier" and call["attempts"] == 2
    assert "answered 500" in call["error"] and call["cost_usd"] is None
    assert agent.calls == 1 and agent.failures == 1


async def test_no_judge_means_incomplete_scores_and_nothing_trusted(open_brain, models, db_dsn):  # noqa: F811
    brain = await setup_brain(open_brain, models, workflow_route_confidence=0.5)
    await flows(brain).update_model("judge", {"model": "down-judge"})
    tighten(brain, workflow_retries=0)
    rng = random.Random(2)
    for _ in range(3):
        await dispatch(brain, invoice(rng), "json")
    report = await learn(brain, db_dsn)
    assert report["learned"] == 3
    async with brain.engine.pool.acquire() as conn:
        attempts = await conn.fetch("SELECT score, complete, score_parts FROM chain_attempts")
    assert attempts and not any(a["complete"] for a in attempts)
    assert all('"judge": null' in a["score_parts"] and "the judge failed" in a["score_parts"] for a in attempts)
    assert (await dispatch(brain, invoice(rng), "json")).route == "frontier"  # never trusted without a judge


async def test_registry_checks_what_it_is_given(open_brain, models, monkeypatch):  # noqa: F811
    brain = await setup_brain(open_brain, models)
    wf = flows(brain)
    for fields, words in (
        ({"layer": "middle"}, "layer"),
        ({"endpoint": "ftp://x"}, "http"),
        ({"api_key_env": "not a name"}, "environment variable"),
        ({"cost_in_per_1k": -1}, "0 or more"),
    ):
        with pytest.raises(InputError, match=words):
            await wf.add_model(
                {
                    "name": "x",
                    "layer": "local",
                    "provider": "openai",
                    "model": "m",
                    "endpoint": "http://127.0.0.1:1/v1",
                    **fields,
                }
            )
    with pytest.raises(InputError, match="already exists"):
        await wf.add_model(
            {"name": "qwen", "layer": "local", "provider": "openai", "model": "m", "endpoint": "http://h/v1"}
        )
    await wf.add_model(
        {
            "name": "sonnet",
            "layer": "frontier",
            "provider": "anthropic",
            "model": "frontier-s",
            "endpoint": models,
            "api_key_env": "TEST_ANTHROPIC_KEY",
        }
    )
    sonnet = await wf.get_model("sonnet")
    off = await wf.update_model("qwen", {"active": False})
    assert not off.active and "qwen" not in [a.name for a in await _active(brain)]
    monkeypatch.delenv("TEST_ANTHROPIC_KEY", raising=False)
    with pytest.raises(ConfigError, match="TEST_ANTHROPIC_KEY"):
        sonnet.build(FAST)
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "test-key")
    result = await dispatch(brain, "Say done.", "text", frontier_agent="sonnet")
    assert result.output == "Done." and result.agents == ["sonnet"]


async def _active(brain):
    return await flows(brain).list_models(active_only=True)


async def test_learning_with_no_local_model_answering_keeps_the_reference_for_later(open_brain, models, db_dsn):  # noqa: F811
    brain = await setup_brain(open_brain, models, workflow_retries=0)
    await flows(brain).update_model("qwen", {"model": "down-local"})
    await dispatch(brain, invoice(random.Random(4)), "json")
    report = await learn(brain, db_dsn)
    assert report["failed"] == 1 and "no local chain answered" in report["outcomes"][0]["reason"]
    async with brain.engine.pool.acquire() as conn:
        run = await conn.fetchrow("SELECT learned_at, learn_error FROM frontier_runs")
    await flows(brain).update_model("qwen", {"model": "local-good"})
    assert run["learned_at"] is None and "answered 500" in run["learn_error"]
    again = await learn(brain, db_dsn)  # the model is back: learned now
    assert again["learned"] == 1 and again["outcomes"][0]["attempts"][0]["score"] > 0.9
