"""Faults the service rides out: a killed model replica, a restarted PostgreSQL."""

from __future__ import annotations

import os
import signal
import time

import psutil

from cabrain import ray_runtime
from cabrain.settings import Settings
from tests.service.conftest import Service


def test_a_killed_embedder_replica_is_replaced_and_requests_resume(service: Service) -> None:
    from ray import serve

    handle = serve.get_deployment_handle("Embedder", app_name="cabrain")
    before = handle.info.remote().result(timeout_s=60)
    os.kill(before["pid"], signal.SIGKILL)
    with service.client("alice") as alice:
        # fresh queries: each needs the embedder, so each waits for (or retries onto) the replacement
        statuses = [
            alice.post(
                "/v1/recall", json={"query": f"what happened after crash number {i}?", "namespace": "proj"}
            ).status_code
            for i in range(5)
        ]
    assert statuses == [200] * 5
    after = handle.info.remote().result(timeout_s=60)
    assert after["pid"] != before["pid"]


def test_the_pool_reconnects_after_postgres_restarts(service: Service) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/recall", json={"query": "before the restart", "namespace": "proj"}).status_code == 200
        service.pg.restart()
        written = alice.post(
            "/v1/memories", json={"content": "Written just after a database restart.", "namespace": "proj"}
        )
        assert written.status_code == 200, written.text
        for i in range(3):
            response = alice.post("/v1/recall", json={"query": f"after the restart {i}", "namespace": "proj"})
            assert response.status_code == 200, response.text
        assert alice.get(f"/v1/memories/{written.json()['memory_id']}").status_code == 200


def test_a_killed_postmaster_under_load_is_restarted_and_the_api_recovers_by_itself(service: Service) -> None:
    """SIGKILL of the embedded PostgreSQL while clients write and read: its watchdog restarts it, the
    API answers 503 (JSON) meanwhile and 200 again after, with nobody's help, and every write it
    acknowledged is there."""
    import threading

    import httpx

    stop = threading.Event()
    seen: list[tuple[float, int]] = []
    written: list[str] = []
    bodies: list[str] = []

    def client(i: int) -> None:
        with service.client("alice", timeout=30) as alice:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    if n % 2:
                        r = alice.post(
                            "/v1/memories", json={"content": f"Load writer {i} note {n}.", "namespace": "proj"}
                        )
                        if r.status_code == 200:
                            written.append(r.json()["memory_id"])
                    else:
                        r = alice.post("/v1/recall", json={"query": f"writer {i} note", "namespace": "proj"})
                    if r.status_code != 200:
                        assert r.json()["error"]["type"], r.text  # a JSON error, never a bare 500 page
                    seen.append((time.monotonic(), r.status_code))
                    if r.status_code not in (200, 503):
                        bodies.append(r.text)
                except httpx.HTTPError:
                    seen.append((time.monotonic(), 0))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(2)
    killed_at = time.monotonic()
    os.kill(service.pg.status().pid, signal.SIGKILL)
    deadline = killed_at + 240  # inside the suite's own 300 s a test
    recovered = None
    while time.monotonic() < deadline and recovered is None:
        time.sleep(0.5)
        after = [status for at, status in seen if at > killed_at + 1]
        if after[-6:] == [200] * 6 and len(after) >= 6:
            recovered = time.monotonic() - killed_at
    stop.set()
    for t in threads:
        t.join(60)
    assert recovered is not None, (
        f"no recovery; statuses after the kill: {[s for at, s in seen if at > killed_at][-20:]}"
    )
    assert {status for _, status in seen} <= {200, 503}, bodies[:3]
    with service.client("alice") as alice:
        missing = [m for m in written if alice.get(f"/v1/memories/{m}").status_code != 200]
    assert written and missing == []


def _ours(proc: psutil.Process, temp_dir: str) -> bool:
    """Whether ``proc`` is a worker of the session's Ray (its raylet runs in ``temp_dir``), not of a
    `cabrain up` another test runs at the same time."""
    try:
        parent = proc.parent()
        return parent is not None and f"--temp_dir={temp_dir}" in parent.cmdline()
    except psutil.Error:
        return False


def test_requests_in_flight_when_the_ingress_dies_get_a_json_503_and_the_api_comes_back(
    service: Service, ray_cluster: Settings
) -> None:
    """Serve's proxy answers for a replica that died under a request: CaBrain's JSON 503, not a
    plain-text 500; a replacement replica then serves again."""
    import threading

    import httpx

    temp_dir = str(ray_runtime.ray_temp_dir(ray_cluster))
    ingress = [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if "ServeReplica:cabrain:Ingress" in " ".join(p.info["cmdline"] or []) and _ours(p, temp_dir)
    ]
    assert len(ingress) == 1
    answers: list[httpx.Response] = []

    def slow_batch(i: int) -> None:
        items = [
            {
                "content": f"In-flight note {i}-{n}: the {n}th long-running write of many words, " * 3,
                "namespace": "proj",
            }
            for n in range(120)
        ]
        with service.client("alice", timeout=120) as alice:
            answers.append(alice.post("/v1/memories/batch", json={"items": items, "decide": False}))

    threads = [threading.Thread(target=slow_batch, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # the batches are embedding now
    for proc in ingress:
        proc.kill()
    for t in threads:
        t.join(150)
    assert answers and all(a.status_code in (200, 503) for a in answers), [
        (a.status_code, a.text[:200]) for a in answers
    ]
    failed = [a for a in answers if a.status_code == 503]
    assert failed, "no request was in flight when the replica died"
    for answer in failed:
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.json()["error"]["type"] == "service_unavailable" and answer.headers["retry-after"]
    deadline = time.monotonic() + 180
    with service.client("alice") as alice:
        while time.monotonic() < deadline:
            ready = alice.get("/v1/ready")
            if ready.status_code == 200:
                break
            assert ready.headers["content-type"].startswith("application/json"), ready.text
            time.sleep(1)
        assert alice.post("/v1/recall", json={"query": "in-flight note", "namespace": "proj"}).status_code == 200
