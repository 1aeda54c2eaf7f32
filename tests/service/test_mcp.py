"""MCP through the service: streamable HTTP at /mcp, and `cabrain mcp` (stdio) in remote mode."""

from __future__ import annotations

import httpx

from tests.conftest import cli_env
from tests.mcp_helpers import call, exercise_every_tool, http_session, stdio_session
from tests.service.conftest import Service


async def _fresh_namespace(service: Service, name: str) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": name}).status_code == 201


async def test_every_tool_over_streamable_http(service: Service) -> None:
    await _fresh_namespace(service, "mcp/http")
    async with (
        http_session(service.url, service.keys["alice"]) as alice,
        http_session(service.url, service.keys["bob"]) as bob,
    ):
        await exercise_every_tool(alice, bob, "mcp/http")


async def test_every_tool_over_stdio_through_the_service(service: Service) -> None:
    await _fresh_namespace(service, "mcp/stdio")
    env = cli_env(api_url=service.url)
    async with (
        stdio_session({**env, "CABRAIN_API_KEY": service.keys["alice"]}) as alice,
        stdio_session({**env, "CABRAIN_API_KEY": service.keys["bob"]}) as bob,
    ):
        await exercise_every_tool(alice, bob, "mcp/stdio")


async def test_mcp_endpoint_needs_a_valid_key(service: Service) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with httpx.Client(base_url=service.url) as anon:
        missing = anon.post("/mcp", json=body, headers=headers)
        assert missing.status_code == 401 and missing.json()["error"]["type"] == "unauthenticated"
        wrong = anon.post("/mcp", json=body, headers={**headers, "Authorization": "Bearer cbk_" + "y" * 43})
        assert wrong.status_code == 401
        assert anon.get("/mcp").status_code == 401
        # a stateless endpoint opens no event stream: a GET is answered with a whole body, never held open
        stream = anon.get(
            "/mcp",
            headers={"accept": "text/event-stream", "Authorization": f"Bearer {service.keys['carol']}"},
            timeout=120,
        )
        assert stream.status_code == 405 and stream.json()["error"]["type"] == "method_not_allowed"
        assert "POST" in stream.headers["allow"]
    async with http_session(service.url, service.keys["carol"]) as carol:
        result = await call(carol, "memory_recall", query="anything", namespace="proj")
        assert result["hits"] == []  # carol has no grant on proj: an empty answer, never another's memory
