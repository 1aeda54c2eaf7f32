"""Files and local users, attacked through the running service: a link in a folder the API may read
to a token outside it, a connector's folder swapped for a link after it was added, a Slack export
holding a zip bomb (issue 31, findings 3 and 15)."""

from __future__ import annotations

import os
import time
import uuid
import zipfile
from pathlib import Path

from tests.service.conftest import Service, table_texts


def _wait_run(client, name: str, run_id: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = client.get(f"/v1/connectors/{name}/runs/{run_id}")
        if answer.status_code == 404:  # the 202 may come before the sync has recorded its run
            time.sleep(0.3)
            continue
        assert answer.status_code == 200, answer.text
        run = answer.json()
        if run["status"] != "running":
            return run
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} still running after {timeout} s")


def _outside(service: Service) -> tuple[Path, str]:
    """A fake Ray token under the service's home, outside CABRAIN_CONNECTOR_ROOTS."""
    secret = f"ray-token-{uuid.uuid4().hex}"
    where = Path(service.settings.home) / f"outside-{uuid.uuid4().hex[:8]}"
    (where / "ray").mkdir(parents=True)
    (where / "ray" / "auth_token").write_text(secret)
    (where / "ray" / "notes.md").write_text(f"# Token\n\nThe cluster token is {secret}.\n")
    root = Path(service.settings.connector_roots[0]).resolve()
    assert root not in where.resolve().parents
    return where, secret


def _sync(client, name: str) -> dict:
    started = client.post(f"/v1/connectors/{name}/sync")
    assert started.status_code == 202, started.text
    return _wait_run(client, name, started.json()["run_id"])


async def test_links_in_a_shared_folder_are_never_followed(service: Service) -> None:
    outside, secret = _outside(service)
    folder = Path(service.settings.connector_roots[0]) / f"linked-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    (folder / "travel.md").write_text("# Travel\n\nTrains to the offsite leave from platform nine.\n")
    os.symlink(outside / "ray" / "auth_token", folder / "token.md")  # a file link to the token
    os.symlink(outside / "ray", folder / "more")  # a folder link to where it lies
    name = f"links-{uuid.uuid4().hex[:6]}"
    body = {"name": name, "kind": "folder", "namespace": "proj", "config": {"path": str(folder), "gitignore": False}}
    with service.client("admin") as admin:
        assert admin.post("/v1/connectors", json=body).status_code == 201
        run = _sync(admin, name)
        assert run["status"] == "done", run
        assert run["counts"]["listed"] == 1 and run["counts"]["added"] >= 1  # travel.md alone
        # a link named straight away is refused when added, too
        direct = admin.post(
            "/v1/connectors", json={**body, "name": f"{name}-direct", "config": {"path": str(folder / "more")}}
        )
        assert direct.status_code == 403 and "outside" in direct.json()["error"]["message"], direct.text
        assert admin.delete(f"/v1/connectors/{name}").status_code == 200
    texts = await table_texts(service.dsn)
    assert not any(secret in text for text in texts.values())
    assert "platform nine" in texts["memories"]


async def test_a_folder_swapped_for_a_link_after_adding_syncs_nothing(service: Service) -> None:
    outside, secret = _outside(service)
    folder = Path(service.settings.connector_roots[0]) / f"swapped-{uuid.uuid4().hex[:8]}"
    (folder / "inner").mkdir(parents=True)
    (folder / "inner" / "a.md").write_text("# A\n\nThe first note of the swapped folder.\n")
    name = f"swap-{uuid.uuid4().hex[:6]}"
    body = {"name": name, "kind": "folder", "namespace": "proj", "config": {"path": str(folder / "inner")}}
    with service.client("admin") as admin:
        assert admin.post("/v1/connectors", json=body).status_code == 201
        # after the check at add time, the folder (and, in a second round, its parent) becomes a link
        (folder / "inner").rename(folder / "inner-old")
        os.symlink(outside / "ray", folder / "inner")
        run = _sync(admin, name)
        assert run["status"] == "failed" and "symbolic link" in run["error"], run
        os.unlink(folder / "inner")
        folder.rename(folder.with_name(folder.name + "-old"))
        (outside / "inner").mkdir()
        (outside / "inner" / "b.md").write_text(f"# B\n\n{secret}\n")
        os.symlink(outside, folder)
        run = _sync(admin, name)
        assert run["status"] == "failed" and "symbolic link" in run["error"], run
        assert admin.delete(f"/v1/connectors/{name}").status_code == 200
    texts = await table_texts(service.dsn)
    assert not any(secret in text for text in texts.values())


def _bomb(path: Path, member_mib: int) -> None:
    """A Slack export whose users.json unpacks to ``member_mib`` MiB of spaces: a few hundred KB."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("channels.json", '[{"id": "C1", "name": "general"}]')
        zf.writestr(
            "general/2026-01-05.json", '[{"type": "message", "user": "U1", "text": "hi", "ts": "1767600000.0"}]'
        )
        with zf.open("users.json", "w", force_zip64=True) as member:
            member.write(b"[")
            chunk = b" " * (1 << 20)
            for _ in range(member_mib):
                member.write(chunk)
            member.write(b"]")


async def test_a_zip_bomb_export_is_refused(service: Service) -> None:
    folder = Path(service.settings.connector_roots[0]) / f"bomb-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    bomb = folder / "slack.zip"
    _bomb(bomb, 200)
    assert bomb.stat().st_size < 1 << 20  # under 1 MiB on disk, 200 MiB unpacked
    name = f"bomb-{uuid.uuid4().hex[:6]}"
    body = {"name": name, "kind": "slack-export", "namespace": "proj", "config": {"path": str(bomb)}}
    with service.client("admin") as admin:
        refused = admin.post("/v1/connectors", json=body)  # read when it is added, within the limits
        assert refused.status_code == 413 and "users.json unpacks to" in refused.json()["error"]["message"]
        assert admin.post("/v1/connectors", json={**body, "check": False}).status_code == 201  # and at each sync
        run = _sync(admin, name)
        assert run["status"] == "failed", run
        assert "users.json unpacks to" in run["error"], run
        assert run["counts"].get("added", 0) == 0
        assert admin.delete(f"/v1/connectors/{name}").status_code == 200
