"""Steering the PostgreSQL planner for one statement, where its cost model is known to misjudge."""

from __future__ import annotations

import asyncpg


async def fetch_without(
    conn: asyncpg.Connection, sql: str, args: tuple, *, disable: tuple[str, ...], local: dict[str, int] | None = None
) -> list:
    """Run ``sql`` with the planner settings ``disable`` (e.g. ``enable_sort``) off, and the
    numeric settings ``local`` (e.g. ``hnsw.ef_search``) set, for it alone."""
    changes = {**{setting: "off" for setting in disable}, **{k: str(int(v)) for k, v in (local or {}).items()}}
    if not changes:
        return list(await conn.fetch(sql, *args))
    nested = conn.is_in_transaction()
    async with conn.transaction():
        before = {name: await conn.fetchval("SELECT current_setting($1)", name) for name in changes} if nested else {}
        await conn.execute("; ".join(f"SET LOCAL {setting} = {value}" for setting, value in changes.items()))
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            if nested:  # SET LOCAL lasts until the outer transaction ends: restore for the caller
                await conn.execute("; ".join(f"SET LOCAL {setting} = {value}" for setting, value in before.items()))
