"""Faults the service rides out: a killed model replica, a restarted PostgreSQL."""

from __future__ import annotations

import os
import signal
import time

from tests.service.conftest import Service


def test_a_killed_embedder_replica_is_replaced_and_requests_resume(service: Service) -> None:
    from ray import serve

    handle = serve.get_deployment_handle("Embedder", app_name="cabrain")
    before = handle.info.remote().result(timeout_s=60)
    os.kill(before["pid"], signal.SIGKILL)
    with service.client("alice") as alice:
        # fresh queries: each needs the embedder, so each waits for (or retries onto) the replacement
        statuses = [
            alice.post("/v1/recall", json={"query": f"what happened after crash number {i}?", "namespace": "proj"})
            .status_code
            for i in range(5)
        ]  # fmt: skip
    assert statuses == [200] * 5
    after = handle.info.remote().result(timeout_s=60)
    assert after["pid"] != before["pid"]


def test_the_pool_reconnects_after_postgres_restarts(service: Service) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/recall", json={"query": "before the restart", "namespace": "proj"}).status_code == 200
        started = time.monotonic()
        service.pg.restart()
        assert time.monotonic() - started < 60
        written = alice.post("/v1/memories", json={"content": "Written just after a database restart.", "namespace": "proj"})
        assert written.status_code == 200, written.text
        for i in range(3):
            response = alice.post("/v1/recall", json={"query": f"after the restart {i}", "namespace": "proj"})
            assert response.status_code == 200, response.text
        assert alice.get(f"/v1/memories/{written.json()['memory_id']}").status_code == 200
