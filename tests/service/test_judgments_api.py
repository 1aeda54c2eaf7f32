"""Judgments over HTTP and the CLI: why a memory changed, and undoing it (writers only), through the
running service."""

from __future__ import annotations

import json

from tests.conftest import cli_env, run_cli
from tests.service.conftest import Service

NS = "judged"  # its own namespace: the service is shared by the session's tests


def _retain(api, content: str) -> dict:
    response = api.post("/v1/memories", json={"content": content, "namespace": NS, "visibility": "team"})
    assert response.status_code == 200, response.text
    return response.json()


def test_judgments_and_reverts_over_http_and_the_cli(service: Service) -> None:
    with service.client("alice") as alice, service.client("bob") as bob, service.client("carol") as carol:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        old = _retain(alice, "The deploy freeze starts on December 10.")
        new = _retain(alice, "The deploy freeze now starts on December 17.")
        assert new["decision"] == "UPDATE" and new["superseded"] == [old["memory_id"]]
        listed = alice.get(f"/v1/memories/{old['memory_id']}/judgments")
        assert listed.status_code == 200
        [judgment] = listed.json()["judgments"]
        assert (judgment["kind"], judgment["origin"], judgment["agent"]) == ("supersede", "write", "alice")
        assert judgment["changes"][0]["before"]["invalid_at"] is None

        # who may: carol cannot see it at all, bob (a reader) sees why but may not undo
        assert carol.get(f"/v1/memories/{old['memory_id']}/judgments").status_code == 404
        assert carol.post(f"/v1/memories/{old['memory_id']}/revert").status_code == 404
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": "bob"}).status_code in (200, 201)
        assert bob.get(f"/v1/memories/{old['memory_id']}/judgments").status_code == 200
        refused = bob.post(f"/v1/memories/{old['memory_id']}/revert")
        assert refused.status_code == 403, refused.text

        undone = alice.post(f"/v1/memories/{old['memory_id']}/revert", json={"reason": "the freeze did not move"})
        assert undone.status_code == 200, undone.text
        assert undone.json()["reverts"] == judgment["id"]
        assert alice.get(f"/v1/memories/{old['memory_id']}").json()["memory"]["invalid_at"] is None
        again = alice.post(f"/v1/judgments/{judgment['id']}/revert")
        assert again.status_code == 409 and again.json()["error"]["type"] == "conflict"
        assert alice.post("/v1/judgments/not-a-uuid/revert").status_code == 400

    # the CLI, through the same service: list, then revert the revert
    env = {**cli_env(api_url=service.url), "CABRAIN_API_KEY": service.keys["alice"]}
    shown = run_cli("judgments", old["memory_id"], "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert [j["kind"] for j in json.loads(shown.stdout)] == ["revert", "supersede"]
    redo = run_cli("revert", undone.json()["id"], "--judgment", "--reason", "it did move", env=env)
    assert redo.returncode == 0, redo.stderr
    assert "reverted judgment" in redo.stdout
    with service.client("alice") as alice:
        assert alice.get(f"/v1/memories/{old['memory_id']}").json()["memory"]["superseded_by"] == new["memory_id"]
    with service.client("alice") as alice:
        untouched = _retain(alice, "The staging VPN gateway is vpn-stg.example.org.")
    nothing = run_cli("revert", untouched["memory_id"], env=env)
    assert nothing.returncode == 1 and "no judgment to revert" in nothing.stderr


def test_a_whole_sleep_run_is_reverted_from_the_cli(service: Service) -> None:
    import time

    ns = "judged/run"
    with service.client("alice") as alice, service.client("admin") as admin:
        assert alice.post("/v1/namespaces", json={"name": ns}).status_code == 201
        for text in (
            "The staging database runs PostgreSQL 16 on host db-stg-1.",
            "The staging database runs PostgreSQL 16 on the host db-stg-1.",
        ):
            item = {"content": text, "namespace": ns, "visibility": "team", "network": "fact"}
            assert alice.post("/v1/memories/batch", json={"items": [item], "decide": False}).status_code == 200
        started = admin.post("/v1/sleep/runs", json={"namespaces": [ns], "steps": ["dedup"]})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        for _ in range(1200):
            if admin.get(f"/v1/sleep/runs/{run_id}").json()["status"] != "running":
                break
            time.sleep(0.2)
    env = {**cli_env(api_url=service.url), "CABRAIN_API_KEY": service.keys["alice"]}
    undone = run_cli("revert", run_id, "--run", "--reason", "two hosts", env=env)
    assert undone.returncode == 0, undone.stderr
    assert f"{ns}: reverted 1 judgments of run {run_id} (merge)" in undone.stdout
    assert "cabrain revert --judgment" in undone.stdout
    again = run_cli("revert", run_id, "--run", env=env)
    assert again.returncode == 1 and "nothing to revert" in again.stderr
    both = run_cli("revert", run_id, "--run", "--judgment", env=env)
    assert both.returncode == 2 and "not allowed with" in both.stderr
