"""``cabrain bench`` (the one-run benchmark) at a tiny scale, and its bulk loader's faithfulness."""

import asyncio
import json
import random

import psutil
import pytest

from cabrain.bench.corpus import AGENT, ENTITY_NAMES, synthetic_text
from cabrain.bench.load import Corpus, bulk_load, graph_build_memory, index_definitions
from cabrain.bench.measure import local_service
from cabrain.errors import ConfigError
from cabrain.settings import load_settings
from cabrain.store.db import connect
from cabrain.text.tokenizer import term_frequencies
from cabrain.types import RecallQuery
from tests.conftest import bench_env, run_cli, run_cli_process


async def test_bulk_load_writes_what_retain_would_and_restores_every_index(open_brain):
    brain = await open_brain()
    await brain.create_agent(AGENT)
    async with brain.engine.pool.acquire() as conn:
        before = await index_definitions(conn)
    phases = await bulk_load(brain, Corpus({"big": 900, "small": 60}, real=40), quiet=True)
    assert set(phases) == {"embed_real_s", "copy_s", "index_s", "vacuum_s"}
    async with brain.engine.pool.acquire() as conn:
        assert await index_definitions(conn) == before  # the same indexes and keys, rebuilt
        hnsw = await conn.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'memory_vectors' AND indexdef LIKE '%USING hnsw%'"
        )
        assert hnsw == 1  # the one graph, rebuilt
        assert await conn.fetchval("SELECT count(*) FROM memory_vectors") == 960  # every row's vector
        counts = {r["name"]: r["memory_count"] for r in await conn.fetch("SELECT name, memory_count FROM namespaces")}
        assert counts == {"big": 900, "small": 60}
        assert await conn.fetchval("SELECT count(*) FROM memory_ids") == 960
        # postings are the real tokenizer's, and the statistics agree with them
        rows = await conn.fetch("SELECT id, content FROM memories WHERE namespace = 'big' ORDER BY id LIMIT 20")
        for row in rows:
            tfs, length = term_frequencies(row["content"])
            postings = await conn.fetch("SELECT term, tf, doc_len FROM memory_terms WHERE memory_id = $1", row["id"])
            assert {p["term"]: p["tf"] for p in postings} == dict(tfs)
            assert {p["doc_len"] for p in postings} == {length}
        wrong_df = await conn.fetchval(
            "SELECT count(*) FROM bm25_terms b LEFT JOIN (SELECT namespace, term, count(*) AS n FROM memory_terms "
            "GROUP BY 1, 2) t USING (namespace, term) WHERE t.n IS DISTINCT FROM b.df"
        )
        assert wrong_df == 0
        stats = await conn.fetchrow("SELECT doc_count, total_len FROM bm25_namespaces WHERE namespace = 'big'")
        assert stats["doc_count"] == 900
        assert stats["total_len"] == await conn.fetchval(
            "SELECT sum(doc_len) FROM (SELECT DISTINCT memory_id, doc_len FROM memory_terms WHERE namespace = 'big') d"
        )
        # the entities the texts name, linked to exactly the memories naming them, counted as 0023 keeps them
        rows = await conn.fetch(
            "SELECT m.id, m.content, coalesce(array_agg(e.name) FILTER (WHERE e.name IS NOT NULL), '{}') AS named "
            "FROM memories m LEFT JOIN memory_entities me ON me.memory_id = m.id "
            "LEFT JOIN entities e ON e.id = me.entity_id WHERE m.namespace = 'small' GROUP BY m.id, m.content"
        )
        for row in rows:
            assert set(row["named"]) == set(row["content"].split()) & set(ENTITY_NAMES)
        assert any(row["named"] for row in rows)
        wrong_mentions = await conn.fetchval(
            "SELECT count(*) FROM entities e WHERE e.mentions <> "
            "(SELECT count(*) FROM memory_entities me WHERE me.entity_id = e.id)"
        )
        assert wrong_mentions == 0
        assert (
            await conn.fetchval("SELECT tgenabled::text FROM pg_trigger WHERE tgname = 'entity_mentions_links_in'")
            == "O"
        )  # the trigger the load turned off is on again
    text = synthetic_text(random.Random(Corpus.seed))  # the first real text (it keeps its own vector)
    result = await brain.recall(AGENT, RecallQuery(text, "big", k=3, rerank=False))
    assert result.hits[0].memory.content == text  # found by both indexes
    assert result.hits[0].breakdown.vector_rank == 1 and result.hits[0].breakdown.bm25_rank == 1


