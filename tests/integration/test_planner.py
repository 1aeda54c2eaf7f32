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
