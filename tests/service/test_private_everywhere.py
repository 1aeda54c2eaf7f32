"""Another agent's private memory, on every surface (issue 31): an agent plants private memories in
every namespace of this test (hot, archived by a real sleep run, a contradiction that becomes an
event, entities they mention), and no surface returns them to anyone else: not its namespace's
owner, not a reader, not an admin. Recall (each mode), archive recall, get, judgments, the
provenance listing, entities and one entity, export, an import's report and a write's decision,
the event stream, the outbox, every console page that shows memories and the graph, and the MCP
tools. The marker is a made-up word, so any answer that holds it holds a planted memory."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from playwright.async_api import Browser

from cabrain.sleep.cycle import run_cycle
from cabrain.types import MemoryInput, Visibility
from tests.mcp_helpers import call, call_error, http_session
from tests.service.conftest import Service, sign_in

MARK = f"Zorblax{uuid.uuid4().hex[:6]}"
QUERY = "quantum llama offsite Yusuf Jeddah March"  # words of the planted memories, not the marker
HOT, ARCHIVED = "private/hot", "private/archived"
READERS = ("alice", "bob", "admin")  # the namespaces' owner, a reader, an admin
SECRETS = [
    f"{MARK} leads the quantum llama project with Yusuf from Jeddah.",
    f"The {MARK} offsite is on March 3.",
    f"The {MARK} offsite on March 3 has been cancelled.",
]


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def _clean(what: str, text: str, planted: list[str]) -> None:
    assert MARK not in text, f"{what} shows a planted private memory"
    for memory_id in planted:
        assert memory_id not in text, f"{what} names a planted private memory ({memory_id})"


@pytest.fixture(scope="module")
async def planted(service: Service) -> list[str]:
    """``planter``'s private memories in both namespaces (and its team one, which readers see), the
    archived namespace's demoted by a real sleep run."""
    with service.client("admin") as admin:
        key = _ok(admin.post("/v1/agents", json={"id": "planter"}), 201)["key"]
    service.keys["planter"] = key
    ids: list[str] = []
    with service.client("alice") as alice, service.client("planter") as planter:
        for namespace in (HOT, ARCHIVED):
            _ok(alice.post("/v1/namespaces", json={"name": namespace}), 201)
            _ok(alice.post("/v1/grants", json={"namespace": namespace, "agent": "planter", "can_write": True}))
            _ok(planter.post("/v1/grants/accept", json={"namespace": namespace}))
            _ok(alice.post("/v1/grants", json={"namespace": namespace, "agent": "bob"}))
            _ok(
                planter.post(
                    "/v1/memories",
                    json={
                        "content": "The quantum llama project ships its demo in May.",
                        "namespace": namespace,
                        "visibility": "team",
                    },
                )
            )
        for text in SECRETS:  # the third retracts the second (and is not stored): a judgment, and an event
            written = _ok(planter.post("/v1/memories", json={"content": text, "namespace": HOT}))
            if written["memory_id"] is not None:
                ids.append(written["memory_id"])
    with service.api("planter") as client:
        old = datetime.now(UTC) - timedelta(days=90)
        items = [MemoryInput(text, ARCHIVED, visibility=Visibility.PRIVATE, valid_at=old) for text in SECRETS[:2]]
        items.append(
            MemoryInput(
                "The quantum llama offsite moved to Jeddah.", ARCHIVED, visibility=Visibility.TEAM, valid_at=old
            )
        )
        results = client.retain_batch(items, decide=False)
        ids += [str(r.memory_id) for r in results[:2]]
    conn = await asyncpg.connect(service.dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '90 days' WHERE namespace = $1", ARCHIVED)
        events = await conn.fetchval("SELECT count(*) FROM notify_events WHERE namespace = $1", HOT)
    finally:
        await conn.close()
    assert events >= 1  # the retraction is an event, about private memories
    settings = service.settings.model_copy(update={"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0})
    report = await run_cycle(settings, service.dsn, namespaces=[ARCHIVED], steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] >= 3
    return ids


def test_the_api_returns_no_planted_memory(service: Service, planted: list[str]) -> None:
    for reader in READERS:
        with service.client(reader) as client:
            for namespace in (HOT, ARCHIVED):
                for mode in ("hybrid", "vector", "bm25"):
                    found = _ok(client.post("/v1/recall", json={"query": QUERY, "namespace": namespace, "mode": mode}))
                    assert found["hits"], f"{reader} reads the team memory of {namespace}"  # the surface works
                    _clean(f"{reader}'s {mode} recall in {namespace}", json.dumps(found), planted)
                listed = client.get("/v1/memories", params={"namespace": namespace, "include_archived": True})
                _clean(f"{reader}'s listing of {namespace}", listed.text, planted)
                entities = client.get("/v1/entities", params={"namespace": namespace})
                _clean(f"{reader}'s entities of {namespace}", entities.text, planted)
                entity = client.get(f"/v1/entities/{MARK}", params={"namespace": namespace, "history": True})
                assert entity.status_code == 404, entity.text
                events = client.get("/v1/events", params={"namespace": namespace, "seconds": 0.5})
                _clean(f"{reader}'s event stream of {namespace}", events.text, planted)
            archive = _ok(client.post("/v1/recall/archive", json={"query": QUERY, "namespace": ARCHIVED}))
            assert archive["hits"], f"{reader} reads the archived team memory"
            _clean(f"{reader}'s archive recall", json.dumps(archive), planted)
            for memory_id in planted:
                assert client.get(f"/v1/memories/{memory_id}").status_code == 404
                assert client.get(f"/v1/memories/{memory_id}/judgments").status_code == 404
            overview = client.get("/v1/overview")
            _clean(f"{reader}'s overview", overview.text, planted)
            everything = client.get("/v1/events", params={"seconds": 0.5})
            _clean(f"{reader}'s event stream", everything.text, planted)
            _ok(client.post("/v1/subscriptions", json={"subscriber": reader, "kinds": ["contradiction", "stale"]}), 201)
            _clean(f"{reader}'s outbox", client.get("/v1/outbox").text, planted)
        if reader != "bob":  # the namespaces' owner and an admin export them
            with service.client(reader) as client:
                exported = client.get("/v1/export", params={"namespace": [HOT, ARCHIVED]})
                assert exported.status_code == 200 and "quantum llama project ships" in exported.text
                _clean(f"{reader}'s export", exported.text, planted)


async def test_the_mcp_tools_return_no_planted_memory(service: Service, planted: list[str]) -> None:
    for reader in READERS:
        async with http_session(service.url, service.keys[reader]) as session:
            found = await call(session, "memory_recall", query=QUERY, namespace=HOT)
            _clean(f"{reader}'s memory_recall", json.dumps(found), planted)
            archive = await call(session, "memory_recall_archive", query=QUERY, namespace=ARCHIVED)
            _clean(f"{reader}'s memory_recall_archive", json.dumps(archive), planted)
            entities = await call(session, "memory_entities", namespace=HOT)
            _clean(f"{reader}'s memory_entities", json.dumps(entities), planted)
            for memory_id in planted:
                assert "does not exist" in await call_error(session, "memory_get", memory_id=memory_id)
                said = await call_error(session, "memory_judgments", memory_id=memory_id)
                _clean(f"{reader}'s memory_judgments", said, [])


async def test_the_console_shows_no_planted_memory(service: Service, planted: list[str], browser: Browser) -> None:
    for reader in READERS:
        page = await sign_in(browser, service, reader)
        pages = [
            f"/console/memories?namespace={HOT}",
            f"/console/memories?namespace={ARCHIVED}&archived=yes",
            f"/console/recall?namespace={HOT}&q={QUERY.replace(' ', '+')}",
            f"/console/recall?namespace={ARCHIVED}&q={QUERY.replace(' ', '+')}&archive=yes",
            f"/console/entities?namespace={HOT}",
            f"/console/entity?namespace={HOT}&name=Yusuf",
            f"/console/graph.json?namespace={HOT}&entity=Yusuf",
            "/console/capture",
            "/console/capture.json",
            "/console/sleep",
            "/console/pushes",
            "/console/actions",
            "/console/overview",
            f"/console/overview?namespace={HOT}",
            f"/console/memories?namespace={HOT}&q={QUERY.replace(' ', '+')}",
            "/console/health",
            *(f"/console/memories/{memory_id}" for memory_id in planted),
        ]
        for path in pages:
            answer = await page.request.get(service.url + path)
            assert answer.status in (200, 404), f"{reader} {path}: {answer.status}"
            _clean(f"{reader}'s console {path}", await answer.text(), planted if "/memories/" not in path else [])
        await page.context.close()


def test_a_write_and_an_import_tell_nothing_of_a_planted_memory(service: Service, planted: list[str]) -> None:
    """alice writes and imports the very texts planter keeps private in a namespace of alice's: her
    copies are new, not NOOPs or duplicates of what she may not read. In a namespace of this test's own
    (with a marker of its own), so what alice then reads as hers leaves the other tests' namespaces
    as they were, whatever order they run in."""
    mark = f"Quorvex{uuid.uuid4().hex[:6]}"
    texts = [text.replace(MARK, mark) for text in SECRETS[:2]]
    namespace = "private/written"
    with service.client("alice") as alice, service.client("planter") as planter:
        _ok(alice.post("/v1/namespaces", json={"name": namespace}), 201)
        _ok(alice.post("/v1/grants", json={"namespace": namespace, "agent": "planter", "can_write": True}))
        _ok(planter.post("/v1/grants/accept", json={"namespace": namespace}))
        hidden = [
            _ok(planter.post("/v1/memories", json={"content": t, "namespace": namespace}))["memory_id"] for t in texts
        ]
        assert all(hidden)
        same = _ok(alice.post("/v1/memories", json={"content": texts[0], "namespace": namespace}))
        assert same["decision"] == "ADD"  # not NOOP against a memory alice may not read
        assert not [i for i in hidden if i in json.dumps(same)]  # its entities are its own text's, named anew
        report = _ok(
            alice.post(
                "/v1/import", params={"format": "markdown", "namespace": namespace}, content=f"# Notes\n\n{texts[1]}\n"
            )
        )
        assert report["added"] == 1 and report["duplicates"] == 0 and report["retracted"] == 0
        _clean("an import's report", json.dumps(report), hidden)
        assert mark not in json.dumps(report)
