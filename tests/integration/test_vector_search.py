"""Vector search's choice between the exact scan and the HNSW graph, and its guard against short results."""

import re

import numpy as np
import pytest

from cabrain.search import vector
from cabrain.store import vector as vector_sql
from cabrain.store.keyword import SearchFilters
from cabrain.store.planner import fetch_without

INSERT = """
INSERT INTO memories (id, namespace, owner_agent_id, content, embedding, valid_at, source_kind, source_ref)
VALUES (gen_random_uuid(), $1, 'agent-a', 'memory', $2, now(), 'manual', 'test')
"""
HNSW_SCANS = "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'memory_vectors_hnsw'"


def vectors(n: int, seed: int, dim: int = 384) -> list[np.ndarray]:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return list(rows / np.linalg.norm(rows, axis=1, keepdims=True))


@pytest.fixture
async def two_namespaces(conn):
    """A large namespace (600) and a small one (30) sharing the one graph."""
    await conn.execute("INSERT INTO agents (id) VALUES ('agent-a')")
    for name, n, seed in (("big", 600, 1), ("small", 30, 2)):
        await conn.execute("INSERT INTO namespaces (name, owner_agent_id) VALUES ($1, 'agent-a')", name)
        await conn.executemany(INSERT, [(name, v) for v in vectors(n, seed)])
        await conn.execute("UPDATE namespaces SET memory_count = $2 WHERE name = $1", name, n)
    await conn.execute("ANALYZE memory_vectors")
    return conn


async def hnsw_scans(conn) -> int:
    await conn.execute("SELECT pg_stat_force_next_flush()")
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    return await conn.fetchval(HNSW_SCANS)


def test_small_namespaces_in_a_large_graph_are_searched_exactly():
    # Up to exact_max always exactly.
    assert vector.exact_is_cheaper(5_000, 10_000_000, 40, exact_max=5_000, skip_cost=30)
    # 10k among 1.19M: walking the graph would step over ~119 others per row of it.
    assert vector.exact_is_cheaper(10_000, 1_190_000, 40, exact_max=5_000, skip_cost=30)
    # The large namespace itself goes through the graph.
    assert not vector.exact_is_cheaper(1_000_000, 1_190_000, 40, exact_max=5_000, skip_cost=30)
    # A namespace that is the whole graph, past exact_max.
    assert not vector.exact_is_cheaper(20_000, 20_000, 40, exact_max=5_000, skip_cost=30)
    # skip_cost 0: exact_max alone decides.
    assert not vector.exact_is_cheaper(10_000, 1_190_000, 40, exact_max=5_000, skip_cost=0)
    # A total counted before the last writes (stale reltuples) is never taken as below the namespace.
    assert not vector.exact_is_cheaper(20_000, 0, 40, exact_max=5_000, skip_cost=30)


async def test_the_choice_follows_the_namespace_share_of_the_graph(two_namespaces):
    conn = two_namespaces
    query = vectors(1, 9)[0]
    exact = await vector.search(conn, query, SearchFilters("small", "agent-a"), 10, exact_max=1000)

    before = await hnsw_scans(conn)
    # 30 of 630 vectors, past exact_max 10: the skip cost sends it to the exact scan...
    rows = await vector.search(conn, query, SearchFilters("small", "agent-a"), 10, exact_max=10, skip_cost=30)
    assert [r["id"] for r in rows] == [r["id"] for r in exact]
    assert await hnsw_scans(conn) == before
    # ...while the large namespace (600 of 630) walks the graph.
    rows = await vector.search(conn, query, SearchFilters("big", "agent-a"), 10, exact_max=10, skip_cost=30)
    assert len(rows) == 10
    assert await hnsw_scans(conn) == before + 1


