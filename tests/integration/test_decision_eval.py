"""``cabrain eval decisions``: the labelled pairs in the repository keep the write and sleep
judgments within their targets, through the real retain and sleep code paths."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cabrain.eval_decisions import combined, run_decision_eval
from tests.conftest import REPO, brings, cli_env, free_port, run_cli, wait_for_port

PAIRS = REPO / "eval" / "decisions"


async def test_the_labelled_pairs_meet_their_targets(settings_for, pg_server):
    settings = settings_for(pg_server.dsn())
    results = await run_decision_eval(settings, PAIRS, quiet=True)
    by_name = {r.name: r for r in results}
    main = combined([r for r in results if r.name.startswith("main/")])
    assert main.pairs >= 400 and {r.name for r in results} >= {"main/en.jsonl", "main/ar.jsonl"}
    write = main.write.per_label()
    # the targets, with the default rules
    assert main.write.false_supersede_rate <= 0.01, main.write.false_supersedes
    assert write["UPDATE"]["recall"] >= 0.80
    assert write["NOOP"]["precision"] >= 0.95
    assert main.sleep.false_supersede_rate <= 0.01, main.sleep.false_supersedes
    assert not main.write.false_merges and not main.sleep.false_merges
    # pairs never tuned on: different subjects are still never superseded
    held = combined([r for r in results if r.name.startswith("heldout/")])
    assert held.pairs >= 150 and held.write.false_supersede_rate <= 0.01, held.write.false_supersedes
    assert by_name["main/ar.jsonl"].write.per_label()["UPDATE"]["n"] > 0  # Arabic revisions are in the set


@pytest.fixture
@brings("subprocess")
def chat_server(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.chat_server", "--port", str(port), "--log", str(tmp_path / "chat.log")],
        cwd=REPO,
    )
    try:
        assert wait_for_port(port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_the_chat_model_decider_is_measured_and_held_to_the_subject_check(
    tmp_path, chat_server, settings_for, pg_server
):
    pairs = [  # the scripted model answers by cue words in the new statement (tests/fakes/chat_server.py)
        {
            "id": "p1",
            "old": "The weekly sync is on Monday.",
            "new": "revise: the weekly sync is now on Tuesday.",
            "label": "UPDATE",
            "same_subject": True,
        },
        {
            "id": "p2",
            "old": "Server alpha has 16 GB of RAM.",
            "new": "revise: Server beta has 32 GB of RAM.",
            "label": "ADD",
            "same_subject": False,
        },
        {
            "id": "p3",
            "old": "Lunch is at noon.",
            "new": "same as above: lunch is at noon.",
            "label": "NOOP",
            "same_subject": True,
        },
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in pairs) + "\n")
    settings = settings_for(pg_server.dsn(), llm_url=chat_server, llm_model="scripted")
    [result] = await run_decision_eval(settings, path, decider="llm", quiet=True)
    assert result.decider == "llm"
    assert result.write.confusion[("UPDATE", "UPDATE")] == 1  # the model's revision
    assert result.write.confusion[("ADD", "ADD")] == 1  # its UPDATE of another subject was refused
    assert result.write.false_supersede_rate == 0.0
    refused = [e for e in result.write.errors if e["id"] == "p2"]
    assert not refused
    log = (tmp_path / "chat.log").read_text()
    assert "Server beta" in log  # the model was asked


def test_the_command_reports_and_refuses_bad_input(tmp_path, pg_server, home):
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    pairs = tmp_path / "few.jsonl"
    pairs.write_text(
        json.dumps(
            {
                "id": "a",
                "old": "Server alpha has 16 GB of RAM.",
                "new": "Server beta has 32 GB of RAM.",
                "label": "ADD",
                "same_subject": False,
            }
        )
        + "\n"
    )
    out = tmp_path / "out.json"
    done = run_cli("eval", "decisions", str(pairs), "--json", str(out), "--quiet", env=env)
    assert done.returncode == 0, done.stderr
    assert "false-sup" in done.stdout and "few.jsonl" in done.stdout
    data = json.loads(out.read_text())
    assert data["sets"][0]["write"]["per_label"]["ADD"]["recall"] == 1.0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "old": "x", "new": "y", "label": "MAYBE", "same_subject": true}\n')
    refused = run_cli("eval", "decisions", str(bad), env=env)
    assert refused.returncode != 0 and "bad.jsonl:1: label must be one of" in refused.stderr
    missing = run_cli("eval", "decisions", env=env)
    assert missing.returncode == 2 and "needs a set" in missing.stderr
    wrong = run_cli("eval", "decisions", str(pairs), "--mode", "bm25", env=env)
    assert wrong.returncode == 2 and "--mode, --k and --decide measure recall" in wrong.stderr
    assert not Path(tmp_path / "nothing").exists()
