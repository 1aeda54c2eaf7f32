"""`cabrain up` on a fresh home: embedded PostgreSQL, migrate, admin key, local Ray, the API; Ctrl-C
stops all of it."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from cabrain.store.embedded import EmbeddedPostgres
from tests.conftest import REPO, cli_env, free_port, make_scratch_dir


def _wait_for_line(path: Path, needle: str, proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text()
        if needle in text:
            return text
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"`cabrain up` did not print {needle!r}; it printed:\n{path.read_text()[-3000:]}")


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_up_serves_the_api_and_ctrl_c_leaves_nothing_behind() -> None:
    home = make_scratch_dir("cabrain-up-")
    port = free_port()
    env = cli_env(home=str(home), api_port=str(port), ray_num_cpus="2", ray_object_store_bytes=str(100 * 1024**2))
    out, err = home / "up.out", home / "up.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cabrain.cli", "up"], cwd=REPO, env=env, stdout=stdout, stderr=stderr
        )
    try:
        text = _wait_for_line(out, "Ctrl-C stops everything", proc, timeout=240)
        key_file = home / "admin.key"
        assert f"admin key: {key_file} (created now" in text
        assert f"http://127.0.0.1:{port}" in text
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as api:
            assert api.get("/v1/whoami").json()["is_admin"] is True
            assert api.post("/v1/namespaces", json={"name": "notes"}).status_code == 201
            written = api.post("/v1/memories", json={"content": "We chose pgvector.", "namespace": "notes"})
            assert written.json()["decision"] == "ADD"
            hits = api.post("/v1/recall", json={"query": "which vector store?", "namespace": "notes"}).json()["hits"]
            assert hits[0]["memory"]["content"] == "We chose pgvector."
        started = _descendants(proc.pid)
        assert any("raylet" in " ".join(p.cmdline()) for p in started)
        server = EmbeddedPostgres(home / "pg")
        assert server.status().running

        proc.send_signal(signal.SIGINT)
        try:  # Serve's graceful shutdown alone may take 30 s on a loaded machine
            assert proc.wait(180) == 130
        except subprocess.TimeoutExpired:
            raise AssertionError(f"`cabrain up` did not stop on Ctrl-C; its last words:\n{err.read_text()[-2000:]}") from None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                                   for p in started) or server.status().running):  # fmt: skip
            time.sleep(0.5)
        left = [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert left == [], f"processes left behind: {left}"
        assert not server.status().running
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in _descendants(proc.pid):
            p.kill()
    stopped = err.read_text()
    assert "interrupted" in stopped
    assert stopped.index("stopping the Serve application") < stopped.index("stopping Ray") < stopped.index(
        "releasing the embedded PostgreSQL"
    )  # fmt: skip
    # a second run reuses the key made on the first
    env2 = dict(env, CABRAIN_API_PORT=str(free_port()))
    again = subprocess.Popen([sys.executable, "-m", "cabrain.cli", "up"], cwd=REPO, env=env2,
                             stdout=(home / "up2.out").open("w"), stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        text = _wait_for_line(home / "up2.out", "Ctrl-C stops everything", again, timeout=240)
        assert f"admin key: {key_file}\n" in text
        assert key_file.read_text().strip() == key
    finally:
        again.send_signal(signal.SIGINT)
        again.wait(90)


def test_up_refuses_a_cluster_without_a_shared_database() -> None:
    env = cli_env(home=str(make_scratch_dir("cabrain-up-")), ray_address="ray://127.0.0.1:10001")
    result = subprocess.run([sys.executable, "-m", "cabrain.cli", "up"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2
    assert "CABRAIN_DATABASE_URL" in result.stderr
