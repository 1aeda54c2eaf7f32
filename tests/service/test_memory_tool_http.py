"""The memory-tool backend through the service's HTTP API (CabrainMemoryTool.connect)."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from cabrain.faces.memory_tool import CabrainMemoryTool
from tests.conftest import brings, start_fake
from tests.service.conftest import Service


@pytest.fixture(scope="module")
@brings("subprocess")
def messages_api():
    proc, port = start_fake("anthropic_server")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def test_memory_files_live_in_the_service(service: Service, messages_api: str) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": "memtool"}).status_code == 201
    calls = [
        {"command": "create", "path": "/memories/team.md", "file_text": "standup at 09:30\n"},
        {"command": "str_replace", "path": "/memories/team.md", "old_str": "09:30", "new_str": "10:00"},
        {"command": "view", "path": "/memories/team.md"},
        {"command": "view", "path": "/memories/.search/when is standup"},
        {"command": "create", "path": "/memories/../../etc/x", "file_text": "x"},
    ]
    httpx.post(f"{messages_api}/_script", json={"tool": "memory", "calls": calls}).raise_for_status()
    with CabrainMemoryTool.connect(service.url, service.keys["alice"], "memtool") as tool:
        client = anthropic.Anthropic(base_url=messages_api, api_key="test-key", max_retries=0)
        client.beta.messages.tool_runner(
            model="claude-test", max_tokens=512, tools=[tool], messages=[{"role": "user", "content": "standup?"}]
        ).until_done()
    log = httpx.get(f"{messages_api}/_log").json()
    texts = [r["content"] if isinstance(r["content"], str) else r["content"][0]["text"] for r in log]
    assert [r["is_error"] for r in log] == [False, False, False, False, True]
    assert "     1\tstandup at 10:00" in texts[2]
    assert "standup at 10:00" in texts[3] and "from /memories/team.md" in texts[3] and "by alice" in texts[3]
    assert "would escape /memories" in texts[4]
    with service.client("bob") as bob:  # alice's files are hers: bob cannot see them
        assert bob.get("/v1/memories", params={"namespace": "memtool"}).json()["memories"] == []
