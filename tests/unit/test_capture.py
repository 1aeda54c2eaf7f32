"""Capture: redaction, the project's namespace, what each hook event retains, hooks install."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cabrain.errors import InputError
from cabrain.faces import capture as capture_module
from cabrain.faces import hooks
from cabrain.faces.capture import (
    CaptureConfig,
    CaptureError,
    _Url,
    decisions_and_learnings,
    git_remote,
    hook_output,
    namespace_from_remote,
    origin_url,
    plan,
    project_name,
    redact,
    run,
)
from cabrain.paths import user_data_dir

SECRETS = [
    "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "cbk_0123456789abcdefghijABCDEFGHIJ_-xyz",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "xoxb-1234567890-abcdefghij",
    "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_secrets_are_removed(secret: str) -> None:
    out = redact(f"use {secret} for the sandbox")
    assert secret not in out and "[REDACTED]" in out and out.startswith("use ")


@pytest.mark.parametrize(
    ("text", "gone", "kept"),
    [
        ("password = hunter2!", "hunter2", "password = "),
        ('DB_PASSWORD="s3cr3t value"', "s3cr3t", "DB_PASSWORD="),
        ("api_key: abc123def456", "abc123def456", "api_key: "),
        ("Authorization: Bearer abc.def.ghi", "abc.def.ghi", "Authorization: Bearer "),
        ("postgresql://app:pa55w0rd@db:5432/x", "pa55w0rd", "postgresql://app:"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter", "MIIEow", "after"),
        ("a <private>my address</private> b <PRIVATE>x\ny</PRIVATE> c", "my address", "a [PRIVATE] b"),
        ("unclosed <private>everything after", "everything after", "unclosed"),
    ],
)
def test_private_blocks_and_assignments_are_removed(text: str, gone: str, kept: str) -> None:
    out = redact(text)
    assert gone not in out and kept in out


def test_ordinary_text_is_untouched() -> None:
    text = "Commit 3f2a9c1e4b5d6f7a8b9c0d1e2f3a4b5c6d7e8f9a fixed the token bucket; uuid 9b2e6c1a-1111-4aaa-8bbb-123456789abc."
    assert redact(text) == text


@pytest.mark.parametrize(
    ("remote", "namespace"),
    [
        ("git@github.com:acme/payments.git", "github.com/acme/payments"),
        ("https://github.com/acme/payments.git", "github.com/acme/payments"),
        ("https://user:tok@gitlab.example.com/group/sub/repo", "gitlab.example.com/group/sub/repo"),
        ("ssh://git@git.example.com:2222/team/app.git", "git.example.com/team/app"),
    ],
)
def test_namespace_from_the_git_remote(remote: str, namespace: str) -> None:
    assert namespace_from_remote(remote) == namespace


def test_decisions_and_rejections_are_picked_out_of_prose_not_code() -> None:
    text = (
        "I looked at it. We decided to use Redis Streams because it has consumer groups. "
        "We rejected Kafka: too heavy to run. The weather is nice.\n```\n# we decided nothing here\n```"
    )
    found = decisions_and_learnings(text)
    assert found == [
        "We decided to use Redis Streams because it has consumer groups.",
        "We rejected Kafka: too heavy to run.",
    ]


def _event(name: str, **fields: object) -> dict:
    return {"session_id": "s-1", "cwd": "/tmp", "hook_event_name": name, **fields}


def test_each_event_plans_what_it_should() -> None:
    assert (plan(_event("SessionStart"), "github.com/acme/api").context_query or "").startswith("api:")
    prompt = plan(_event("UserPromptSubmit", prompt="How do we deploy? <private>pin 1234</private>"), "ns")
    assert prompt.memories[0]["content"] == "User asked: How do we deploy? [PRIVATE]"
    assert prompt.memories[0]["source_kind"] == "claude_code" and prompt.memories[0]["source_ref"] == "s-1"
    assert prompt.context_query == "How do we deploy? [PRIVATE]"
    assert plan(_event("UserPromptSubmit", prompt="ok"), "ns").memories == []  # too short to keep
    read = _event("PostToolUse", tool_name="Read", tool_input={"file_path": "/a"}, tool_response={"content": "x"})
    assert plan(read, "ns").memories == []
    edit = _event(
        "PostToolUse",
        tool_name="Edit",
        tool_input={"file_path": "/a.py", "old_string": "x = 1", "new_string": "x = 2"},
        tool_response={},
    )
    assert plan(edit, "ns").memories[0]["content"] == "Edited /a.py: `x = 1` -> `x = 2`"
    failed = _event(
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": "pytest"},
        tool_response={"stdout": "", "stderr": "FAILED test_x - AssertionError"},
    )
    assert plan(failed, "ns").memories[0]["content"].startswith("Command failed: `pytest` - FAILED test_x")
    with pytest.raises(CaptureError, match="unknown hook event"):
        plan(_event("Notification"), "ns")


def test_stop_and_precompact_read_the_transcript(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        "\n".join(
            json.dumps(e)
            for e in [
                {"type": "user", "message": {"role": "user", "content": "pick a cache"}},
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "name": "Write", "input": {"file_path": "/c.py", "content": "x"}}
                        ],
                    },
                },
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "text",
                                "text": "We decided to use Redis because it is already deployed. password=abc",
                            }
                        ],
                    },
                },
                "not json",
            ]
        )
        + "\nnot json\n"
    )
    stop = plan(_event("Stop", transcript_path=str(transcript)), "ns").memories
    assert [m["content"] for m in stop] == ["We decided to use Redis because it is already deployed."]
    assert stop[0]["network"] == "fact" and stop[0]["memory_type"] == "semantic"
    [digest] = plan(_event("PreCompact", transcript_path=str(transcript), trigger="auto"), "ns").memories
    assert "Asked: pick a cache" in digest["content"] and "Edited: /c.py" in digest["content"]
    assert "We decided to use Redis" in digest["content"] and "abc" not in digest["content"]


def test_only_session_start_and_prompts_answer_with_context() -> None:
    assert hook_output("SessionStart", "ctx") == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "ctx"}
    }
    assert hook_output("Stop", "ctx") is None and hook_output("UserPromptSubmit", "") is None


def test_bad_events_and_settings_are_clear_errors(tmp_path: Path) -> None:
    config = CaptureConfig.from_env({"CABRAIN_HOME": str(tmp_path), "CABRAIN_API_URL": "http://127.0.0.1:9"})
    with pytest.raises(CaptureError, match="not JSON"):
        run("{nope", config)
    with pytest.raises(CaptureError, match="hook_event_name"):
        run('{"session_id": "x"}', config)
    with pytest.raises(CaptureError, match="CAPTURE_VISIBILITY"):
        CaptureConfig.from_env({"CABRAIN_CAPTURE_VISIBILITY": "public"})


def test_hooks_install_keeps_other_hooks_and_uninstall_removes_only_ours(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    theirs = {"type": "command", "command": "ruff format"}
    path.write_text(json.dumps({"model": "x", "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [theirs]}]}}))
    assert hooks.install(path, "/opt/cabrain/.venv/bin/cabrain capture") is True
    assert hooks.install(path, "/opt/cabrain/.venv/bin/cabrain capture") is False  # idempotent
    data = json.loads(path.read_text())
    assert data["model"] == "x"
    assert set(data["hooks"]) == {"SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "Stop"}
    assert data["hooks"]["PostToolUse"][0] == {"matcher": "Edit", "hooks": [theirs]}
    assert data["hooks"]["PostToolUse"][1]["hooks"][0]["command"] == "/opt/cabrain/.venv/bin/cabrain capture"
    assert hooks.uninstall(path) is True and hooks.uninstall(path) is False
    assert json.loads(path.read_text()) == {
        "model": "x",
        "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [theirs]}]},
    }
    path.write_text("{broken")
    with pytest.raises(InputError, match="not valid JSON"):
        hooks.install(path, "cabrain capture")
    assert path.read_text() == "{broken"  # nothing was changed


def test_the_default_hook_command_is_recognised_and_runs_without_site_packages(tmp_path: Path) -> None:
    command = hooks.capture_command()
    words = shlex.split(command)
    assert words[0] == sys.executable and words[1] == "-S" and words[2].endswith("cabrain/faces/capture_hook.py")
    path = tmp_path / "settings.json"
    old_form = {"hooks": [{"type": "command", "command": "/opt/venv/bin/cabrain capture"}]}
    path.write_text(json.dumps({"hooks": {"Stop": [old_form]}}))
    assert hooks.install(path, command) is True  # an old-form entry covers Stop; the others are added
    data = json.loads(path.read_text())
    assert data["hooks"]["Stop"] == [old_form] and data["hooks"]["PreCompact"][0]["hooks"][0]["command"] == command
    assert hooks.uninstall(path) is True and json.loads(path.read_text()) == {}
    assert set(hooks.compile_hook_modules()) == {m.__file__ for m in hooks.HOOK_MODULES}
    assert str(Path(capture_module.__file__)) in hooks.compile_hook_modules()


@pytest.mark.subprocess
def test_the_hook_runs_with_no_site_packages_and_queues_when_the_service_is_down(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "CABRAIN_HOME": str(tmp_path),
        "CABRAIN_API_URL": "http://127.0.0.1:9",
        "CABRAIN_API_KEY": "cbk_x",
        "CABRAIN_CAPTURE_NAMESPACE": "proj",
    }
    event = {
        "session_id": "s-9",
        "cwd": str(tmp_path),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "Why does the staging deploy time out?",
    }
    done = subprocess.run(
        shlex.split(hooks.capture_command()),
        input=json.dumps(event),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "queued locally" in done.stderr and done.stdout == ""
    [line] = (tmp_path / "capture-queue.jsonl").read_text().splitlines()
    assert json.loads(line)["items"][0]["content"] == "User asked: Why does the staging deploy time out?"


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def _git_says(cwd: Path) -> str | None:
    out = subprocess.run(
        ["git", "-C", str(cwd), "config", "--get", "remote.origin.url"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return out or None


@pytest.mark.subprocess
def test_the_git_remote_is_read_from_the_config_as_git_reads_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _git("init", "-q", str(repo))
    assert git_remote(str(repo)) is None  # no origin: the directory names the namespace
    assert project_name(str(repo)) == "dir" + str(repo.resolve())
    _git("-C", str(repo), "remote", "add", "upstream", "git@github.com:other/fork.git")
    _git("-C", str(repo), "remote", "add", "origin", "git@github.com:acme/payments.git")
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    assert git_remote(str(sub)) == _git_says(sub) == "git@github.com:acme/payments.git"
    assert project_name(str(sub)) == "github.com/acme/payments"
    _git("-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x")
    worktree = tmp_path / "wt"
    _git("-C", str(repo), "worktree", "add", "-q", str(worktree))
    assert git_remote(str(worktree)) == _git_says(worktree) == "git@github.com:acme/payments.git"
    # an included file holds the remote: git itself is asked
    included = tmp_path / "remote.inc"
    included.write_text('[remote "origin"]\n\turl = https://example.com/team/included.git\n')
    _git("-C", str(repo), "remote", "remove", "origin")
    _git("-C", str(repo), "config", "include.path", str(included))
    assert git_remote(str(repo)) == _git_says(repo) == "https://example.com/team/included.git"


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ('[remote "origin"]\n\turl = git@github.com:a/b.git\n', "git@github.com:a/b.git"),
        ('[Remote "origin"]\n  URL=https://h/x.git ; a comment\n', "https://h/x.git"),
        ('[remote "origin"]\n\turl = "https://h/quoted.git"\n', "https://h/quoted.git"),
        ('[remote "upstream"]\n\turl = https://h/up.git\n[core]\n\turl = nope\n', None),
        ('# [remote "origin"]\n# url = commented\n', None),
    ],
)
def test_origin_url_parsing(text: str, url: str | None) -> None:
    assert origin_url(text) == url


@pytest.mark.parametrize(
    ("url", "host", "port", "path"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1", 8000, ""),
        ("https://brain.example.com/cabrain/", "brain.example.com", None, "/cabrain/"),
        ("http://user@[::1]:9000/x", "::1", 9000, "/x"),
    ],
)
def test_the_service_url_is_split_without_urllib(url: str, host: str, port: int | None, path: str) -> None:
    parsed = _Url(url)
    assert (parsed.hostname, parsed.port, parsed.path) == (host, port, path)


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://h/x", "http://:80", "http://h:port"])
def test_a_bad_service_url_is_named(url: str) -> None:
    with pytest.raises(CaptureError, match="CABRAIN_API_URL"):
        _Url(url)


def test_the_data_directory_matches_platformdirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import platformdirs

    for xdg in (None, str(tmp_path / "xdg"), "  "):
        if xdg is None:
            monkeypatch.delenv("XDG_DATA_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_DATA_HOME", xdg)
        assert user_data_dir("cabrain") == platformdirs.user_data_dir("cabrain", appauthor=False)
