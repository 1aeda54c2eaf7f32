"""Archive recall through the service: /v1/recall/archive, the Python client, `cabrain recall
--archive`, and the MCP tool, on memories a real sleep run moved to the Iceberg cold tier."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cabrain.errors import InputError
from cabrain.sleep.cycle import run_cycle
from cabrain.types import ArchiveQuery, MemoryInput, RecallQuery, Visibility
from tests.conftest import cli_env, run_cli
from tests.mcp_helpers import call, http_session
from tests.service.conftest import Service

NAMESPACE = "archive/svc"
EVENTS = [
    "Incident 4411: the nightly backup to bucket cb-backups failed because the IAM key expired.",
    "Sprint review: the search team demoed Arabic stemming in the keyword index.",
    "الفريق قرر نقل خادم التقارير إلى مركز البيانات في الرياض.",
]


@pytest.fixture(scope="module")
async def archived(service: Service) -> dict[str, str]:
    """Three team events and one private one, 90 days old, demoted by a real sleep run."""
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NAMESPACE}).status_code == 201
    when = datetime.now(UTC) - timedelta(days=90)
    with service.api("alice") as client:
        items = [
            MemoryInput(
                text, NAMESPACE, visibility=Visibility.TEAM, source_kind="chat", source_ref=f"thread-{i}", valid_at=when
            )
            for i, text in enumerate(EVENTS)
        ]
        items.append(MemoryInput("My private note: the backup IAM key lives in the vault.", NAMESPACE, valid_at=when))
        ids = [r.memory_id for r in client.retain_batch(items, decide=False)]
    conn = await asyncpg.connect(service.dsn)
    try:
        await conn.execute(
            "UPDATE memories SET created_at = now() - interval '90 days' WHERE namespace = $1", NAMESPACE
        )
    finally:
        await conn.close()
    settings = service.settings.model_copy(update={"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0})
    report = await run_cycle(settings, service.dsn, namespaces=[NAMESPACE], steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 4
    return {"backup": str(ids[0]), "review": str(ids[1]), "riyadh": str(ids[2]), "private": str(ids[3])}


def test_archive_route_client_and_get(service: Service, archived: dict[str, str]) -> None:
    with service.client("alice") as alice:
        answer = alice.post(
            "/v1/recall/archive", json={"query": "why did the backup fail?", "namespace": NAMESPACE, "k": 2}
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        top = body["hits"][0]
        assert top["memory"]["id"] == archived["backup"] and top["memory"]["tier"] == "cold"
        assert top["memory"]["source_ref"] == "thread-0" and top["batch"] and top["demoted_at"]
        assert body["scanned"] == 4 and body["files"] >= 1 and "scan_ms" in body["timings_ms"]
        # hot recall no longer has it; get still answers, from the cold tier
        hot = alice.post("/v1/recall", json={"query": "why did the backup fail?", "namespace": NAMESPACE}).json()
        assert archived["backup"] not in {h["memory"]["id"] for h in hot["hits"]}
        got = alice.get(f"/v1/memories/{archived['backup']}").json()
        assert got["memory"]["tier"] == "cold" and got["memory"]["content"] == EVENTS[0]
        refused = alice.post(f"/v1/memories/{archived['backup']}/reconsolidate", json={"content": "corrected"})
        assert refused.status_code == 400 and "cold tier" in refused.json()["error"]["message"]
        # bad input is named
        bad = alice.post("/v1/recall/archive", json={"query": "x", "namespace": NAMESPACE, "k": 0})
        assert bad.status_code in (400, 422)
        backwards = alice.post(
            "/v1/recall/archive",
            json={
                "query": "x",
                "namespace": NAMESPACE,
                "valid_from": "2026-02-01T00:00:00Z",
                "valid_to": "2026-01-01T00:00:00Z",
            },
        )
        assert backwards.status_code == 400 and "valid_from" in backwards.json()["error"]["message"]
        missing = alice.post("/v1/recall/archive", json={"query": "x", "namespace": "archive/nowhere"})
        assert missing.status_code == 404
    with service.api("alice") as client:
        # cross-lingual: an English question finds the Arabic event
        found = client.recall_archive(ArchiveQuery("moving the reports server to Riyadh", NAMESPACE, k=1))
        assert str(found.hits[0].memory.id) == archived["riyadh"]
        # time ranges
        recent = client.recall_archive(
            ArchiveQuery("backup", NAMESPACE, valid_from=datetime.now(UTC) - timedelta(days=30))
        )
        assert recent.hits == [] and recent.scanned == 0
        with pytest.raises(InputError):
            client.recall_archive(ArchiveQuery("", NAMESPACE))
        assert client.recall(RecallQuery("backup IAM key", NAMESPACE)).hits == []


def test_archive_scoping_through_the_service(service: Service, archived: dict[str, str]) -> None:
    with service.api("bob") as bob:  # no grant: nothing, and no hint of what exists
        assert bob.recall_archive(ArchiveQuery("backup IAM key", NAMESPACE, k=10)).hits == []
    with service.client("alice") as alice:
        assert alice.post("/v1/grants", json={"namespace": NAMESPACE, "agent": "carol"}).status_code in (200, 201, 204)
    with service.api("carol") as carol:
        ids = {str(h.memory.id) for h in carol.recall_archive(ArchiveQuery("backup IAM key", NAMESPACE, k=10)).hits}
        assert archived["backup"] in ids and archived["private"] not in ids  # team yes, alice's private no
    with service.api("alice") as alice:
        ids = {str(h.memory.id) for h in alice.recall_archive(ArchiveQuery("backup IAM key", NAMESPACE, k=10)).hits}
        assert archived["private"] in ids


def test_cli_recall_archive(service: Service, archived: dict[str, str]) -> None:
    env = cli_env(api_url=service.url, api_key=service.keys["alice"])
    found = run_cli("recall", "--archive", "sprint review demo", "-n", NAMESPACE, "-k", "1", env=env)
    assert found.returncode == 0, found.stderr
    assert archived["review"] in found.stdout and "Arabic stemming" in found.stdout
    window = run_cli(
        "recall", "--archive", "sprint review", "-n", NAMESPACE, "--from", "2000-01-01", "--to", "2000-02-01", env=env
    )
    assert window.returncode == 0 and "no memories matched (0 archived memories searched)" in window.stdout
    bad = run_cli("recall", "--archive", "x", "-n", NAMESPACE, "--from", "last tuesday", env=env)
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr
    needs_archive = run_cli("recall", "x", "-n", NAMESPACE, "--from", "2026-01-01", env=env)
    assert needs_archive.returncode != 0 and "--archive" in needs_archive.stderr


async def test_mcp_memory_recall_archive(service: Service, archived: dict[str, str]) -> None:
    async with http_session(service.url, service.keys["alice"]) as alice:
        result = await call(alice, "memory_recall_archive", query="backup failure incident", namespace=NAMESPACE, k=2)
        top = result["hits"][0]
        assert top["id"] == archived["backup"] and top["tier"] == "cold" and top["archived_at"]
        assert top["source_ref"] == "thread-0" and result["scanned"] == 4
        got = await call(alice, "memory_get", memory_id=archived["backup"])
        assert got["memory"]["tier"] == "cold"
