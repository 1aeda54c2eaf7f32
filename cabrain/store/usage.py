"""SQL of usage metering and caps (tables ``usage_daily``, ``agent_caps``; :mod:`cabrain.usage`)."""

from __future__ import annotations

from datetime import date
from typing import Any

import asyncpg

ADD = """
INSERT INTO usage_daily (day, agent_id, namespace, op, calls, units, cost_usd)
SELECT * FROM unnest($1::date[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::float8[])
ON CONFLICT (day, agent_id, namespace, op)
DO UPDATE SET calls = usage_daily.calls + EXCLUDED.calls, units = usage_daily.units + EXCLUDED.units,
              cost_usd = usage_daily.cost_usd + EXCLUDED.cost_usd
"""
PROFILE = """
SELECT a.role, a.is_admin, a.disabled_at IS NOT NULL AS disabled,
       COALESCE((SELECT jsonb_object_agg(c.op, c.per_day) FROM agent_caps c WHERE c.agent_id = a.id), '{}') AS caps
FROM agents a WHERE a.id = $1
"""
USED_TODAY = "SELECT op, sum(calls)::bigint AS calls FROM usage_daily WHERE agent_id = $1 AND day = $2 GROUP BY op"
REPORT = """
SELECT day, agent_id, namespace, op, calls, units, cost_usd FROM usage_daily
WHERE day BETWEEN $1 AND $2
  AND ($3::text IS NULL OR agent_id = $3)
  AND ($4::text IS NULL OR namespace = $4)
ORDER BY day, agent_id, namespace, op
"""
SET_CAP = """
INSERT INTO agent_caps (agent_id, op, per_day, set_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (agent_id, op) DO UPDATE SET per_day = EXCLUDED.per_day, set_by = EXCLUDED.set_by, set_at = now()
"""
CLEAR_CAP = "DELETE FROM agent_caps WHERE agent_id = $1 AND op = $2 RETURNING op"
CAPS = "SELECT agent_id, op, per_day, set_by, set_at FROM agent_caps WHERE ($1::text IS NULL OR agent_id = $1) ORDER BY 1, 2"


async def add(conn: asyncpg.Connection, rows: list[tuple[date, str, str, str, int, int, float]]) -> None:
    """Add counts (day, agent, namespace, op, calls, units, cost), in key order so that two writers
    adding overlapping rows cannot deadlock."""
    rows = sorted(rows)
    await conn.execute(ADD, *(list(col) for col in zip(*rows, strict=True)))


async def profile(conn: asyncpg.Connection, agent: str) -> asyncpg.Record | None:
    return await conn.fetchrow(PROFILE, agent)


async def used_today(conn: asyncpg.Connection, agent: str, day: date) -> dict[str, int]:
    return {r["op"]: r["calls"] for r in await conn.fetch(USED_TODAY, agent, day)}


async def report(
    conn: asyncpg.Connection, since: date, until: date, agent: str | None, namespace: str | None
) -> list[dict[str, Any]]:
    return [{**dict(r), "day": r["day"].isoformat()} for r in await conn.fetch(REPORT, since, until, agent, namespace)]


async def set_cap(conn: asyncpg.Connection, agent: str, op: str, per_day: int, set_by: str) -> None:
    await conn.execute(SET_CAP, agent, op, per_day, set_by)


async def clear_cap(conn: asyncpg.Connection, agent: str, op: str) -> bool:
    return await conn.fetchval(CLEAR_CAP, agent, op) is not None


async def caps(conn: asyncpg.Connection, agent: str | None) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch(CAPS, agent)]
