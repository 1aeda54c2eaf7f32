"""Planted secrets never reach a table, a queue file or a log: every one of tests/secrets_table.py goes
through the capture hooks (prompts, commands, failures, edits, assistant decisions, transcripts,
the local queue while the service is down, the embedded path) and through the API, and then every
table of the database, every queue file, the hooks' output and the service's logs are searched."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import cli_env, free_port, make_scratch_dir
from tests.secrets_table import SECRETS
from tests.service.conftest import Service, table_texts
from tests.service.test_capture import _drained, _repo_of, capture


def _events(session: str, cwd: str, transcript: str) -> list[dict]:
    """One event per planted secret, of every kind the hooks retain."""
    events = []
    for i, (_, text, _) in enumerate(SECRETS):
        base = {"session_id": session, "cwd": cwd, "transcript_path": ""}
        kind = i % 6
        if kind == 0:
            events.append(
                {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"Please note this for later: {text}"}
            )
        elif kind == 1:  # a long command: cut for storage, but only after it was redacted
            events.append(
                {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": "echo " + "x" * 280 + " && " + text},
                    "tool_response": {"stdout": "ok", "exit_code": 0},
                }
            )
        elif kind == 2:
            events.append(
                {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": "./deploy.sh"},
                    "tool_response": {"stderr": f"fatal error: {text}", "exit_code": 1},
                }
            )
        elif kind == 3:
            events.append(
                {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Edit",
                    "tool_input": {"file_path": "/srv/app/.env", "old_string": "# config", "new_string": text},
                }
            )
        elif kind == 4:
            events.append(
                {
                    **base,
                    "hook_event_name": "Stop",
                    "last_assistant_message": f"We decided to keep this because the config needs it: {text}",
                }
            )
        else:
            events.append(
                {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "WebFetch",
                    "tool_input": {"url": "https://x", "prompt": text},
                    "tool_response": {"error": text},
                }
            )
    events.append(
        {
            "session_id": session,
            "cwd": cwd,
            "transcript_path": transcript,
            "hook_event_name": "PreCompact",
            "trigger": "auto",
        }
    )
    return events


def _transcript(folder: Path) -> str:
    path = folder / "transcript.jsonl"
    with path.open("w") as f:
        for _, text, _ in SECRETS:
            f.write(json.dumps({"type": "user", "message": {"role": "user", "content": f"remember {text}"}}) + "\n")
            f.write(
                json.dumps(
                    {
                        "type": "assistant",
                        "message": {
                            "role": "assistant",
                            "content": [{"type": "text", "text": f"We decided to store it because you asked: {text}"}],
                        },
                    }
                )
                + "\n"
            )
    return str(path)


def _ray_logs(since: float) -> str:
    import ray

    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    text = []
    for path in logs.rglob("*"):
        if path.is_file() and path.stat().st_mtime >= since and path.suffix in (".log", ".out", ".err", ""):
            text.append(path.read_text(errors="replace"))
    return "\n".join(text)


def _leaks(haystack: str) -> list[str]:
    return [what for what, _, secret in SECRETS if secret in haystack]


async def test_no_planted_secret_reaches_a_table_a_queue_file_or_a_log(service: Service) -> None:
    started = time.time()
    project = _repo_of("git@github.com:acme/vault.git")
    home = make_scratch_dir("cabrain-secrets-")
    transcript = _transcript(home)
    env = cli_env(api_url=service.url, api_key=service.keys["alice"], home=str(home), log_level="DEBUG")
    outputs = []
    for event in _events("sess-secrets", str(project), transcript):
        done = capture(event, env)
        assert done.returncode == 0, done.stderr
        outputs += [done.stdout, done.stderr]

    # the service is down for a while: the hooks queue locally, then flush
    down = cli_env(
        api_url=f"http://127.0.0.1:{free_port()}", api_key=service.keys["alice"], home=str(home), log_level="DEBUG"
    )
    for event in _events("sess-secrets-queued", str(project), transcript)[:40]:
        done = capture(event, down)
        assert done.returncode == 0, done.stderr
        outputs += [done.stdout, done.stderr]
    queue = (home / "capture-queue.jsonl").read_text()
    assert queue.count("\n") >= 20 and _leaks(queue) == []
    flushed = capture({}, env, "--flush")
    assert flushed.returncode == 0, flushed.stdout + flushed.stderr
    outputs += [flushed.stdout, flushed.stderr]

    # without a service: the hook writes straight to the database (each event opens the brain: a few)
    direct = cli_env(database_url=service.dsn, api_key=service.keys["alice"], home=str(home), log_level="DEBUG")
    bundle = "\n".join(text for _, text, _ in SECRETS)
    for event in (
        {
            "session_id": "sess-secrets-direct",
            "cwd": str(project),
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"Everything at once:\n{bundle}",
        },
        {
            "session_id": "sess-secrets-direct",
            "cwd": str(project),
            "hook_event_name": "Stop",
            "last_assistant_message": f"We decided to keep these because they matter:\n{bundle}",
        },
    ):
        done = capture(event, direct)
        assert done.returncode == 0, done.stderr
        outputs += [done.stdout, done.stderr]

    # and straight through the API: the service redacts what it stores whoever sends it
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": "secrets-api"}).status_code in (200, 201)
        items = [
            {"content": f"API note {i}: {text}", "namespace": "secrets-api", "metadata": {"raw": text}}
            for i, (_, text, _) in enumerate(SECRETS)
        ]
        for start in range(0, len(items), 50):
            written = alice.post("/v1/memories/batch", json={"items": items[start : start + 50], "decide": False})
            assert written.status_code == 200, written.text

    await _drained(service.dsn, timeout=300)  # about 300 captured batches to embed and write
    tables = "\n".join((await table_texts(service.dsn)).values())
    assert "sess-secrets" in tables and "API note 7" in tables  # the events and notes did arrive
    assert _leaks(tables) == []
    for path in home.glob("capture-queue*"):
        assert _leaks(path.read_text()) == [], path.name
    assert _leaks("\n".join(outputs)) == []
    assert _leaks(_ray_logs(started)) == []