async def test_a_walk_that_gives_up_early_falls_back_to_the_exact_scan(two_namespaces):
    conn = two_namespaces
    query = vectors(1, 9)[0]
    filters = SearchFilters("small", "agent-a")
    # The large namespace is the query's neighbourhood, the small one its far side: a walk limited
    # to a handful of vectors meets only the large namespace's.
    for name, seed, centre in (("big", 3, query), ("small", 4, -query)):
        ids = [r["id"] for r in await conn.fetch("SELECT id FROM memories WHERE namespace = $1 ORDER BY id", name)]
        moved = np.asarray(vectors(len(ids), seed)) * 0.3 + centre
        await conn.executemany("UPDATE memories SET embedding = $2 WHERE id = $1", zip(ids, list(moved), strict=False))
    exact = await vector.search(conn, query, filters, 10, exact_max=1000)
    assert len(exact) == 10

    await conn.execute("SET hnsw.ef_search = 10")
    await conn.execute("SET hnsw.max_scan_tuples = 1")
    await conn.execute("SET hnsw.iterative_scan = relaxed_order")
    args = vector_sql.SEARCH.args(filters.params(), limit=10, vector=query)
    short = await fetch_without(
        conn, vector_sql.SEARCH.sql, args, disable=("enable_sort", "enable_hashjoin", "enable_mergejoin")
    )
    assert len(short) < 10

    # The search notices and answers in full, exactly as the exact scan does.
    rows = await vector.search(conn, query, filters, 10, exact_max=10, skip_cost=0)
    assert [r["id"] for r in rows] == [r["id"] for r in exact]
    assert [round(float(r["distance"]), 6) for r in rows] == [round(float(r["distance"]), 6) for r in exact]
    # A namespace with fewer rows than asked for is not re-searched for rows it does not have.
    rows = await vector.search(conn, query, filters, 50, exact_max=10, skip_cost=0, size=30)
    assert len(rows) == 30


async def generic_plan(conn, sql: str, disable: tuple[str, ...], literals: str) -> str:
    """The plan PostgreSQL keeps for ``sql`` under ``disable`` whatever its parameters."""
    async with conn.transaction():
        await conn.execute(
            "; ".join(f"SET LOCAL {s} = off" for s in disable) + "; SET LOCAL plan_cache_mode = force_generic_plan"
        )
        await conn.execute(f"PREPARE shape AS {sql}")
        try:
            return "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN (COSTS OFF) EXECUTE shape({literals})"))
        finally:
            await conn.execute("DEALLOCATE shape")


async def test_the_hot_path_searches_keep_one_plan_that_walks_the_indexes(two_namespaces):
    # The graph walk and BM25's lookups are planned once per connection (planning them for each
    # call cost more than the walk): their plan must not depend on the parameters. Left to itself
    # the planner's parameter-blind plan materialised the namespace's rows (363 ms at 100k).
    from cabrain.store import keyword

    conn = two_namespaces
    await conn.execute("ANALYZE memories")
    scope = {
        "namespace": "'big'",
        "agent": "'agent-a'",
        "include_invalid": "false",
        "sitting_summaries": "false",
        **dict.fromkeys(("networks", "memory_types", "source_kinds", "valid_from", "valid_to", "as_of"), "NULL"),
        "limit": "10",
        "vector": "'[" + ",".join(f"{x:.5f}" for x in vectors(1, 9)[0]) + "]'",
        "passages": "40",
    }

    def literals(statement, **more: str) -> str:  # in the order the statement numbers its names
        values = {**scope, **more}
        return ", ".join(values[name] for name in statement.names)

    for statement in (vector_sql.SEARCH, vector_sql.PASSAGES):
        plan = await generic_plan(conn, statement.sql, vector.GRAPH_WALK, literals(statement))
        assert "Index Scan using memory_vectors_hnsw" in plan or "Index Scan using memory_chunks_vec" in plan
        assert "Materialize" not in plan and "Hash Join" not in plan and "Merge Join" not in plan
        assert re.search(r"Index Cond: \(.*\bid = ", plan), plan  # each row looked up by its key
    bm25 = {"terms": "ARRAY['memory']", "qtfs": "ARRAY[1]", "idfs": "ARRAY[1.5::float8]", "k1": "1.2", "b": "0.75"}
    bm25 |= {"avgdl": "10.0", "budget": "2000", "shortlist": "40"}
    plan = await generic_plan(conn, keyword.SEARCH.sql, keyword.LOOKUPS, literals(keyword.SEARCH, **bm25))
    assert "Index Only Scan using memory_terms_lookup" in plan
    assert "Materialize" not in plan and "Hash Join" not in plan and "Merge Join" not in plan
    assert re.search(r"Index Cond: \(.*\bid = ", plan), plan

    # And that plan is what the searches run, call after call.
    for seed in range(5):
        rows = await vector.search(conn, vectors(1, seed)[0], SearchFilters("big", "agent-a"), 10, exact_max=10)
        assert len(rows) == 10
    [plans] = await conn.fetch(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", vector_sql.SEARCH.sql
    )
    assert plans["custom_plans"] == 0 and plans["generic_plans"] == 5
