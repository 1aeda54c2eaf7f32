"""Idempotent writes through the running service: in the namespace the service drops the database
connection right after every retain commits (the failpoint the service fixture arms), the replica
retries the write with the key it made for the request, and exactly one memory is written. A key
given by the client makes its own retries safe the same way."""

from __future__ import annotations

import uuid

import asyncpg

from tests.conftest import DROPPING_NAMESPACE
from tests.service.conftest import Service

NS = "idempotent"  # its own namespace: the service is shared by the session's tests


async def _sql(dsn: str, query: str, *args):
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchrow(query, *args)
    finally:
        await conn.close()


async def _killed(dsn: str) -> int:
    """Sessions of the service's database the server terminated (pg_terminate_backend counts)."""
    row = await _sql(dsn, "SELECT sessions_killed FROM pg_stat_database WHERE datname = current_database()")
    return row["sessions_killed"]


async def _written(dsn: str, content: str) -> tuple[int, int, int]:
    """(rows with this content, times a write reinforced it, retain events about it)."""
    row = await _sql(
        dsn,
        """SELECT count(*) AS n, coalesce(sum(m.access_count), 0) AS reinforced,
                  (SELECT count(*) FROM memory_events e JOIN memories x ON x.id = e.memory_id
                   WHERE x.content = $1 AND e.op = 'retain') AS events
           FROM memories m WHERE m.content = $1""",
        content,
    )
    return row["n"], row["reinforced"], row["events"]


async def test_a_write_whose_connection_drops_after_the_commit_is_stored_once(service: Service) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": DROPPING_NAMESPACE}).status_code in (200, 201)
        text = "The release train leaves every second Tuesday at 15:00."
        before = await _killed(service.dsn)
        written = alice.post("/v1/memories", json={"content": text, "namespace": DROPPING_NAMESPACE})
        assert written.status_code == 200, written.text
        assert written.json()["decision"] == "ADD"
        assert await _killed(service.dsn) > before  # the connection really was dropped after the commit
        assert await _written(service.dsn, text) == (1, 0, 1)

        # a batch, the same way: every item once
        texts = [f"On-call handbook, page {i}: escalate after {10 * i} minutes." for i in range(1, 4)]
        batch = alice.post(
            "/v1/memories/batch",
            json={"items": [{"content": t, "namespace": DROPPING_NAMESPACE} for t in texts], "decide": False},
        )
        assert batch.status_code == 200, batch.text
        assert [await _written(service.dsn, t) for t in texts] == [(1, 0, 1)] * 3


async def test_a_client_key_answers_a_repeat_without_writing_again(service: Service) -> None:
    key = f"client-{uuid.uuid4()}"
    body = {"content": "The VPN gateway certificate expires on 2027-03-01.", "namespace": NS}
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code in (200, 201)
        first = alice.post("/v1/memories", json=body, headers={"Idempotency-Key": key})
        again = alice.post("/v1/memories", json=body, headers={"Idempotency-Key": key})
        assert first.status_code == again.status_code == 200, again.text
        assert again.json() == first.json()
        assert await _written(service.dsn, body["content"]) == (1, 0, 1)

        other = alice.post(
            "/v1/memories", json={**body, "content": "Something else."}, headers={"Idempotency-Key": key}
        )
        assert other.status_code == 409 and other.json()["error"]["type"] == "conflict", other.text
        bad = alice.post("/v1/memories", json=body, headers={"Idempotency-Key": "x" * 201})
        assert bad.status_code in (400, 422), bad.text

    # the Python client makes a key per call, so its own retries are safe too
    with service.api("alice") as api:
        from cabrain.types import MemoryInput

        item = MemoryInput(content="The badge printer lives on floor 4.", namespace=NS)
        one = api.retain(item, idempotency_key=key + "-py")
        assert api.retain(item, idempotency_key=key + "-py") == one
        assert await _written(service.dsn, item.content) == (1, 0, 1)
