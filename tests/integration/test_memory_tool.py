"""The memory-tool backend, driven through the anthropic SDK's own tool runner
(`client.beta.messages.run_tools`) against a scripted Messages API on loopback, and compared
command by command with the SDK's reference filesystem implementation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anthropic
import httpx
import pytest
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

from cabrain import identity
from cabrain.faces.backend import BrainBackend
from cabrain.faces.memory_tool import AsyncCabrainMemoryTool, CabrainMemoryTool, MemoryFiles
from cabrain.store.db import connect
from cabrain.types import MemoryInput
from tests.conftest import brings, make_scratch_dir, start_fake

F = "/memories/notes/deploy.md"
SCRIPT = [  # (label, tool input); labels starting with "~" are compared loosely (sizes differ)
    ("~empty root", {"command": "view", "path": "/memories"}),
    ("create", {"command": "create", "path": F, "file_text": "# Deploy\nrun the migrations first\nthen roll pods\n"}),
    ("create again", {"command": "create", "path": F, "file_text": "other"}),
    ("create over a directory", {"command": "create", "path": "/memories/notes", "file_text": "x"}),
    ("view file", {"command": "view", "path": F}),
    ("view range", {"command": "view", "path": F, "view_range": [2, -1]}),
    ("view range head", {"command": "view", "path": F, "view_range": [1, 2]}),
    ("replace", {"command": "str_replace", "path": F, "old_str": "roll pods", "new_str": "roll the pods slowly"}),
    ("replace missing", {"command": "str_replace", "path": F, "old_str": "zzz", "new_str": "y"}),
    ("create dup", {"command": "create", "path": "/memories/notes/dup.md", "file_text": "same\nsame\n"}),
    ("replace twice", {"command": "str_replace", "path": "/memories/notes/dup.md", "old_str": "same", "new_str": "x"}),
    ("insert", {"command": "insert", "path": F, "insert_line": 1, "insert_text": "check the backups\n"}),
    ("insert at end", {"command": "insert", "path": F, "insert_line": 4, "insert_text": "done"}),
    ("insert out of range", {"command": "insert", "path": F, "insert_line": 99, "insert_text": "x"}),
    ("insert negative", {"command": "insert", "path": F, "insert_line": -1, "insert_text": "x"}),
    ("view after edits", {"command": "view", "path": F}),
    ("~root listing", {"command": "view", "path": "/memories"}),
    ("escape", {"command": "view", "path": "/memories/../etc/passwd"}),
    ("outside", {"command": "view", "path": "/etc/passwd"}),
    ("missing", {"command": "view", "path": "/memories/nope.md"}),
    ("replace in missing", {"command": "str_replace", "path": "/memories/nope.md", "old_str": "a", "new_str": "b"}),
    ("insert in missing", {"command": "insert", "path": "/memories/nope.md", "insert_line": 0, "insert_text": "a"}),
    ("replace in a directory", {"command": "str_replace", "path": "/memories/notes", "old_str": "a", "new_str": "b"}),
    ("rename", {"command": "rename", "old_path": F, "new_path": "/memories/archive/deploy.md"}),
    (
        "rename onto existing",
        {"command": "rename", "old_path": "/memories/notes/dup.md", "new_path": "/memories/archive/deploy.md"},
    ),
    ("rename missing", {"command": "rename", "old_path": "/memories/nope.md", "new_path": "/memories/x.md"}),
    ("rename root", {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"}),
    ("view renamed", {"command": "view", "path": "/memories/archive/deploy.md"}),
    ("view old name", {"command": "view", "path": F}),
    ("delete", {"command": "delete", "path": "/memories/notes/dup.md"}),
    ("delete again", {"command": "delete", "path": "/memories/notes/dup.md"}),
    ("delete root", {"command": "delete", "path": "/memories"}),
    ("rename directory", {"command": "rename", "old_path": "/memories/archive", "new_path": "/memories/old"}),
    ("view moved", {"command": "view", "path": "/memories/old/deploy.md"}),
    ("delete directory", {"command": "delete", "path": "/memories/old"}),
    ("view deleted directory", {"command": "view", "path": "/memories/old"}),
]


@pytest.fixture(scope="module")
@brings("subprocess")
def messages_api():
    proc, port = start_fake("anthropic_server")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def run_through_sdk(api: str, tool, calls: list[dict]) -> list[dict]:
    """Let the SDK's runner play ``calls`` against ``tool``; the tool results it sent back."""
    httpx.post(f"{api}/_script", json={"tool": "memory", "calls": calls}).raise_for_status()
    client = anthropic.Anthropic(base_url=api, api_key="test-key", max_retries=0)
    runner = client.beta.messages.tool_runner(
        model="claude-test",
        max_tokens=1024,
        tools=[tool],
        messages=[{"role": "user", "content": "Tidy up my deploy notes."}],
    )
    final = runner.until_done()
    assert final.stop_reason == "end_turn"
    return httpx.get(f"{api}/_log").json()


