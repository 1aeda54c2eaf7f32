"""`cabrain capture` with no service configured: straight to the database."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import asyncpg
import pytest

from cabrain.faces.hooks import capture_command
from tests.conftest import REPO, cli_env, make_scratch_dir


def _capture(event: dict, env: dict[str, str], command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, input=json.dumps(event), env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.subprocess
async def test_capture_writes_straight_to_the_database(db_dsn: str, home) -> None:
    project = make_scratch_dir("cabrain-project-")
    env = cli_env(database_url=db_dsn, home=str(home), capture_namespace="acme/billing")
    prompt = {
        "session_id": "s-local-1",
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "Our invoices must be issued in EGP and USD; password=hunter2 is the staging one",
    }
    done = _capture(prompt, env, [sys.executable, "-m", "cabrain", "capture"])
    assert done.returncode == 0, done.stderr
    start = {"session_id": "s-local-2", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    started = _capture(start, env, shlex.split(capture_command()))  # what `hooks install` writes: python -S
    assert started.returncode == 0, started.stderr
    context = json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "invoices must be issued in EGP and USD" in context and "hunter2" not in context
    conn = await asyncpg.connect(db_dsn)
    try:
        row = await conn.fetchrow("SELECT content, owner_agent_id, source_ref, namespace FROM memories")
        assert await conn.fetchval("SELECT owner_agent_id FROM namespaces WHERE name = 'acme/billing'") == "claude-code"
    finally:
        await conn.close()
    assert row["owner_agent_id"] == "claude-code" and row["source_ref"] == "s-local-1"
    assert row["namespace"] == "acme/billing" and "hunter2" not in row["content"]


@pytest.mark.subprocess
def test_hooks_install_and_uninstall_from_the_command_line() -> None:
    project = make_scratch_dir("cabrain-project-")

    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "cabrain", "hooks", *a],
            cwd=project,
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    installed = run("install")
    assert installed.returncode == 0 and "installed" in installed.stdout, installed.stderr
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command.endswith("/cabrain/faces/capture_hook.py") and command.split()[0].startswith("/")  # absolute
    assert "already installed" in run("install").stdout
    assert "removed" in run("uninstall").stdout
    assert json.loads((project / ".claude" / "settings.json").read_text()) == {}


async def test_a_prompt_is_recalled_on_the_database_with_the_sessions_earlier_turns(brain, monkeypatch, tmp_path):
    from cabrain.faces.capture import CaptureConfig, database
    from cabrain.faces.capture.events import recent_turns

    asked = []

    class Opened:
        """The test's brain as the capture path opens it (kept open after), its recalls recorded."""

        @staticmethod
        async def open(settings):
            return Opened()

        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return None

        def __getattr__(self, name):
            return getattr(brain, name)

        async def recall(self, agent, query):
            asked.append(query)
            return await brain.recall(agent, query)

    monkeypatch.setattr(database, "Brain", Opened)
    monkeypatch.setattr(database, "load_settings", lambda: brain.settings)
    transcript = tmp_path / "session.jsonl"
    turns = [
        {"type": "user", "message": {"role": "user", "content": "We are moving the invoices to the new ledger."}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]}},
    ]
    transcript.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    config = CaptureConfig(None, None, tmp_path, namespace="acme/billing")
    event = {"session_id": "s-1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit"}
    first = {**event, "prompt": "Invoices must be issued in EGP and USD from now on."}
    await database.handle_on_database(config, first)  # stored; nothing known yet to recall
    answer = await database.handle_on_database(
        config, {**event, "prompt": "Which currencies do invoices use?", "transcript_path": str(transcript)}
    )
    assert asked[-1].query == "Which currencies do invoices use?"
    assert (
        asked[-1].context
        == tuple(recent_turns(str(transcript), "x"))
        == ("We are moving the invoices to the new ledger.", "Noted.")
    )
    assert asked[0].context == ()  # the first prompt had no transcript
    assert "EGP and USD" in answer["hookSpecificOutput"]["additionalContext"]
