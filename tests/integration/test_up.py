"""`cabrain up` on a fresh home: embedded PostgreSQL, migrate, admin key, local Ray, the API; Ctrl-C
stops all of it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from cabrain.store.embedded import EmbeddedPostgres
from tests import netcheck
from tests.conftest import REPO, cli_env, free_port, make_scratch_dir, run_cli


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


def _start_up(home: Path, env: dict[str, str], name: str) -> tuple[subprocess.Popen, Path, Path]:
    out, err = home / f"{name}.out", home / f"{name}.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cabrain.cli", "up"], cwd=REPO, env=env, stdout=stdout, stderr=stderr
        )
    return proc, out, err


def _stop(proc: subprocess.Popen, err: Path) -> list[psutil.Process]:
    started = _descendants(proc.pid)
    proc.send_signal(signal.SIGINT)
    try:  # Ctrl-C is how a local `cabrain up` is meant to stop: exit code 0
        assert proc.wait(180) == 0
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"`cabrain up` did not stop on Ctrl-C; its last words:\n{err.read_text()[-2000:]}"
        ) from None
    return started


@pytest.mark.ray
def test_up_serves_the_api_on_loopback_only_and_ctrl_c_leaves_nothing_behind() -> None:
    home = make_scratch_dir("cabrain-up-")
    port = free_port()
    env = cli_env(home=str(home), api_port=str(port), ray_num_cpus="2", ray_object_store_bytes=str(100 * 1024**2))
    proc, out, err = _start_up(home, env, "up")
    server = EmbeddedPostgres(home / "pg")
    try:
        text = _wait_for_line(out, "Ctrl-C stops everything", proc, timeout=240)
        key_file = home / "admin.key"
        assert f"admin key: {key_file} (created now" in text
        assert f"http://127.0.0.1:{port}" in text
        assert f"console: http://127.0.0.1:{port}/console" in text
        wait = httpx.Timeout(120)  # a busy machine answers slowly, never wrongly
        console = httpx.get(f"http://127.0.0.1:{port}/console/login", timeout=wait)  # served by cabrain up
        assert console.status_code == 200 and "API key" in console.text
        assert httpx.get(f"http://127.0.0.1:{port}/console/static/console.css", timeout=wait).status_code == 200
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}, timeout=wait
        ) as api:
            assert api.get("/v1/whoami").json()["is_admin"] is True
            assert api.post("/v1/namespaces", json={"name": "notes"}).status_code == 201
            written = api.post("/v1/memories", json={"content": "We chose pgvector.", "namespace": "notes"})
            assert written.json()["decision"] == "ADD"
            hits = api.post("/v1/recall", json={"query": "which vector store?", "namespace": "notes"}).json()["hits"]
            assert hits[0]["memory"]["content"] == "We chose pgvector."
            # a sleep cycle started over the API runs beside the replicas, which hold most of the 2 CPUs
            started = api.post("/v1/sleep/runs", json={"namespaces": ["notes"]})
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            deadline = time.monotonic() + 240
            run = api.get(f"/v1/sleep/runs/{run_id}").json()
            while run["status"] == "running" and time.monotonic() < deadline:
                time.sleep(1)
                run = api.get(f"/v1/sleep/runs/{run_id}").json()
            assert run["status"] == "done", run
            assert "CPU per step" in run["room"] or "no CPU free" in run["room"], run["room"]
            assert {s["step"] for s in run["steps"]} >= {"consolidate", "dedup", "decay", "maintain"}
            assert api.post(f"/v1/sleep/runs/{run_id}/cancel").status_code == 409  # it has ended
        started = _descendants(proc.pid)
        assert any("raylet" in " ".join(p.cmdline()) for p in started)
        assert server.status().running

        # Everything this service and the Ray it started listen on is on loopback; the database on
        # a unix socket only; Ray's job endpoints refuse a caller without the token.
        deadline = time.monotonic() + 60
        while True:  # Ray's agents open their ports shortly after the app is up
            found = netcheck.listeners(
                netcheck.process_tree(proc.pid) | netcheck.postgres_of(str(home / "pg" / "data"))
            )
            refused = netcheck.job_submission_statuses(found, token=None)
            if 401 in refused.values() or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert any(f.port == port for f in found)
        assert netcheck.exposed(found) == [], "listening beyond loopback:\n" + "\n".join(map(str, found))
        assert not [f for f in found if f.name == "postgres"]
        assert 401 in refused.values() and not [s for s in refused.values() if s < 400], refused
        token = home / "ray" / "auth_token"
        assert stat.S_IMODE(token.stat().st_mode) == 0o600 and stat.S_IMODE(token.parent.stat().st_mode) == 0o700

        started = _stop(proc, err)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in started) or server.status().running
        ):
            time.sleep(0.5)
        left = [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert left == [], f"processes left behind: {left}"
        assert not server.status().running
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in _descendants(proc.pid):
            p.kill()  # the database's watchdog among them: stop its server too, or it outlives a failed test
        server.stop(force=True)
    stopped = err.read_text()
    assert "stopping what cabrain up started" in stopped
    assert (
        stopped.index("stopping the Serve application")
        < stopped.index("stopping Ray")
        < stopped.index("releasing the embedded PostgreSQL")
    )

    # The operator disables the first admin and makes another; `cabrain up` again leaves both as they are.
    disabled = run_cli("agents", "disable", "admin", env=env)
    assert disabled.returncode == 0, disabled.stderr
    made = run_cli("agents", "create", "ops", "--admin", env=env)
    assert made.returncode == 0, made.stderr
    printed = dict(line.split(":", 1) for line in made.stdout.splitlines() if ":" in line)
    ops_key = printed["key   "].strip()
    env2 = dict(env, CABRAIN_API_PORT=str(free_port()))
    again, out2, err2 = _start_up(home, env2, "up2")
    url = f"http://127.0.0.1:{env2['CABRAIN_API_PORT']}"
    try:
        text = _wait_for_line(out2, "Ctrl-C stops everything", again, timeout=240)
        assert f"admin key: {key_file}\n" in text  # ops holds an active admin key; nothing was made
        assert key_file.read_text().strip() == key
        assert httpx.get(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {key}"}, timeout=120).status_code == 401
        ops = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ops_key}"}, timeout=120)
        agents = {a["id"]: a for a in ops.get("/v1/agents").json()["agents"]}
        assert agents["admin"]["disabled_at"] is not None and agents["ops"]["is_admin"] is True

        # The database under a running service: `db stop --force` is refused; a killed postmaster
        # is restarted by the service itself and the API answers again without anyone's help.
        assert ops.post("/v1/namespaces", json={"name": "ops-notes"}).status_code == 201
        assert ops.post(
            "/v1/memories", json={"content": "The backup runs at 02:00.", "namespace": "ops-notes"}
        ).is_success
        refused_stop = run_cli("db", "stop", "--force", env=env2)
        assert refused_stop.returncode == 1 and "running CaBrain service" in refused_stop.stderr
        assert server.status().running
        os.kill(server.status().pid, signal.SIGKILL)
        deadline = time.monotonic() + 90
        answers = []
        while time.monotonic() < deadline:
            try:
                answer = ops.post("/v1/recall", json={"query": "when does the backup run?", "namespace": "ops-notes"})
                answers.append(answer.status_code)
                if answer.status_code == 200:
                    break
                assert answer.status_code == 503 and answer.json()["error"]["type"], answer.text
            except httpx.HTTPError as exc:
                answers.append(type(exc).__name__)
            time.sleep(0.5)
        assert answers[-1] == 200, answers
        assert answer.json()["hits"][0]["memory"]["content"] == "The backup runs at 02:00.", answers
        healed = (home / "pg" / "log" / "reaper.log").read_text() + err2.read_text()
        assert "embedded_pg.restarting" in healed  # the watchdog or the service's supervisor restarted it
        print("answers while the database restarted:", answers)
        ops.close()
    finally:
        if again.poll() is None:
            again.send_signal(signal.SIGINT)
            again.wait(120)
        server.stop(force=True)  # a no-op after a clean stop


@pytest.mark.ray
def test_up_refuses_a_cluster_without_a_shared_database() -> None:
    env = cli_env(home=str(make_scratch_dir("cabrain-up-")), ray_address="ray://127.0.0.1:10001")
    result = subprocess.run(
        [sys.executable, "-m", "cabrain.cli", "up"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "CABRAIN_DATABASE_URL" in result.stderr