def _text(result: dict) -> str:
    content = result["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


async def _key(dsn: str, agent: str, namespace: str) -> str:
    conn = await connect(dsn)
    try:
        await identity.create_agent(conn, agent)
        await conn.execute("INSERT INTO namespaces (name, owner_agent_id) VALUES ($1, $2)", namespace, agent)
        return (await identity.create_key(conn, agent)).key
    finally:
        await conn.close()


async def test_every_command_matches_the_reference_implementation(messages_api, db_dsn, settings_for) -> None:
    key = await _key(db_dsn, "claude", "proj")
    calls = [c for _, c in SCRIPT]
    reference = run_through_sdk(messages_api, BetaLocalFilesystemMemoryTool(str(make_scratch_dir("memtool-"))), calls)
    with CabrainMemoryTool.on_database(settings_for(db_dsn), key, "proj") as tool:
        ours = run_through_sdk(messages_api, tool, calls)
    assert len(ours) == len(reference) == len(SCRIPT)
    for (label, _), mine, theirs in zip(SCRIPT, ours, reference, strict=True):
        assert mine["is_error"] == theirs["is_error"], (label, _text(mine), _text(theirs))
        if label.startswith("~"):
            assert _text(mine).splitlines()[0] == _text(theirs).splitlines()[0], label  # same header
        else:
            assert _text(mine) == _text(theirs), label
    listing = _text(ours[[label for label, _ in SCRIPT].index("~root listing")])
    assert "/memories/notes/\n" in listing + "\n" and "/memories/notes/deploy.md" in listing


async def test_edits_are_versions_and_delete_is_forget(messages_api, open_brain, db_dsn) -> None:
    brain = await open_brain()
    await brain.create_agent("claude")
    await brain.create_namespace("claude", "proj")
    files = MemoryFiles(BrainBackend(brain, "claude"), "proj")
    tool = AsyncCabrainMemoryTool(files)
    client = anthropic.AsyncAnthropic(base_url=messages_api, api_key="test-key", max_retries=0)
    calls = [
        {"command": "create", "path": "/memories/prefs.md", "file_text": "tabs\n"},
        {"command": "str_replace", "path": "/memories/prefs.md", "old_str": "tabs", "new_str": "spaces"},
        {"command": "insert", "path": "/memories/prefs.md", "insert_line": 1, "insert_text": "4 wide"},
        {"command": "rename", "old_path": "/memories/prefs.md", "new_path": "/memories/style.md"},
        {"command": "view", "path": "/memories/.search/indentation spaces"},
        {"command": "delete", "path": "/memories/style.md"},
        {"command": "view", "path": "/memories/.search/"},
    ]
    async with httpx.AsyncClient() as http:
        (await http.post(f"{messages_api}/_script", json={"tool": "memory", "calls": calls})).raise_for_status()
        runner = client.beta.messages.tool_runner(
            model="claude-test", max_tokens=1024, tools=[tool], messages=[{"role": "user", "content": "hi"}]
        )
        await runner.until_done()
        log = (await http.get(f"{messages_api}/_log")).json()
    assert [r["is_error"] for r in log] == [False] * 6 + [True]
    search = _text(log[4])
    assert "spaces" in search and "from /memories/style.md" in search and "by claude" in search

    conn = await connect(db_dsn)
    try:
        rows = await conn.fetch(
            "SELECT id, content, source_ref, invalid_at, superseded_by FROM memories "
            "WHERE source_kind = 'memory_file' ORDER BY created_at"
        )
    finally:
        await conn.close()
    assert [r["content"] for r in rows] == ["tabs\n", "spaces\n", "spaces\n4 wide\n", "spaces\n4 wide\n"]
    assert [r["source_ref"] for r in rows] == ["/memories/prefs.md"] * 3 + ["/memories/style.md"]
    assert all(r["invalid_at"] is not None for r in rows)  # every version kept; the last one forgotten
    assert [r["superseded_by"] for r in rows[:-1]] == [r["id"] for r in rows[1:]]
    history = await brain.get("claude", rows[-1]["id"])
    assert [m.content for m in history.previous] == ["tabs\n", "spaces\n", "spaces\n4 wide\n"]


@pytest.mark.subprocess
async def test_the_example_runs_against_the_messages_api(messages_api, db_dsn, home) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env

    key = await _key(db_dsn, "example", "demo")
    calls = [{"command": "create", "path": "/memories/deploys.md", "file_text": "staging deploys on Tuesdays\n"}]
    httpx.post(f"{messages_api}/_script", json={"tool": "memory", "calls": calls}).raise_for_status()
    env = {
        **cli_env(database_url=db_dsn, home=str(home), api_key=key),
        "ANTHROPIC_BASE_URL": messages_api,
        "ANTHROPIC_API_KEY": "test-key",
    }
    done = subprocess.run(
        [sys.executable, "examples/memory_tool.py", "--model", "claude-test", "--namespace", "demo", "remember"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Done." in done.stdout and "[memory create /memories/deploys.md]" in done.stderr
    conn = await connect(db_dsn)
    try:
        stored = await conn.fetchval("SELECT content FROM memories WHERE source_ref = '/memories/deploys.md'")
    finally:
        await conn.close()
    assert stored == "staging deploys on Tuesdays\n"


async def test_a_file_survives_any_number_of_sleep_cycles_and_one_archived_before_pins_comes_back(
    open_brain, db_dsn, settings_for
) -> None:
    from anthropic.types.beta import BetaMemoryTool20250818CreateCommand, BetaMemoryTool20250818ViewCommand

    from cabrain.sleep.cycle import run_cycle

    brain = await open_brain()
    await brain.create_agent("claude")
    await brain.create_namespace("claude", "proj")
    files = MemoryFiles(BrainBackend(brain, "claude"), "proj")
    await files.create(BetaMemoryTool20250818CreateCommand(command="create", path="/memories/new.md", file_text="x\n"))
    # files written 400 days ago: keep.md as the tool writes them now (pinned), old.md as it did before pins
    long_ago = datetime.now(UTC) - timedelta(days=400)
    for path, pinned in (("/memories/keep.md", True), ("/memories/old.md", False)):
        await brain.retain(
            "claude",
            MemoryInput(
                f"deploy on tuesdays ({path})\n",
                "proj",
                source_kind="memory_file",
                source_ref=path,
                important=pinned,
                valid_at=long_ago,
            ),
            decide=False,
        )
    conn = await connect(db_dsn)
    try:  # never read since, low importance: what a default cycle archives
        await conn.execute(
            "UPDATE memories SET created_at = now() - interval '400 days', importance = 0.3, "
            "last_accessed_at = NULL WHERE source_ref <> '/memories/new.md'"
        )
        assert await conn.fetchval("SELECT pinned FROM memories WHERE source_ref = '/memories/new.md'")
    finally:
        await conn.close()
    settings = settings_for(db_dsn, sleep_demote_after_days=30)
    for _ in range(3):
        assert (await run_cycle(settings, db_dsn, namespaces=["proj"], use_ray=False)).status == "done"
    hot = {m.source_ref: m for m in await brain.list_memories("claude", "proj", source_kind="memory_file")}
    assert set(hot) == {"/memories/keep.md", "/memories/new.md"}  # old.md was archived, as it was before pins
    assert hot["/memories/keep.md"].importance >= settings.sleep_decay_pinned_floor - 1e-6 or hot[
        "/memories/keep.md"
    ].importance == pytest.approx(0.3)  # never decayed below where it stood

    listing = await files.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories"))
    assert "/memories/old.md" in listing and "/memories/keep.md" in listing  # nothing vanished
    back = {m.source_ref: m for m in await brain.list_memories("claude", "proj", source_kind="memory_file")}
    assert back["/memories/old.md"].tier == "hot" and back["/memories/old.md"].id  # back, with its own id
    shown = await files.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/old.md"))
    assert "deploy on tuesdays" in shown
    await brain.engine.bookkeeper.close()  # the view's access is written
    seen = (await brain.get("claude", back["/memories/old.md"].id)).memory
    assert seen.access_count >= 1 and seen.last_accessed_at is not None
    assert (await run_cycle(settings, db_dsn, namespaces=["proj"], use_ray=False)).status == "done"
    again = {m.source_ref for m in await brain.list_memories("claude", "proj", source_kind="memory_file")}
    assert again == {"/memories/keep.md", "/memories/new.md", "/memories/old.md"}  # and it stays: pinned now
