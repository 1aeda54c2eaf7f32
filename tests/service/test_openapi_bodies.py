"""What the API sends is what its OpenAPI document says: a representative call per route, each answer
validated against the app's own ``/openapi.json`` by the service client (``openapi_check``: required
fields present, no field the document does not name, types right); when the whole directory ran,
the service fixture checks as it stops that every route answering JSON had a success validated
(tests/service/conftest.py). And errors round trip: the API answers each with its
class's status and kind, and the Python client raises that class again."""

from __future__ import annotations

import asyncio
import urllib.parse
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from cabrain import errors
from cabrain.client import Client
from cabrain.sleep.cycle import run_cycle
from tests.service.conftest import Service

NS = "openapi/bodies"
OLD = "openapi/old"
TASK = "Extract the invoice number, total and currency as JSON: invoice 5151 from Acme totals 20.00 EUR."


def _ok(response: httpx.Response, status: int = 200) -> dict:
    assert response.status_code == status, response.text
    return response.json()


@pytest.fixture(scope="module")
def bodies(service: Service) -> str:
    """Alice's namespace the documented bodies write to, whichever test of the module runs first."""
    with service.client("alice") as alice:
        made = alice.post("/v1/namespaces", json={"name": NS})
        assert made.status_code in (200, 201), made.text
    return NS


def test_memories_namespaces_and_grants_answer_as_documented(service: Service, bodies: str) -> None:
    with (
        service.client(None) as anon,
        service.client("alice") as alice,
        service.client("bob") as bob,
    ):
        _ok(anon.get("/v1/health"))
        _ok(anon.get("/v1/ready"))
        _ok(alice.get("/v1/whoami"))
        fresh = f"openapi/fresh-{uuid.uuid4().hex[:8]}"
        _ok(alice.post("/v1/namespaces", json={"name": fresh}), 201)
        _ok(alice.post("/v1/namespaces", json={"name": fresh}))  # hers already: 200
        one = _ok(
            alice.post(
                "/v1/memories",
                json={
                    "content": "Valkey runs the job queue of the billing service.",
                    "namespace": NS,
                    "visibility": "team",
                    "network": "fact",
                    "metadata": {"ticket": "OPS-7"},
                },
            )
        )
        batch = _ok(
            alice.post(
                "/v1/memories/batch",
                json={
                    "items": [
                        {"content": "The billing service deploys to Kubernetes every Tuesday.", "namespace": NS},
                        {"content": "Grafana watches the billing queue depth.", "namespace": NS, "visibility": "team"},
                    ]
                },
            )
        )
        _ok(alice.get(f"/v1/memories/{one['memory_id']}"))
        _ok(alice.get("/v1/memories", params={"namespace": NS}))
        _ok(alice.post("/v1/memories/accessed", json={"ids": [one["memory_id"]]}))
        _ok(alice.post("/v1/recall", json={"query": "what runs the job queue?", "namespace": NS}))
        fixed = _ok(
            alice.post(
                f"/v1/memories/{one['memory_id']}/reconsolidate",
                json={"content": "Valkey runs the job queue and the cache of the billing service.", "reason": "more"},
            )
        )
        assert _ok(alice.get(f"/v1/memories/{fixed['memory_id']}/judgments"))["judgments"]
        undone = _ok(alice.post(f"/v1/memories/{fixed['memory_id']}/revert", json={"reason": "too soon"}))
        _ok(alice.post(f"/v1/judgments/{undone['id']}/revert", json={}))
        _ok(alice.post(f"/v1/memories/{batch['results'][0]['memory_id']}/forget", json={"reason": "obsolete"}))

        page = _ok(alice.get("/v1/entities", params={"namespace": NS}))
        assert page["entities"], "retain found no entity to show"
        name = urllib.parse.quote(page["entities"][0]["name"], safe="")
        _ok(alice.get(f"/v1/entities/{name}", params={"namespace": NS}))

        captured = alice.post(
            "/v1/capture",
            json={
                "namespace": NS,
                "items": [{"content": "We agreed to keep Valkey for the billing queue."}],
                "recall": {"query": "what runs the billing queue?"},
            },
        )
        assert "hits" in _ok(captured, 202)
        withheld = _ok(bob.post("/v1/capture", json={"namespace": NS, "recall": {"query": "billing"}}), 202)
        assert withheld["hits"] == [] and withheld["withheld"]

        _ok(alice.post("/v1/grants", json={"namespace": NS, "agent": "bob", "can_write": True}))
        _ok(alice.get("/v1/grants", params={"namespace": NS}))
        _ok(bob.get("/v1/namespaces"))  # with the grant offered to him
        _ok(bob.post("/v1/grants/accept", json={"namespace": NS}))
        _ok(bob.post("/v1/grants/decline", json={"namespace": NS}))
        _ok(alice.delete("/v1/grants", params={"namespace": NS, "agent": "bob"}))


