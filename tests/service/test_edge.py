"""The edge guard (issue 31, finding 13): every bad value of the finding, sent through the running
service, answers a 4xx JSON error - never a 500 - and nothing of it is stored or counted.

Each request carries a marker; after them all, no table holds it, and the usage of the agents that
sent them is what it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import LIVE_ENV
from tests.service.conftest import Service, table_texts

INT64_PAST = str(2**63)


def _raw(value: Any) -> bytes:
    """JSON as a client may send it: escapes for NUL and lone surrogates (``ensure_ascii``)."""
    return json.dumps(value, ensure_ascii=True).encode()


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"d": value}
    return value


def _client(service: Service, key: str) -> httpx.Client:
    return httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


@pytest.fixture(scope="module")
def edge_agents(service: Service) -> dict[str, Any]:
    """An admin and a member (owning a namespace) of their own, so their usage is theirs alone."""
    tag = uuid.uuid4().hex[:8]
    admin_id, member_id, namespace = f"edge-adm-{tag}", f"edge-mem-{tag}", f"edge-ns-{tag}"
    with service.client("admin") as admin:
        made = admin.post("/v1/agents", json={"id": admin_id, "is_admin": True})
        assert made.status_code == 201, made.text
        admin_key = made.json()["key"]
        made = admin.post("/v1/agents", json={"id": member_id})
        assert made.status_code == 201, made.text
        member_key = made.json()["key"]
    with _client(service, member_key) as member:
        assert member.post("/v1/namespaces", json={"name": namespace}).status_code == 201
    return {"admin": admin_key, "member": member_key, "admin_id": admin_id, "member_id": member_id, "ns": namespace}


def _cases(ns: str, mark: str, admin_id: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(who, method, path, request) for every item of finding 13."""
    memory = {"content": f"{mark} a memory", "namespace": ns}
    channel = {"kind": "webhook", "namespace": ns, "secret_env": "GATE_SLACK_SIGNING"}
    notifier = {"kind": "webhook", "config": {}, "secret_env": "GATE_SLACK_SIGNING"}
    return [
        ("member", "POST", "/v1/memories", {"body": {**memory, "metadata": {"k\x00": 1}}}),
        ("member", "POST", "/v1/memories", {"body": {**memory, "metadata": {"k": "v\x00"}}}),
        ("member", "POST", "/v1/memories", {"body": {**memory, "source_ref": "ref\x00"}}),
        ("member", "POST", "/v1/memories", {"body": {**memory, "source_kind": "kind\x00"}}),
        ("member", "POST", "/v1/memories/batch", {"body": {"items": [{**memory, "source_ref": "r\x00"}]}}),
        ("member", "POST", "/v1/capture", {"body": {"namespace": ns, "items": [{"content": f"{mark}\x00"}]}}),
        ("member", "POST", "/v1/capture", {"body": {"namespace": ns, "items": [{"content": f"{mark} \ud800"}]}}),
        ("member", "POST", "/v1/subscriptions", {"body": {"subscriber": f"{mark}\x00", "kinds": ["stale"]}}),
        (
            "member",
            "POST",
            "/v1/subscriptions",
            {"body": {"subscriber": mark, "kinds": ["stale"], "target": {"channel": "C\x00"}}},
        ),
        ("member", "POST", "/v1/grants", {"body": {"namespace": ns, "agent": "bob\x00"}}),
        ("admin", "POST", "/v1/agents", {"body": {"id": f"{mark}-a", "display_name": "Nora\x00"}}),
        ("admin", "POST", f"/v1/agents/{admin_id}/keys", {"body": {"label": f"{mark}\x00"}}),
        (
            "admin",
            "POST",
            "/v1/channels",
            {
                "body": {
                    "name": f"{mark}-ch",
                    "kind": "webhook",
                    "namespace": ns,
                    "secret_env": "GATE_SLACK_SIGNING",
                    "options": {"prefix": "bug\x00"},
                }
            },
        ),
        (
            "admin",
            "POST",
            "/v1/notifiers",
            {
                "body": {
                    "name": f"{mark}-n",
                    "kind": "webhook",
                    "config": {"base_url": "https://hooks.example.com/\x00"},
                    "secret_env": "GATE_SLACK_SIGNING",
                }
            },
        ),
        (
            "admin",
            "POST",
            "/v1/workflows/agents",
            {
                "body": {
                    "name": f"{mark}-m",
                    "layer": "local",
                    "provider": "openai",
                    "model": "qwen\x00",
                    "endpoint": "http://127.0.0.1:9/v1",
                }
            },
        ),
        ("member", "POST", "/v1/recall", {"body": {"query": "q", "namespace": ns, "source_kinds": ["a\x00"]}}),
        ("member", "POST", "/v1/recall", {"body": {"query": "q\ud800", "namespace": ns}}),
        ("member", "GET", "/v1/entities", {"params": {"namespace": ns, "q": "a\x00"}}),
        ("member", "POST", "/v1/memories", {"body": {**memory, "content": f"{mark} \udc80 lone"}}),
        ("member", "POST", "/v1/memories", {"body": {**memory, "metadata": _deep(600)}}),
        ("member", "POST", "/v1/memories", {"body": {**memory, "valid_at": "0001-01-01T00:00:00+05:00"}}),
        ("member", "POST", "/v1/memories", {"body": {**memory, "valid_at": "9999-12-31T23:00:00-05:00"}}),
        (
            "member",
            "POST",
            "/v1/recall",
            {"body": {"query": "q", "namespace": ns, "valid_to": "9999-12-31T20:00:00-10:00"}},
        ),
        ("member", "GET", "/v1/events", {"params": {"after": INT64_PAST, "seconds": "1"}}),
        ("member", "GET", "/v1/events", {"params": {"seconds": "1"}, "headers": {"Last-Event-ID": INT64_PAST}}),
        ("member", "GET", "/v1/workflows/report", {"params": {"days": str(10**9)}}),
        ("member", "POST", "/v1/namespaces", {"body": {"name": f"{mark}-ns\n"}}),
        ("admin", "POST", "/v1/agents", {"body": {"id": f"{mark}-b\n"}}),
        ("member", "POST", "/v1/memories", {"body": {**memory, "namespace": ns + "\n"}}),
        ("member", "POST", "/v1/grants", {"body": {"namespace": ns, "agent": "bob\n"}}),
        ("admin", "POST", "/v1/channels", {"body": {**channel, "name": f"{mark}-c\n"}}),
        ("admin", "POST", "/v1/notifiers", {"body": {**notifier, "name": f"{mark}-n\n"}}),
        ("member", "GET", "/v1/usage", {"params": {"until": "9999-12-31"}}),
        ("member", "GET", f"/v1/connectors/{mark}%00", {}),
    ]


