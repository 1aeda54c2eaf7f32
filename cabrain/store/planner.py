"""Steering the PostgreSQL planner for one statement, where its cost model is known to misjudge."""

from __future__ import annotations

import contextlib

import asyncpg


async def fetch_without(
    conn: asyncpg.Connection,
    sql: str,
    args: tuple,
    *,
    disable: tuple[str, ...],
    local: dict[str, int] | None = None,
    generic: bool = False,
) -> list:
    """Run ``sql`` with the planner settings ``disable`` (e.g. ``enable_sort``) off, and the
    numeric settings ``local`` (e.g. ``hnsw.ef_search``) set, for it alone.

    Which plan: by default always one made for the actual parameters
    (``plan_cache_mode = force_custom_plan``). A prepared statement run a few times on one
    connection may otherwise switch to PostgreSQL's generic plan, chosen without the parameters'
    values: for the graph search that plan materialised the namespace's rows and was measured at
    363 ms against 10 ms at 100k memories (docs/BENCHMARKS.md).

    ``generic``: plan once per connection and reuse the plan (``force_generic_plan``), for a
    statement whose settings leave it one sensible plan whatever the parameters - the hot path's
    graph walk and BM25 lookups, with sorting or hashing, merge joins and materialising disabled
    (``enable_material`` among ``disable``). Planning such a statement over the monthly partitions
    costs 1-2.5 ms a call, more than the graph walk itself at a million memories. PostgreSQL
    replans it by itself when a table it reads changes shape or statistics."""
    changes = {
        **dict.fromkeys(disable, "off"),
        "plan_cache_mode": "force_generic_plan" if generic else "force_custom_plan",
        **{k: str(int(v)) for k, v in (local or {}).items()},
    }
    sets = "; ".join(f"SET LOCAL {setting} = {value}" for setting, value in changes.items())
    if not conn.is_in_transaction():  # BEGIN and the settings in one round trip
        await conn.execute(f"BEGIN; {sets}")
        try:
            rows = list(await conn.fetch(sql, *args))
        except BaseException:  # the statement's error (or cancellation) is what the caller sees
            with contextlib.suppress(Exception):
                if not conn.is_closed():
                    await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")
        return rows
    async with conn.transaction():  # nested: SET LOCAL would outlive the statement; restore after
        names = list(changes)
        row = await conn.fetchrow(
            "SELECT " + ", ".join(f"current_setting(${i + 1})" for i in range(len(names))), *names
        )
        await conn.execute(sets)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.execute("; ".join(f"SET LOCAL {name} = {row[i]}" for i, name in enumerate(names)))
