"""Connectors, export and import over HTTP, on the running Serve application: who may add, see and
sync a connector; a sync started by the API and followed through its run; the folders the API may
read; an export streamed to the namespace's owner only; imports, once."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import cli_env, run_cli
from tests.service.conftest import Service


def _wait_run(client, name: str, run_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.get(f"/v1/connectors/{name}/runs/{run_id}").json()
        if run["status"] != "running":
            return run
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} still running after {timeout} s")


def test_connectors_over_http(service: Service) -> None:
    shared = Path(service.settings.connector_roots[0])
    (shared / "handbook").mkdir(parents=True, exist_ok=True)
    (shared / "handbook" / "travel.md").write_text(
        "# Travel\n\nBook flights through the travel desk at least two weeks ahead.\n"
    )
    body = {
        "name": "http-handbook",
        "kind": "folder",
        "namespace": "proj",
        "config": {"path": str(shared / "handbook")},
    }
    with service.client("admin") as admin, service.client("alice") as alice, service.client("bob") as bob:
        refused = alice.post("/v1/connectors", json=body)
        assert refused.status_code == 403, refused.text  # only an admin adds a connector
        outside = admin.post("/v1/connectors", json={**body, "config": {"path": "/etc"}})
        assert outside.status_code == 403 and "outside" in outside.json()["error"]["message"]
        unknown = admin.post("/v1/connectors", json={**body, "kind": "ftp"})
        assert unknown.status_code == 400 and "unknown connector kind" in unknown.json()["error"]["message"]
        secret = admin.post(
            "/v1/connectors",
            json={
                **body,
                "name": "leaky",
                "kind": "gitlab",
                "config": {"url": "http://127.0.0.1:9", "project": "a/b", "token_env": "CABRAIN_DATABASE_URL"},
            },
        )
        assert secret.status_code == 400 and "CaBrain setting" in secret.json()["error"]["message"]

        # the source is reached when it is added: a wrong path is refused then, unless added unchecked
        missing = {**body, "name": "http-missing", "config": {"path": str(shared / "missing")}}
        refused = admin.post("/v1/connectors", json=missing)
        assert refused.status_code == 422 and "does not exist" in refused.json()["error"]["message"], refused.text
        assert '"check": false' in refused.json()["error"]["hint"]
        assert admin.post("/v1/connectors", json={**missing, "check": False}).status_code == 201
        assert admin.delete("/v1/connectors/http-missing").status_code == 200

        made = admin.post("/v1/connectors", json=body)
        assert made.status_code == 201, made.text
        assert made.json()["agent_id"] == "admin" and made.json()["status"] == "new"

        shown = alice.get("/v1/connectors/http-handbook")
        assert shown.status_code == 200 and shown.json()["config"]["path"] == str(shared / "handbook")
        # alice may write proj: she sees the connector and may sync it; bob may not
        listed = {c["name"]: c for c in alice.get("/v1/connectors").json()["connectors"]}
        assert "http-handbook" in listed  # beside the other tests' connectors on namespaces she may write
        assert bob.get("/v1/connectors").json()["connectors"] == []
        assert bob.get("/v1/connectors/http-handbook").status_code == 404
        assert bob.post("/v1/connectors/http-handbook/sync").status_code == 404

        # a dry run says what the sync would do, and records nothing
        assert bob.post("/v1/connectors/http-handbook/dry-run").status_code == 404
        dry = alice.post("/v1/connectors/http-handbook/dry-run")
        assert dry.status_code == 200, dry.text
        assert dry.json()["dry_run"] and dry.json()["added"] == ["travel.md#Travel"], dry.text
        assert dry.json()["counts"]["listed"] == 1 and dry.json()["counts"]["added"] == 1
        assert alice.get("/v1/connectors/http-handbook/runs").json()["runs"] == []

        started = alice.post("/v1/connectors/http-handbook/sync")
        assert started.status_code == 202, started.text
        run = _wait_run(alice, "http-handbook", started.json()["run_id"])
        assert run["status"] == "done" and run["counts"]["listed"] == 1 and run["counts"]["added"] == 1
        hits = alice.post("/v1/recall", json={"query": "how early do I book flights", "namespace": "proj", "k": 3})
        assert any("travel desk" in h["memory"]["content"] for h in hits.json()["hits"])
        runs = alice.get("/v1/connectors/http-handbook/runs").json()["runs"]
        assert runs[0]["status"] == "done"

        assert bob.delete("/v1/connectors/http-handbook").status_code == 404
        assert alice.delete("/v1/connectors/http-handbook").status_code == 200  # proj's owner
        assert admin.get("/v1/connectors/http-handbook").status_code == 404


def test_the_cli_follows_a_sync_in_the_service(service: Service) -> None:
    shared = Path(service.settings.connector_roots[0]) / "notes"
    shared.mkdir(parents=True, exist_ok=True)
    (shared / "oncall.md").write_text("# On call\n\nThe on-call phone is handed over on Mondays at ten.\n")
    env = cli_env(api_url=service.url, api_key=service.keys["admin"])
    added = run_cli("connectors", "add", "cli-notes", "folder", "-n", "proj", "--set", f"path={shared}", env=env)
    assert added.returncode == 0, added.stderr
    dry = run_cli("connectors", "sync", "cli-notes", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    [preview] = json.loads(dry.stdout)
    assert preview["dry_run"] and preview["counts"]["added"] == 1 and preview["added"] == ["oncall.md#On call"]
    synced = run_cli("connectors", "sync", "cli-notes", "--json", env=env)
    assert synced.returncode == 0, synced.stderr
    [report] = json.loads(synced.stdout)
    assert report["status"] == "done" and report["counts"]["added"] == 1
    listed = run_cli("connectors", "list", env=env)
    assert "cli-notes" in listed.stdout and " ok" in listed.stdout


def test_export_and_import_over_http(service: Service, tmp_path: Path) -> None:
    with service.client("alice") as alice, service.client("bob") as bob:
        alice.post("/v1/memories", json={"content": "The lab printer is on the third floor.", "namespace": "proj"})
        out = alice.get("/v1/export", params={"namespace": "proj"})
        assert out.status_code == 200 and out.headers["content-type"].startswith("application/x-ndjson")
        records = [json.loads(line) for line in out.text.splitlines()]
        assert records[0]["type"] == "cabrain-export" and records[-1]["type"] == "end"
        assert any(r["type"] == "memory" and "printer" in r["content"] for r in records)
        assert bob.get("/v1/export", params={"namespace": "proj"}).status_code == 403

        mem0 = json.dumps([{"id": "m-1", "memory": "Likes the window seat on long flights", "user_id": "alice"}])
        first = alice.post("/v1/import", params={"format": "mem0", "namespace": "proj"}, content=mem0)
        assert first.status_code == 200, first.text
        assert first.json()["added"] == 1
        again = alice.post("/v1/import", params={"format": "mem0", "namespace": "proj"}, content=mem0)
        assert again.json()["added"] == 0 and again.json()["already"] == 1
        assert bob.post("/v1/import", params={"format": "mem0", "namespace": "proj"}, content=mem0).status_code == 403
        restore = alice.post("/v1/import", params={"format": "cabrain"}, content=out.content)
        assert restore.status_code == 403  # a CaBrain export is an admin's to import
        bad = alice.post("/v1/import", params={"format": "mem0", "namespace": "proj"}, content=b"{nope")
        assert bad.status_code == 400 and "not" in bad.json()["error"]["message"]
        # an upload's errors name the file uploaded, never the server's temporary folder
        named = {"format": "mem0", "namespace": "proj", "filename": "/home/a/exports/memories.json"}
        bad = alice.post("/v1/import", params=named, content=b"{nope")
        message = bad.json()["error"]["message"]
        assert bad.status_code == 400 and message.startswith("/home/a/exports/memories.json: not valid JSON"), message
        assert "cabrain-import-" not in message and "/tmp" not in message
        # a newer version of the record, tried first, revises it
        newer = json.dumps([{"id": "m-1", "memory": "Likes the aisle seat on long flights", "user_id": "alice"}])
        dry = alice.post("/v1/import", params={"format": "mem0", "namespace": "proj", "dry_run": True}, content=newer)
        assert dry.status_code == 200 and dry.json()["dry_run"] and dry.json()["revised"] == 1, dry.text
        done = alice.post("/v1/import", params={"format": "mem0", "namespace": "proj"}, content=newer)
        assert done.json()["revised"] == 1 and done.json()["added"] == 0, done.text


def test_an_admin_backs_up_the_running_service(service: Service) -> None:
    from cabrain.store.backup import verify

    with service.client("admin") as admin, service.client("alice") as alice:
        assert alice.post("/v1/backups").status_code == 403
        started = admin.post("/v1/backups")
        assert started.status_code == 202, started.text
        name = started.json()["name"]
        deadline = time.monotonic() + 240
        while (state := admin.get(f"/v1/backups/{name}").json())["status"] == "running":
            assert time.monotonic() < deadline, "the backup did not finish"
            time.sleep(0.5)
        assert state["status"] == "done", state
        assert state["hot_memories"] >= 1 and state["bytes"] > 0
        assert name in [b["name"] for b in admin.get("/v1/backups").json()["backups"]]
        assert alice.get("/v1/backups").status_code == 403
        assert admin.get("/v1/backups/../../etc").status_code == 404
    manifest = verify(Path(started.json()["folder"]))  # every file as the manifest says
    assert manifest["hot"]["tables"]["memories"] == state["hot_memories"]
