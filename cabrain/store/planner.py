"""Steering the PostgreSQL planner for one statement, where its cost model is known to misjudge."""

from __future__ import annotations

import asyncpg


async def fetch_without(conn: asyncpg.Connection, sql: str, args: tuple, *, disable: tuple[str, ...]) -> list:
    """Run ``sql`` with the planner settings ``disable`` (e.g. ``enable_sort``) off for it alone."""
    if not disable:
        return list(await conn.fetch(sql, *args))
    nested = conn.is_in_transaction()
    async with conn.transaction():
        await conn.execute("; ".join(f"SET LOCAL {setting} = off" for setting in disable))
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            if nested:  # SET LOCAL lasts until the outer transaction ends: restore for the caller
                await conn.execute("; ".join(f"SET LOCAL {setting} = on" for setting in disable))
