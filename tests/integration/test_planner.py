"""fetch_without: planner settings changed for one statement alone, inside a transaction or not."""

from cabrain.store.planner import fetch_without

SHOW = "SELECT current_setting('enable_sort') AS sort, current_setting('hnsw.ef_search') AS ef"


async def test_settings_apply_to_the_statement_and_are_restored_after_it(conn):
    await conn.execute("SET hnsw.ef_search = 40")
    [row] = await fetch_without(conn, SHOW, (), disable=("enable_sort",), local={"hnsw.ef_search": 17})
    assert (row["sort"], row["ef"]) == ("off", "17")
    assert (await conn.fetchrow(SHOW))["ef"] == "40" and (await conn.fetchrow(SHOW))["sort"] == "on"
    async with conn.transaction():  # nested: SET LOCAL would outlive the statement; it must not
        await conn.execute("SET LOCAL hnsw.ef_search = 33")
        [row] = await fetch_without(conn, SHOW, (), disable=("enable_sort",), local={"hnsw.ef_search": 12})
        assert (row["sort"], row["ef"]) == ("off", "12")
        after = await conn.fetchrow(SHOW)
        assert (after["sort"], after["ef"]) == ("on", "33")
    assert (await conn.fetchrow(SHOW))["ef"] == "40"


async def test_a_failing_statement_leaves_no_transaction_and_the_settings_unchanged(conn):
    import asyncpg
    import pytest

    with pytest.raises(asyncpg.DivisionByZeroError):
        await fetch_without(conn, "SELECT 1 / 0", (), disable=("enable_sort",), local={"hnsw.ef_search": 11})
    assert not conn.is_in_transaction()
    assert (await conn.fetchrow(SHOW))["sort"] == "on"
    assert await conn.fetchval("SELECT 41 + 1") == 42


async def test_a_steered_statement_is_always_planned_for_its_parameters(conn):
    # PostgreSQL switches a prepared statement to a generic plan after a few runs; the steered
    # searches must not be (their generic plans were measured 36x slower).
    steered = "SELECT count(*) FROM pg_class WHERE relname = $1 AND relkind::text = $2"
    plain = "SELECT count(*) FROM pg_class WHERE relname = $1 AND relkind::text = $2 AND true"
    for _ in range(8):
        await fetch_without(conn, steered, ("pg_class", "r"), disable=("enable_sort",))
        await conn.fetch(plain, "pg_class", "r")
    plans = {
        r["statement"]: r
        for r in await conn.fetch("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
    }
    assert plans[steered]["generic_plans"] == 0 and plans[steered]["custom_plans"] == 8
    assert plans[plain]["generic_plans"] > 0  # what would happen otherwise


async def test_a_generic_statement_is_planned_once_per_connection(conn):
    sql = "SELECT count(*) FROM pg_class WHERE relname = $1 AND relkind::text = $2 AND 1 = 1"
    for name in ("pg_class", "pg_type", "pg_proc", "pg_class"):
        [row] = await fetch_without(conn, sql, (name, "r"), disable=("enable_sort",), generic=True)
        assert row["count"] == 1
    [plans] = await conn.fetch(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", sql
    )
    assert plans["custom_plans"] == 0 and plans["generic_plans"] == 4