@pytest.mark.ray
@pytest.mark.subprocess
def test_bench_measures_everything_in_one_run_and_reuses_a_kept_corpus(tmp_path, pg_server, home):
    out = tmp_path / "out"
    env = bench_env(pg_server, home)
    args = [
        "bench",
        "--sizes",
        "300,600",
        "--namespaces",
        "3",
        "--queries",
        "6",
        "--concurrency",
        "1,4",
        "--retain-texts",
        "8",
        "--real-vectors",
        "40",
        "--keep",
        "--out",
        str(out),
    ]
    try:
        # a process of its own: the benchmark starts its own local Ray for the Serve application,
        # never the one this process may be connected to (where the service tests' application runs)
        result = run_cli_process(*args, env=env, timeout=400)
        assert result.returncode == 0, result.stderr[-3000:]
        data = json.loads((out / "results.json").read_text())
        assert [r["memories"] for r in data["sizes"]] == [300, 600]
        assert "Gaussian noise" in data["synthetic"]  # the report says what is synthetic
        for r in data["sizes"]:
            assert r["total_memories"] == r["memories"] + 2 * (r["memories"] // 100) and r["namespaces"] == 3
            assert r["load"]["seconds"] > 0 and r["load"]["kept"] == f"cabrain_bench_{r['total_memories']}"
            assert r["load"]["maintenance_work_mem"] == "64MB"  # auto: the graph's size, here the floor
            small = r["recall_small"]
            assert small["memories"] == r["memories"] // 100 and small["recall"]["1"]["errors"] == 0
            assert small["recall"]["1"]["p95"] > 0
            rt = r["retain"]
            assert rt["retain_batched_per_s"] > 0 and rt["bare_embedder_batched_per_s"] > 0
            assert rt["retain_call"] == 4  # half the texts in one call
            # the ratio is of the unrounded rates; the rates are reported to 0.1/s (a slow machine's 2.5/s: 2%)
            kept, bare = rt["retain_batched_per_s"], rt["bare_embedder_batched_per_s"]
            assert abs(rt["ratio_batched"] - kept / bare) < 0.01 + kept / bare * (0.05 / kept + 0.05 / bare)
            for level in ("1", "4"):
                assert r["recall"][level]["errors"] == 0 and r["recall"][level]["p95"] > 0
                assert r["http"]["recall"][level]["errors"] == 0 and r["http"]["recall"][level]["p95"] > 0
                cache = r["recall_cache"]
                assert cache["source"] == "a private redis-server"
                assert cache["hit"][level]["p50"] < cache["miss"][level]["p50"]  # hits skip the search
            assert r["floor_ms"]["hnsw"]["p50"] > 0 and r["embed_query_ms"]["p50"] > 0
            stages = r["recall"]["1"]["stages"]  # where recall's time went, from its own timings
            assert {"lookups", "embed", "bm25", "vector", "total"} <= set(stages) and "stages" not in r["recall"]["4"]
            assert stages["embed"]["p50"] > 0 and stages["total"]["p50"] > stages["embed"]["p50"]
            assert r["warm"]["prewarmed_mb"] > 0  # the HNSW and BM25 indexes read into shared buffers
            assert r["warm"]["rows_cached_mb"] > 0  # and the rows recall reads into the OS cache
            assert r["overhead"]["ratio_p50"] > 0
            assert "skipped" in r["recall_rerank"]  # no reranker configured: said, not faked
            console = r["console"]  # each console page's server time, and none failed
            pages = [name for name, page in console.items() if isinstance(page, dict)]
            assert len(pages) >= 14 and all(console[name].get("p95", 0) > 0 for name in pages), console
            assert (
                "the most mentioned entity" in pages and "its graph (300 memories)" in pages
            )  # the corpus names entities
            memory = r["http"]["memory"]
            assert memory["total_mb"] > 0 and any("Replica" in name for name in memory["processes_mb"])
        assert (out / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "6-memory namespace, c 1" in result.stdout
        assert "its stages, p50 / p95: lookups " in result.stdout and ", embed " in result.stdout
        assert "retain batched" in result.stdout and "HTTP, cache miss, concurrency 4" in result.stdout
        assert "console pages, server time in process" in result.stdout and "recall playground" in result.stdout

        again = run_cli(*args[:2], "300", *args[3:], "--no-http", "--no-plot", env=env, timeout=300)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "reusing the kept corpus in database cabrain_bench_306" in again.stderr
        assert "loaded" not in again.stderr
        assert "http" not in json.loads((out / "results.json").read_text())["sizes"][0]

        bad = run_cli("bench", "--concurrency", "4,8", env=env)
        assert bad.returncode == 2 and "include 1" in bad.stderr
        for args_bad, words in (
            (["--sizes", "50"], "at least 100"),
            (["--sizes", "1e4"], "comma-separated integers"),
            (["--retain-texts", "1"], "at least 2"),
        ):
            bad = run_cli("bench", *args_bad, env=env)
            assert bad.returncode == 2 and words in bad.stderr, bad.stderr
    finally:

        async def drop() -> None:
            conn = await connect(pg_server.dsn())
            try:
                for name in ("cabrain_bench_306", "cabrain_bench_612"):
                    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await conn.close()

        asyncio.run(drop())


async def test_the_benchmark_never_deploys_on_a_ray_this_process_is_connected_to(ray_cluster, home, pg_server):
    """Its Serve application would replace the one running there (the service tests' own)."""
    with pytest.raises(ConfigError, match="already connected to a Ray cluster") as refused:
        async with local_service(load_settings(home=home), pg_server.dsn(), None, quiet=True):
            pass
    assert "a command of its own" in (refused.value.hint or "")


def test_the_graph_build_memory_fits_the_graph_within_a_quarter_of_memory():
    assert graph_build_memory(1_000, 384) == "64MB"  # the floor
    quarter = psutil.virtual_memory().total // 4 // 2**20
    million = int(graph_build_memory(1_190_000, 384).removesuffix("MB"))
    assert million == min(quarter, int(1_190_000 * (384 * 4 + 600) * 1.3) // 2**20)
    assert int(graph_build_memory(50_000_000, 384).removesuffix("MB")) == quarter