def _send(client: httpx.Client, method: str, path: str, request: dict[str, Any]) -> httpx.Response:
    body = request.get("body")
    headers = dict(request.get("headers", {}))
    if body is not None:
        headers["Content-Type"] = "application/json"
    return client.request(
        method, path, params=request.get("params"), headers=headers, content=_raw(body) if body is not None else None
    )


def _refused(response: httpx.Response, where: str) -> dict[str, Any]:
    assert 400 <= response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    assert response.headers["content-type"].startswith("application/json"), where
    error = response.json()["error"]
    assert error["type"] in {"bad_request", "invalid"}, (where, error)
    return error


def _usage(admin: httpx.Client, agent: str) -> list[dict[str, Any]]:
    answer = admin.get("/v1/usage", params={"agent": agent})
    assert answer.status_code == 200, answer.text
    return sorted(answer.json()["rows"], key=json.dumps)


async def test_every_bad_value_of_finding_13_is_a_4xx_and_nothing_is_stored_or_counted(
    service: Service, edge_agents: dict[str, Any]
) -> None:
    mark = f"edgemark{uuid.uuid4().hex[:10]}"
    clients = {"admin": _client(service, edge_agents["admin"]), "member": _client(service, edge_agents["member"])}
    with service.client("admin") as admin:
        before = {who: _usage(admin, edge_agents[f"{who}_id"]) for who in clients}
        messages = []
        for who, method, path, request in _cases(edge_agents["ns"], mark, edge_agents["admin_id"]):
            where = f"{who} {method} {path} {json.dumps(request, ensure_ascii=True)[:120]}"
            messages.append(_refused(_send(clients[who], method, path, request), where)["message"])
        assert any("NUL" in m for m in messages) and any("surrogate" in m for m in messages)
        assert any("deeper" in m for m in messages) and any("64 bits" in m for m in messages)
        assert any("times CaBrain keeps" in m for m in messages) and any("line break" in m for m in messages)
        after = {who: _usage(admin, edge_agents[f"{who}_id"]) for who in clients}
        assert after == before  # nothing counted
        assert admin.get("/v1/usage").status_code == 200  # and usage accounting still answers
    for client in clients.values():
        client.close()
    stored = await table_texts(service.dsn)
    assert not [table for table, text in stored.items() if mark in text]