def test_agents_and_keys_answer_as_documented(service: Service) -> None:
    with service.client("admin") as admin:
        _ok(admin.get("/v1/agents"))
        _ok(admin.post("/v1/agents", json={"id": "openapi-agent", "key_label": "first"}), 201)
        _ok(admin.get("/v1/agents/openapi-agent/keys"))
        second = _ok(admin.post("/v1/agents/openapi-agent/keys", json={"label": "second"}), 201)
        _ok(admin.delete(f"/v1/agents/openapi-agent/keys/{second['key_id']}"))
        _ok(admin.post("/v1/agents/openapi-agent/disable"))


async def test_the_archive_answers_as_documented(service: Service) -> None:
    with service.client("alice") as alice:
        _ok(alice.post("/v1/namespaces", json={"name": OLD}), 201)
        when = (datetime.now(UTC) - timedelta(days=90)).isoformat()
        old = _ok(
            alice.post(
                "/v1/memories",
                json={"content": "The nightly backup moved to bucket cb-archive.", "namespace": OLD, "valid_at": when},
            )
        )
    conn = await asyncpg.connect(service.dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '90 days' WHERE namespace = $1", OLD)
    finally:
        await conn.close()
    settings = service.settings.model_copy(update={"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0})
    report = await run_cycle(settings, service.dsn, namespaces=[OLD], steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 1
    with service.client("alice") as alice:
        found = _ok(alice.post("/v1/recall/archive", json={"query": "where is the nightly backup?", "namespace": OLD}))
        assert found["hits"]
        _ok(alice.post(f"/v1/memories/{old['memory_id']}/unarchive"))


def test_workflows_answer_as_documented(service: Service, llm_server: str, bodies: str) -> None:
    model = {
        "name": "openapi-frontier",
        "layer": "frontier",
        "provider": "openai",
        "model": "frontier-openapi",
        "endpoint": f"{llm_server}/v1",
    }
    task = {"namespace": NS, "task_type": "json", "description": TASK, "frontier_agent": model["name"]}
    with service.client("admin") as admin, service.client("alice") as alice:
        try:
            _ok(admin.post("/v1/workflows/agents", json=model), 201)
            _ok(alice.get("/v1/workflows/agents"))
            _ok(admin.patch(f"/v1/workflows/agents/{model['name']}", json={"cost_in_per_1k": 0.01}))
            _ok(alice.post("/v1/workflows/dispatch", json=task))
            queued = _ok(alice.post("/v1/workflows/queue", json={**task, "priority": 3}), 202)
            _ok(alice.get(f"/v1/workflows/queue/{queued['id']}"))
            _ok(alice.get("/v1/workflows/report"))
        finally:
            admin.patch(f"/v1/workflows/agents/{model['name']}", json={"active": False})


async def test_sleep_runs_answer_as_documented(service: Service) -> None:
    """A cycle started over the API runs to its end on the service's Ray; a run whose driver is gone
    (it holds no namespace lock) is ended by a cancel."""
    with service.client("admin") as admin, service.client("alice") as alice:
        alice.post("/v1/namespaces", json={"name": "openapi/sleepy"})
        for text in (  # two wordings of one fact: the run merges them, and its revert undoes that
            "The staging database runs PostgreSQL 16 on host db-stg-1.",
            "The staging database runs PostgreSQL 16 on the host db-stg-1.",
        ):
            item = {"content": text, "namespace": "openapi/sleepy", "visibility": "team", "network": "fact"}
            _ok(alice.post("/v1/memories/batch", json={"items": [item], "decide": False}))
        run_id = _ok(admin.post("/v1/sleep/runs", json={"namespaces": ["openapi/sleepy"], "steps": ["dedup"]}), 202)[
            "run_id"
        ]
        deadline = datetime.now(UTC) + timedelta(seconds=240)
        run = _ok(admin.get(f"/v1/sleep/runs/{run_id}"))
        while run["status"] == "running" and datetime.now(UTC) < deadline:
            await asyncio.sleep(1)
            run = _ok(admin.get(f"/v1/sleep/runs/{run_id}"))
        assert run["status"] == "done", run
        assert any(r["id"] == run_id for r in _ok(admin.get("/v1/sleep/runs"))["runs"])
        assert alice.post(f"/v1/sleep/runs/{run_id}/cancel").status_code == 403  # an admin's
        assert {j["kind"] for j in run["judgments"]} == {"merge"} and run["memories"]
        [undo] = _ok(alice.post(f"/v1/sleep/runs/{run_id}/revert", json={"reason": "two hosts"}))["reverts"]
        assert undo["inputs"]["run"] == run_id and undo["reason"] == "two hosts"
        assert alice.post(f"/v1/sleep/runs/{run_id}/revert").status_code == 409  # nothing left to revert
        assert _ok(admin.get(f"/v1/sleep/runs/{run_id}"))["reverts"][0]["id"] == undo["id"]
        orphan = uuid.uuid4()
        conn = await asyncpg.connect(service.dsn)
        try:
            await conn.execute(
                "INSERT INTO sleep_runs (id, status, steps, namespaces) VALUES ($1, 'running', '{dedup}', '{openapi/sleepy}')",
                orphan,
            )
        finally:
            await conn.close()
        ended = _ok(admin.post(f"/v1/sleep/runs/{orphan}/cancel"), 202)
        assert ended["status"] == "cancelled"
        assert _ok(admin.get(f"/v1/sleep/runs/{orphan}"))["note"] == "its driver was gone: ended by a cancel"


def test_errors_reach_the_client_as_the_class_that_raised_them(service: Service, llm_server: str, bodies: str) -> None:
    down = {
        "name": "openapi-down",
        "layer": "frontier",
        "provider": "openai",
        "model": "down-openapi",  # the scripted server answers 500, always
        "endpoint": f"{llm_server}/v1",
    }
    task = {"namespace": NS, "task_type": "json", "description": TASK, "frontier_agent": down["name"]}
    with service.client("admin") as admin:
        _ok(admin.post("/v1/workflows/agents", json=down), 201)
    too_big = "x" * (service.settings.api_max_body_bytes + 10)
    try:
        with service.api("alice") as alice, service.api("bob") as bob, Client(service.url, None) as anon:
            cases = [
                (errors.NotFound, lambda: alice.get(uuid.uuid4())),
                (errors.InvalidRequest, lambda: alice.request("POST", "/v1/recall", json={"query": ["x"]})),
                (errors.PayloadTooLarge, lambda: alice.request("POST", "/v1/memories", json={"content": too_big})),
                (errors.MethodNotAllowed, lambda: alice.request("PUT", "/v1/health")),
                (
                    errors.AccessDenied,
                    lambda: bob.request("POST", "/v1/memories", json={"content": "x", "namespace": NS}),
                ),
                (errors.AlreadyExists, lambda: bob.create_namespace(NS)),
                (errors.Unauthenticated, lambda: anon.whoami()),
                (errors.ModelError, lambda: alice.request("POST", "/v1/workflows/dispatch", json=task)),
            ]
            for cls, call in cases:
                with pytest.raises(errors.CabrainError) as raised:
                    call()
                assert type(raised.value) is cls, (cls, raised.value)
                assert f"(HTTP {cls.status})" in raised.value.message
    finally:
        with service.client("admin") as admin:
            admin.patch(f"/v1/workflows/agents/{down['name']}", json={"active": False})


def test_the_check_refuses_a_body_that_drifted(service: Service) -> None:
    request = httpx.Request("GET", f"{service.url}/v1/whoami")
    good = {"agent_id": "alice", "is_admin": False, "key_id": str(uuid.uuid4())}
    service.openapi.check(httpx.Response(200, json=good, request=request))
    missing = {k: v for k, v in good.items() if k != "key_id"}
    for drifted in ({**good, "extra": 1}, missing, {**good, "is_admin": "no"}):
        with pytest.raises(AssertionError, match="does not match its schema"):
            service.openapi.check(httpx.Response(200, json=drifted, request=request))
    with pytest.raises(AssertionError, match="does not name"):
        service.openapi.check(httpx.Response(201, json=good, request=request))
