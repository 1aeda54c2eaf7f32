"""Entity summaries through the service - the HTTP routes, the Python client, the MCP tools and the
CLI - scoped as the memories they come from; and every face naming an error's fix in its own terms."""

from __future__ import annotations

import json

import asyncpg
import pytest

from cabrain.errors import NotFound
from tests.conftest import cli_env, run_cli
from tests.mcp_helpers import OTHER_SURFACES, call, call_error, http_session, stdio_session
from tests.service.conftest import Service

NS = "entities/svc"
TEAM = [
    "We moved the job queue to Valkey last sprint.",
    "Valkey needs 4 GB of memory on the cache node.",
    "The team watches Valkey with Grafana dashboards.",
    "Deploys run through ci/deploy.yml on every merge.",
]
PRIVATE = "My Valkey admin password hint is in the vault."


@pytest.fixture(scope="module")
async def summarised(service: Service) -> dict[str, str]:
    """Namespace NS of alice: Valkey summarised from team memories, Grafana from a team memory and
    alice's private one (as a sleep run writes them). Bob holds a read grant, carol nothing."""
    ids = {}
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        for text in TEAM:
            ids[text] = _retain(alice, text, visibility="team", network="fact")
        ids[PRIVATE] = _retain(alice, PRIVATE)
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": "bob"}).status_code == 200
    conn = await asyncpg.connect(service.dsn)
    try:
        for name, summary, sources in (
            ("Valkey", "Valkey runs the job queue and needs 4 GB.", [TEAM[0], TEAM[1]]),
            ("Grafana", "Grafana watches Valkey; the admin password hint is in the vault.", [TEAM[2], PRIVATE]),
        ):
            await conn.execute(
                "UPDATE entities SET summary = $3, summary_sources = $4::uuid[], summarized_at = now() "
                "WHERE namespace = $1 AND name = $2",
                NS,
                name,
                summary,
                [ids[s] for s in sources],
            )
    finally:
        await conn.close()
    return ids


def _retain(client, content: str, **extra) -> str:
    response = client.post("/v1/memories", json={"content": content, "namespace": NS, **extra})
    assert response.status_code == 200, response.text
    return response.json()["memory_id"]


def test_entity_routes_are_scoped_like_the_memories_they_come_from(service: Service, summarised) -> None:
    ids = summarised
    with service.client("carol") as carol:  # no grant: the namespace is not there for her
        for path in ("/v1/entities", "/v1/entities/Valkey"):
            body = carol.get(path, params={"namespace": NS}).json()
            assert body["error"]["type"] == "not_found" and "not visible" in body["error"]["message"]
        assert carol.get("/v1/entities", params={"namespace": NS}).status_code == 404
    with service.client("bob") as bob:
        listed = bob.get("/v1/entities", params={"namespace": NS})
        assert listed.status_code == 200, listed.text
        by_name = {e["name"]: e for e in listed.json()["entities"]}
        assert by_name["Valkey"]["summary"] == "Valkey runs the job queue and needs 4 GB."
        assert by_name["Grafana"]["summary"] is None and by_name["Grafana"]["summarized_at"] is None
        one = bob.get("/v1/entities/valkey", params={"namespace": NS}).json()
        assert one["entity"]["summary"] and ids[PRIVATE] not in [m["id"] for m in one["memories"]]
        assert [m["id"] for m in one["memories"]] == [ids[TEAM[2]], ids[TEAM[1]], ids[TEAM[0]]]
        filtered = bob.get("/v1/entities", params={"namespace": NS, "q": "graf", "limit": 5}).json()
        assert [e["name"] for e in filtered["entities"]] == ["Grafana"] and filtered["next_cursor"] is None
        assert bob.get("/v1/entities", params={"namespace": NS, "limit": 0}).status_code == 422
        recalled = bob.post("/v1/recall", json={"query": "Valkey job queue Grafana", "namespace": NS, "k": 5}).json()
        assert [e["name"] for e in recalled["entities"]] == ["Valkey"]  # Grafana's draws on a private memory
        assert set(recalled["entities"][0]["memory_ids"]) <= {h["memory"]["id"] for h in recalled["hits"]}
    with service.client("alice") as alice:
        recalled = alice.post("/v1/recall", json={"query": "Valkey job queue Grafana", "namespace": NS, "k": 5}).json()
        assert {e["name"] for e in recalled["entities"]} == {"Valkey", "Grafana"}
        spec = alice.get("/openapi.json").json()
        assert spec["paths"]["/v1/entities"]["get"]["tags"] == ["entities"]
        assert "/v1/entities/{name_or_id}" in spec["paths"]


