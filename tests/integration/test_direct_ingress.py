"""``CABRAIN_SERVE_DIRECT_INGRESS``: the ingress replica answers HTTP on the API's port itself (Ray
Serve's direct ingress), without the hop through Serve's proxy (docs/BENCHMARKS.md, issue 37).

``cabrain up`` on a fresh home with the switch on: the process listening on ``CABRAIN_API_PORT`` is
the ingress replica, on loopback; the examples ``cabrain up`` prints run as printed (a retain, then
a recall that finds it); what CaBrain's proxy middleware does (JSON errors, the proxy's stage in
``Server-Timing``) is done there too; a replica that dies is replaced on the same port; Ctrl-C stops
it with exit code 0.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from cabrain.store.embedded import EmbeddedPostgres
from tests.conftest import cli_env, free_port, make_scratch_dir

CABRAIN = Path(sys.executable).parent / "cabrain"


def _printed(path: Path, proc: subprocess.Popen[bytes], err: Path) -> str:
    """What ``cabrain up`` printed once it says it is up (bounded by the test's own time limit)."""
    while True:
        text = path.read_text()
        if "Ctrl-C stops everything" in text:
            return text
        assert proc.poll() is None, f"`cabrain up` ended early:\n{text[-2000:]}\n{err.read_text()[-3000:]}"
        time.sleep(0.5)


def _listener(port: int) -> psutil.Process:
    [conn] = [
        c
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
    ]
    assert conn.laddr.ip == "127.0.0.1", conn
    assert conn.pid is not None
    return psutil.Process(conn.pid)


@pytest.mark.ray
def test_the_ingress_replica_answers_on_the_api_port_itself() -> None:
    home = make_scratch_dir("cabrain-direct-ingress-")
    port = free_port()
    env = cli_env(
        home=str(home),
        api_port=str(port),
        serve_direct_ingress="true",
        api_server_timing="true",
        ray_num_cpus="2",
        ray_object_store_bytes=str(100 * 1024**2),
    )
    out, err = home / "up.out", home / "up.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen([str(CABRAIN), "up"], env=env, stdout=stdout, stderr=stderr)
    server = EmbeddedPostgres(home / "pg")
    try:
        text = _printed(out, proc, err)
        url = f"http://127.0.0.1:{port}"
        assert f"export CABRAIN_API_URL={url}" in text

        listener = _listener(port)
        assert "ServeReplica" in " ".join(listener.cmdline()), listener.cmdline()
        assert "ProxyActor" not in " ".join(listener.cmdline())

        # the examples as printed: a retain, then a recall that finds it, through the replica's port
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("try it:")) + 1
        last = next(i for i in range(first, len(lines)) if lines[i].startswith("Ctrl-C stops everything"))
        examples = [line.strip() for line in lines[first:last] if line.strip()]
        exports = [line.strip() for line in lines if line.strip().startswith("export ")]
        script = "\n".join(["set -euo pipefail", *exports, *examples])
        shell = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
        assert shell.returncode == 0, shell.stdout + shell.stderr
        assert "We chose pgvector." in shell.stdout

        # CaBrain's proxy middleware runs in the replica's own server: the proxy's stage is timed there
        key = (home / "admin.key").read_text().strip()
        answer = httpx.get(f"{url}/v1/health", headers={"Authorization": f"Bearer {key}"}, timeout=60)
        assert answer.status_code == 200
        assert "proxy;dur=" in answer.headers["server-timing"], answer.headers
        missing = httpx.get(f"{url}/v1/no-such-route", headers={"Authorization": f"Bearer {key}"}, timeout=60)
        assert missing.status_code == 404 and missing.json()["error"]["type"], missing.text
        refused = httpx.get(f"{url}/v1/memories", headers={"Authorization": "Bearer cbk_not-a-key"}, timeout=60)
        assert refused.status_code == 401 and refused.json()["error"]["type"], refused.text

        # the replica dies: Serve starts another, which takes the node's port back
        listener.kill()
        listener.wait(30)
        while True:  # bounded by the test's own time limit
            try:
                if httpx.get(f"{url}/v1/ready", timeout=10).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        again = _listener(port)
        assert again.pid != listener.pid and "ServeReplica" in " ".join(again.cmdline())

        proc.send_signal(signal.SIGINT)
        code = proc.wait()
        said = out.read_text() + err.read_text()
        assert code == 0, said[-3000:]
        assert "Traceback" not in said, said[-3000:]
    finally:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.wait()
        server.stop(force=True)
