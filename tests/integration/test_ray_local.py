"""The local Ray that `cabrain up`, `cabrain sleep` and `cabrain workflows learn` start, seen by
another local user (issue 31, findings 11 and 16): its sessions, logs and sockets live in a folder
only we may enter (never the shared /tmp/ray, made open to everyone), and no port of it answers
/metrics without a key."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO, SCRATCH_BASE, cli_env

START = """
import json, os, sys
from pathlib import Path

import httpx, psutil

from cabrain import ray_runtime
from cabrain.settings import load_settings

settings = load_settings(home=Path(sys.argv[1]), ray_num_cpus=1, ray_object_store_bytes=80 * 1024 * 1024)
assert ray_runtime.init_ray(settings)  # the helper `cabrain up` and `cabrain sleep` start their local Ray with
import ray

node = ray._private.worker.global_worker.node
listening = set()
for proc in psutil.Process().children(recursive=True):  # Ray's own processes: gcs, raylet, agents, workers
    try:
        listening |= {(c.laddr.ip, c.laddr.port) for c in proc.net_connections("inet") if c.status == "LISTEN"}
    except psutil.Error:
        pass
metrics = {}
for ip, port in sorted(listening):
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        metrics[port] = [answer.status_code, answer.text[:200]]
    except httpx.HTTPError as exc:
        metrics[port] = [None, type(exc).__name__]
print(json.dumps({
    "temp": node.get_temp_dir_path(),
    "session": node.get_session_dir_path(),
    "metrics_export_port": node.metrics_export_port,
    "nodes_metrics_port": [n.get("MetricsExportPort") for n in ray.nodes()],
    "listening": sorted(listening),
    "metrics": metrics,
}), flush=True)
ray.shutdown()
"""


def _start(home: Path) -> dict:
    env = cli_env(home=str(home))
    for name in ("RAY_ADDRESS", "RAY_enable_metrics_collection"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", START, str(home)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _top_private(folder: Path) -> None:
    st = os.lstat(folder)
    assert stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700  # not world-writable


def _checked(found: dict, top: Path) -> None:
    session = Path(found["session"])
    assert not str(session).startswith("/tmp/ray/") and Path("/tmp/ray") not in session.parents
    assert top in session.parents
    _top_private(top)
    # what Ray makes open to everyone lies behind that folder: no other user reaches the raylet's sockets
    assert (session / "sockets").is_dir()
    # finding 16: Ray opened no metrics port, and no port of it answers /metrics
    assert found["metrics_export_port"] in (None, 0, -1)
    assert all(port in (None, 0, -1) for port in found["nodes_metrics_port"])
    answered = {port: got for port, got in found["metrics"].items() if got[0] == 200}
    assert answered == {}, answered
    assert all(ip in ("127.0.0.1", "::1", "::ffff:127.0.0.1") for ip, _ in found["listening"])


@pytest.mark.ray
@pytest.mark.parametrize("length", ["short", "long"])
def test_the_local_ray_keeps_its_sessions_private_and_opens_no_metrics_port(length: str) -> None:
    # straight under the tests' temporary folder, not in the run's own (whose longer path would not
    # leave room for Ray's sockets under a "short" home); removed below
    base = Path(tempfile.mkdtemp(prefix="cr-", dir=SCRATCH_BASE))
    tops: list[Path] = []
    try:
        home = base / "home" if length == "short" else base / ("a-long-home-" + "x" * 60) / "home"
        found = _start(home)
        if length == "short":
            _checked(found, home / "ray")
        else:  # Ray's socket paths would not fit under home: a private mkdtemp folder, recorded
            top = Path((home / "ray" / "temp_dir").read_text().strip())
            tops.append(top)
            assert top.name.startswith("cabrain-ray-") and top not in (home / "ray").parents
            _checked(found, top)
            _top_private(home / "ray")
            again = _start(home)  # the same private folder, while it is still ours and 0700
            assert Path(again["session"]).parent.parent == top
            top.chmod(0o777)  # no longer private: a fresh one
            third = _start(home)
            tops.append(Path((home / "ray" / "temp_dir").read_text().strip()))
            assert top not in Path(third["session"]).parents
            _checked(third, tops[-1])
    finally:
        for folder in [*tops, base]:
            shutil.rmtree(folder, ignore_errors=True)