def test_the_python_client_reads_entities_and_names_with_slashes(service: Service, summarised) -> None:
    with service.api("bob") as bob:
        page = bob.entities(NS, limit=1)
        assert len(page.entities) == 1 and page.next_cursor
        rest = bob.entities(NS, cursor=page.next_cursor)
        assert "ci/deploy.yml" in {e.name for e in page.entities + rest.entities}
        deploy = bob.entity(NS, "ci/deploy.yml")  # a slash in the name, through the path
        assert deploy.entity.name == "ci/deploy.yml" and deploy.memories[0].content == TEAM[3]
        assert bob.entity(NS, str(deploy.entity.id)).entity.name == "ci/deploy.yml"
        with pytest.raises(NotFound) as missing:
            bob.entity(NS, "No Such Thing")
        assert "GET /v1/entities?namespace=" in missing.value.hint
    with service.api("carol") as carol, pytest.raises(NotFound):
        carol.entities(NS)


async def test_entity_tools_over_mcp(service: Service, summarised) -> None:
    env = cli_env(api_url=service.url)
    async with (
        http_session(service.url, service.keys["bob"]) as bob,
        stdio_session({**env, "CABRAIN_API_KEY": service.keys["carol"]}) as carol,
    ):
        listed = {e["name"]: e for e in (await call(bob, "memory_entities", namespace=NS))["entities"]}
        assert listed["Valkey"]["summary"].startswith("Valkey runs") and listed["Grafana"]["summary"] is None
        valkey = await call(bob, "memory_entity", namespace=NS, name="Valkey")
        assert valkey["entity"]["summary"] and summarised[PRIVATE] not in [m["id"] for m in valkey["memories"]]
        found = await call(bob, "memory_recall", query="Valkey job queue", namespace=NS, k=5)
        assert [e["name"] for e in found["entities"]] == ["Valkey"] and found["entities"][0]["summary"]
        assert "not visible" in await call_error(carol, "memory_entities", namespace=NS)
        assert "not visible" in await call_error(carol, "memory_entity", namespace=NS, name="Valkey")


async def test_each_face_names_the_fix_on_its_own_surface(service: Service) -> None:
    missing = "nowhere/fix-me"
    with service.client("alice") as alice:
        body = alice.post("/v1/memories", json={"content": "a note", "namespace": missing}).json()["error"]
    assert body["type"] == "not_found"
    assert body["hint"] == 'create it first: POST /v1/namespaces {"name": "nowhere/fix-me"}'
    assert body["fix"] == {"action": "create_namespace", "params": {"namespace": missing}}

    alice = cli_env(api_url=service.url, api_key=service.keys["alice"])
    stored = run_cli("remember", "a note", "-n", missing, env=alice)
    assert stored.returncode == 1 and "cabrain namespaces --create nowhere/fix-me" in stored.stderr
    assert "POST /v1" not in stored.stderr and "memory_create_namespace" not in stored.stderr
    unknown = run_cli("recall", "x", "-n", "proj", env=cli_env(api_url=service.url, api_key="cbk_" + "z" * 43))
    assert unknown.returncode == 1 and "CABRAIN_API_KEY" in unknown.stderr and "POST /v1" not in unknown.stderr

    env = cli_env(api_url=service.url)
    async with (
        http_session(service.url, service.keys["alice"]) as over_http,
        stdio_session({**env, "CABRAIN_API_KEY": service.keys["alice"]}) as over_stdio,
    ):
        # in the ingress, and re-worded by the stdio server from the HTTP error its client got
        for session, name in ((over_http, f"{missing}/http"), (over_stdio, f"{missing}/stdio")):
            text = await call_error(session, "memory_retain", content="a note", namespace=name)
            assert f'call memory_create_namespace with namespace="{name}"' in text
            assert not any(s in text for s in OTHER_SURFACES), text
            assert (await call(session, "memory_create_namespace", namespace=name))["created"] is True
            assert (await call(session, "memory_retain", content="a note", namespace=name))["decision"] == "ADD"


def test_cli_entity_commands_act_as_the_key_s_agent(service: Service, summarised) -> None:
    bob = cli_env(api_url=service.url, api_key=service.keys["bob"])
    listed = run_cli("entities", NS, env=bob)
    assert listed.returncode == 0, listed.stderr
    assert "Valkey runs the job queue" in listed.stdout and "Grafana" in listed.stdout
    assert "password" not in listed.stdout  # Grafana's summary draws on alice's private memory
    one = run_cli("entity", NS, "valkey", "--json", env=bob)
    assert one.returncode == 0, one.stderr
    body = json.loads(one.stdout)
    assert body["entity"]["name"] == "Valkey" and PRIVATE not in one.stdout
    filtered = run_cli("entities", NS, "--query", "graf", env=bob)
    assert filtered.stdout.split()[0] == "Grafana"
    carol = run_cli("entities", NS, env=cli_env(api_url=service.url, api_key=service.keys["carol"]))
    assert carol.returncode == 1 and "not visible" in carol.stderr
    nothing = run_cli("entity", NS, "No Such Thing", env=bob)
    assert nothing.returncode == 1 and "cabrain entities entities/svc" in nothing.stderr