def _console(service: Service, key: str) -> httpx.Client:
    """A browser-like client signed in to the console with ``key`` (its sign-in form, its cookies)."""
    client = httpx.Client(base_url=service.url, timeout=60)
    form = client.get("/console/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert nonce, form.text[:500]
    signed = client.post("/console/login", data={"csrf": nonce.group(1), "key": key, "next": "/console/memories"})
    assert signed.status_code == 303, signed.text[:300]
    return client


def test_console_filters_at_the_end_of_time_are_a_4xx(service: Service, edge_agents: dict[str, Any]) -> None:
    with contextlib.closing(_console(service, edge_agents["member"])) as console:
        ns = edge_agents["ns"]
        for params in ({"namespace": ns, "to": "9999-12-31"}, {"namespace": ns, "from": "0001-01-01"}):
            answer = console.get("/console/memories", params=params)
            _refused(answer, f"console {params}")
        assert console.get("/console/memories", params={"namespace": ns, "to": "2026-12-31"}).status_code == 200


def _slack_signed(body: bytes) -> dict[str, str]:
    stamp = str(int(time.time()))
    digest = hmac.new(LIVE_ENV["GATE_SLACK_SIGNING"].encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


async def test_a_signed_channel_body_with_bad_values_is_a_4xx_and_stores_nothing(
    service: Service, edge_agents: dict[str, Any]
) -> None:
    mark = f"edgechan{uuid.uuid4().hex[:10]}"
    name = f"edge-slack-{uuid.uuid4().hex[:6]}"
    with _client(service, edge_agents["admin"]) as admin:
        channel = {"name": name, "kind": "slack", "namespace": edge_agents["ns"], "agent": edge_agents["member_id"],
                   "secret_env": "GATE_SLACK_SIGNING"}  # fmt: skip
        assert admin.post("/v1/channels", json=channel).status_code == 201
    url = f"{service.url}/v1/channels/{name}/events"
    for n, (text, user) in enumerate(
        [(f"{mark} nul \x00 here", "U0EDGE"), (f"{mark} lone \ud800", "U0EDGE"), (mark, "U0\x00EDGE")]
    ):
        event = {
            "type": "event_callback",
            "team_id": "T0001",
            "event_id": f"Ev0EDGE{n}{mark}",
            "event_time": int(time.time()),
            "event": {"type": "message", "channel": "C0EDGE", "user": user, "text": text, "ts": f"{time.time():.6f}"},
        }
        body = _raw(event)
        answer = httpx.post(url, content=body, headers={**_slack_signed(body), "Content-Type": "application/json"})
        _refused(answer, f"signed slack message {n}")
    stored = await table_texts(service.dsn)
    assert not [table for table, text in stored.items() if mark in text]


def test_docs_are_off_by_default_and_every_answer_carries_a_csp(service: Service, edge_agents: dict[str, Any]) -> None:
    """Finding 17: /docs loaded Swagger UI from a CDN, with no CSP, on the console's origin."""
    with httpx.Client(base_url=service.url, timeout=60) as anon:
        for path in ("/docs", "/redoc"):
            off = anon.get(path)
            assert off.status_code == 404 and off.json()["error"]["type"] == "not_found"
            assert "cdn" not in off.text
        for answer in (anon.get("/docs"), anon.get("/openapi.json"), anon.get("/v1/health"), anon.get("/v1/whoami")):
            csp = answer.headers.get("content-security-policy", "")
            assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp, (answer.url, csp)
        assert anon.get("/openapi.json").json()["paths"]  # the API is still described
        login = anon.get("/console/login")
        assert "script-src 'self'" in login.headers["content-security-policy"]
    refused = _send(_client(service, edge_agents["member"]), "POST", "/v1/recall", {"body": {"query": "\x00"}})
    assert "default-src 'none'" in refused.headers["content-security-policy"]
