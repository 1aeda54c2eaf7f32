"""The audit's page at scale (issue 36): a namespace with 200,000 judgments is read a page at a time
from the (namespace, created_at, id) indexes of schema 0021 - the plan walks an index in order and
stops after the page, with or without a filter - never by sorting the namespace's judgments."""

from __future__ import annotations

import json
import time

import asyncpg

from cabrain.store import audit as audit_sql
from cabrain.types import MemoryInput, Visibility

JUDGMENTS = 200_000


async def _plan(conn: asyncpg.Connection, **filters: object) -> dict:
    args = {
        "namespace": "proj",
        "agent": "bob",
        "kind": None,
        "decided_by": None,
        "since": None,
        "until": None,
        "after_at": None,
        "after_id": None,
        "limit": 51,
    } | filters
    raw = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + audit_sql.PAGE.sql, *audit_sql.PAGE.args(args))
    return json.loads(raw)[0]


def _nodes(plan: dict) -> list[dict]:
    out = [plan]
    for child in plan.get("Plans", []):
        out += _nodes(child)
    return out


async def test_the_audit_page_is_read_from_its_index_at_scale(brain, db_dsn):
    await brain.share("alice", "proj", "bob")
    items = [MemoryInput(f"Fact number {i} about the fleet.", "proj", visibility=Visibility.TEAM) for i in range(200)]
    ids = [r.memory_id for r in await brain.retain("alice", items, decide=False)]
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute(
            """
            INSERT INTO judgments (id, namespace, kind, origin, decided_by, agent_id, reason, changes, memory_ids, created_at)
            SELECT gen_random_uuid(), 'proj', (ARRAY['supersede', 'merge', 'decay', 'correction'])[1 + n % 4],
                   (ARRAY['write', 'dedup', 'decay', 'person'])[1 + n % 4],
                   (ARRAY['write', 'sleep', 'sleep', 'person'])[1 + n % 4], 'alice', 'at scale', '[]',
                   ARRAY[($1::uuid[])[1 + n % 200]], now() - n * interval '1 second'
            FROM generate_series(1, $2) AS n
            """,
            ids,
            JUDGMENTS,
        )
        await conn.execute("ANALYZE judgments")
        for filters in ({}, {"decided_by": "person"}, {"kind": "merge"}):
            plan = await _plan(conn, **filters)
            nodes = _nodes(plan["Plan"])
            scans = [n for n in nodes if n["Node Type"] in ("Index Scan", "Index Only Scan")]
            assert any(n.get("Index Name", "").startswith("judgments_audit") for n in scans), (filters, nodes)
            assert not any(n["Node Type"] == "Sort" for n in nodes), filters  # the index gives the order
            read = max(n.get("Actual Rows", 0) for n in nodes if n.get("Relation Name") == "judgments")
            assert read <= 51, (filters, read)  # the page, not the namespace
            print(f"audit page {filters or 'unfiltered'}: {plan['Execution Time']:.1f} ms in the database")
    finally:
        await conn.close()
    for _ in range(3):  # the first call prepares its statements (printed: measured, not asserted)
        started = time.perf_counter()
        page = await brain.audit("bob", "proj", origin="person")
        print(f"Brain.audit (page, texts, counts): {(time.perf_counter() - started) * 1000:.1f} ms")
    conn = await asyncpg.connect(db_dsn)
    try:
        args = {"namespace": "proj", "agent": "bob", "since": None, "until": None, "cap": audit_sql.COUNTED}
        raw = await conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + audit_sql.COUNTS.sql, *audit_sql.COUNTS.args(args)
        )
        print(f"counts: {json.loads(raw)[0]['Execution Time']:.1f} ms in the database")
    finally:
        await conn.close()
    assert len(page["judgments"]) == 50 and page["next_cursor"] and page["counts_capped"]
