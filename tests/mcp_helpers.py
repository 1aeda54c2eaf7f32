"""Driving CaBrain's MCP tools with the real MCP SDK client, over stdio or streamable HTTP."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from mcp import ClientSession

from tests.conftest import REPO

TOOLS = {
    "memory_retain",
    "memory_recall",
    "memory_recall_archive",
    "memory_get",
    "memory_forget",
    "memory_share",
    "memory_reconsolidate",
    "memory_namespaces",
    "memory_create_namespace",
    "memory_entities",
    "memory_entity",
    "memory_entity_rename",
    "memory_entity_merge",
    "memory_judgments",
    "memory_revert",
    "memory_correct",
    "memory_restore",
    "workflow_dispatch",
}
# What an MCP client must never be told to do: call CaBrain's Python, or use another surface's route or command.
OTHER_SURFACES = ("Brain.", "brain.", "POST /v1", "cabrain namespaces --create")


@contextlib.asynccontextmanager
async def stdio_session(env: dict[str, str]) -> AsyncIterator[ClientSession]:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "cabrain.cli", "mcp"], env=env, cwd=str(REPO))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def http_session(url: str, key: str | None) -> AsyncIterator[ClientSession]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured result."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def call_error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; the tool error's text."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result
    return " ".join(c.text for c in result.content if hasattr(c, "text"))


async def exercise_every_tool(owner: ClientSession, other: ClientSession, namespace: str) -> None:
    """The whole tool set, with scoping: ``owner`` owns ``namespace``; ``other`` has no grant."""
    assert {t.name for t in (await owner.list_tools()).tools} == TOOLS
    team = await call(
        owner,
        "memory_retain",
        content="We decided to ship the mobile app on Flutter because one codebase serves both stores.",
        namespace=namespace,
        visibility="team",
        network="fact",
        source_ref="adr-7",
    )
    assert team["decision"] == "ADD"
    private = await call(owner, "memory_retain", content="My locker code is 4711.", namespace=namespace)
    found = await call(owner, "memory_recall", query="what did we decide about the mobile app?", namespace=namespace)
    assert found["entities"] == []  # no sleep run has summarised anything yet (tests/service/test_entities.py)
    top = found["hits"][0]
    assert top["id"] == team["memory_id"] and top["source_ref"] == "adr-7" and top["owner"]
    got = await call(owner, "memory_get", memory_id=team["memory_id"])
    assert got["memory"]["content"].startswith("We decided")

    # namespaces: the caller's own, a new one, and the fix for writing where none exists, in tool terms
    listed = {n["name"]: n for n in (await call(owner, "memory_namespaces"))["namespaces"]}
    assert listed[namespace]["access"] == "owner" and listed[namespace]["pending_offer"] is None
    made = f"{namespace}/made-over-mcp"
    assert (await call(owner, "memory_create_namespace", namespace=made))["created"] is True
    assert (await call(owner, "memory_create_namespace", namespace=made))["created"] is False  # idempotent
    assert "already exists" in await call_error(other, "memory_create_namespace", namespace=made)
    assert "personal to agent 'alice'" in await call_error(other, "memory_create_namespace", namespace="@alice/x")
    assert made in {n["name"] for n in (await call(owner, "memory_namespaces"))["namespaces"]}
    missing = await call_error(owner, "memory_retain", content="a note", namespace=f"{namespace}/missing")
    assert "does not exist" in missing and f'memory_create_namespace with namespace="{namespace}/missing"' in missing
    assert not any(s in missing for s in OTHER_SURFACES), missing

    # entities: what the namespace's memories mention, scoped like them
    entities = {e["name"]: e for e in (await call(owner, "memory_entities", namespace=namespace))["entities"]}
    assert "Flutter" in entities and entities["Flutter"]["summary"] is None
    flutter = await call(owner, "memory_entity", namespace=namespace, name="flutter")
    assert [m["id"] for m in flutter["memories"]] == [team["memory_id"]]
    assert "not visible" in await call_error(other, "memory_entities", namespace=namespace)
    assert "not visible" in await call_error(other, "memory_entity", namespace=namespace, name="Flutter")
    assert "memory_entities with namespace=" in await call_error(
        owner, "memory_entity", namespace=namespace, name="No Such Thing"
    )

    # scoping: no grant, nothing readable or writable
    denied = await call_error(other, "memory_retain", content="sneaky", namespace=namespace)
    assert "may not write" in denied and "memory_share" in denied and not any(s in denied for s in OTHER_SURFACES)
    assert "does not exist or is not visible" in await call_error(other, "memory_get", memory_id=team["memory_id"])
    assert (await call(other, "memory_recall", query="mobile app decision", namespace=namespace))["hits"] == []
    assert "may not share" in await call_error(other, "memory_share", namespace=namespace, agent="alice")

    whoami_other = "bob"
    await call(owner, "memory_share", namespace=namespace, agent=whoami_other)
    shared = await call(other, "memory_recall", query="mobile app decision", namespace=namespace)
    assert [h["id"] for h in shared["hits"]] == [team["memory_id"]]  # the team memory, never the private one
    assert private["memory_id"] not in json.dumps(shared)
    offered = {n["name"]: n for n in (await call(other, "memory_namespaces"))["namespaces"]}[namespace]
    assert offered["access"] == "read" and offered["pending_offer"] == {
        "can_read": True,
        "can_write": False,
        "by": offered["owner"],
    }
    assert [
        e["name"] for e in (await call(other, "memory_entities", namespace=namespace, query="flut"))["entities"]
    ] == ["Flutter"]

    fixed = await call(
        owner,
        "memory_reconsolidate",
        memory_id=team["memory_id"],
        corrected_content="We decided to ship the mobile app natively (Swift and Kotlin).",
        reason="Flutter plugin gaps",
    )
    assert fixed["decision"] == "UPDATE" and fixed["superseded"] == [team["memory_id"]]
    history = await call(owner, "memory_get", memory_id=fixed["memory_id"])
    assert [m["id"] for m in history["previous"]] == [team["memory_id"]]
    await _as_of_and_dialogue(owner, namespace, team["memory_id"], fixed["memory_id"], got["memory"]["valid_at"])

    # judgments: why the memory changed, and undoing it (writers only), then undoing the undo
    [why] = (await call(owner, "memory_judgments", memory_id=team["memory_id"]))["judgments"]
    assert (why["kind"], why["origin"]) == ("supersede", "correction") and "Flutter plugin gaps" in why["reason"]
    assert "may not write" in await call_error(other, "memory_revert", memory_id=team["memory_id"])
    undo = await call(owner, "memory_revert", memory_id=team["memory_id"], reason="keep both for now")
    assert undo["reverts"] == why["id"] and undo["kind"] == "revert"
    assert (await call(owner, "memory_get", memory_id=team["memory_id"]))["memory"]["invalid_at"] is None
    assert "already reverted" in await call_error(owner, "memory_revert", judgment_id=why["id"])
    redo = await call(owner, "memory_revert", judgment_id=undo["id"])
    assert redo["reverts"] == undo["id"]
    assert (await call(owner, "memory_get", memory_id=team["memory_id"]))["memory"]["superseded_by"] == fixed[
        "memory_id"
    ]
    assert "not both" in await call_error(owner, "memory_revert")
    gone = await call(owner, "memory_forget", memory_id=private["memory_id"], reason="not for memory")
    assert gone["forgotten"] == private["memory_id"] and gone["invalid_at"]

    # bad arguments are tool errors, not text results
    await call_error(owner, "memory_recall", query="x", namespace=namespace, k=0)
    await call_error(owner, "memory_retain", content="", namespace=namespace)
    assert "not a memory id" in await call_error(owner, "memory_get", memory_id="not-a-uuid")
    assert "does not exist" in await call_error(owner, "memory_recall", query="x", namespace="nowhere")
    long_thread = await call_error(owner, "memory_retain", content="a turn", namespace=namespace, thread="x" * 201)
    assert "thread" in long_thread, long_thread
    blank = await call_error(owner, "memory_retain", content="a turn", namespace=namespace, thread="   ")
    assert "metadata.thread must be a non-empty string" in blank, blank
    turn = await call(
        owner,
        "memory_retain",
        content="Maria: Three times a week.",
        namespace=namespace,
        thread="chat",
        speaker="Maria",
    )
    assert turn["decision"] == "ADD"

    # the archive: nothing was demoted here yet (tests/service/test_archive.py demotes and finds)
    archive = await call(owner, "memory_recall_archive", query="mobile app decision", namespace=namespace)
    assert archive == {"hits": [], "scanned": 0}
    assert "does not exist" in await call_error(owner, "memory_recall_archive", query="x", namespace="nowhere")
    assert "valid_from must be before valid_to" in await call_error(
        owner,
        "memory_recall_archive",
        query="x",
        namespace=namespace,
        valid_from="2026-02-01T00:00:00Z",
        valid_to="2026-01-01T00:00:00Z",
    )


async def _as_of_and_dialogue(owner: ClientSession, namespace: str, old: str, new: str, old_since: str) -> None:
    """``as_of`` on memory_recall and memory_get, ``context`` on memory_recall (issue 34): ``new``
    corrected ``old``, which was true from ``old_since``."""
    question = "what did we decide about the mobile app?"
    then = await call(owner, "memory_recall", query=question, namespace=namespace, as_of=old_since)
    assert old in [h["id"] for h in then["hits"]] and new not in [h["id"] for h in then["hits"]]
    now = await call(owner, "memory_recall", query=question, namespace=namespace)
    assert now["hits"][0]["id"] == new and old not in [h["id"] for h in now["hits"]]
    assert (await call(owner, "memory_get", memory_id=new, as_of=old_since))["memory"]["id"] == old
    before = await call_error(owner, "memory_get", memory_id=new, as_of="2001-01-01T00:00:00Z")
    assert "was current at 2001-01-01" in before, before
    assert (await call(owner, "memory_recall", query=question, namespace=namespace, as_of="2001-01-01"))["hits"] == []
    talk = ["Hi! Quick question about the apps.", "Sure, go ahead."]
    answered = await call(owner, "memory_recall", query=question, namespace=namespace, context=talk)
    assert answered["hits"][0]["id"] == new
    assert "as_of" in await call_error(owner, "memory_recall", query="x", namespace=namespace, as_of="next tuesday")
    assert "context" in await call_error(owner, "memory_recall", query="x", namespace=namespace, context=["t"] * 21)
    nul = await call_error(owner, "memory_recall", query="x", namespace=namespace, context=["ok", "a\x00b"])
    assert "NUL" in nul, nul
