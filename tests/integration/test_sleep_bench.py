"""`cabrain bench sleep` at a small scale: every step timed on one and two Ray nodes, the same work
done on both, archive recall timed, and its scratch databases gone afterwards."""

from __future__ import annotations

import json

import asyncpg
import pytest

from tests.conftest import cli_env, run_cli, run_cli_process


@pytest.mark.ray
async def test_bench_sleep_runs_small_on_one_and_two_nodes(tmp_path, pg_server, home) -> None:
    out = tmp_path / "sleep.json"
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    result = run_cli_process(  # Ray clusters of its own, started and stopped by the command
        "bench",
        "sleep",
        "--memories",
        "600",
        "--namespaces",
        "2",
        "--nodes",
        "1,2",
        "--archive-queries",
        "3",
        "--json",
        str(out),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loaded 600/600 memories" in result.stderr and "| consolidate |" in result.stdout
    data = json.loads(out.read_text())
    one, two = data["runs"]["1"], data["runs"]["2"]
    assert list(one["steps"]) == ["consolidate", "dedup", "reconsolidate", "decay", "demote", "purge", "maintain"]
    assert len(one["tasks_per_node"]) == 1 and len(two["tasks_per_node"]) == 2
    for step in ("consolidate", "dedup", "reconsolidate", "demote"):  # the same work wherever it ran
        assert one["steps"][step]["items"] == two["steps"][step]["items"] > 0, step
        assert one["steps"][step]["items_per_s"] > 0
    assert one["steps"]["reconsolidate"]["counts"]["superseded"] > 0
    assert one["steps"]["dedup"]["counts"]["merged"] > 0
    assert data["archive"]["cold_rows"] > 0 and data["archive"]["total_ms"]["p50"] > 0
    conn = await asyncpg.connect(pg_server.dsn())
    try:
        left = await conn.fetchval("SELECT count(*) FROM pg_database WHERE datname LIKE 'cabrain_sleepbench_%'")
    finally:
        await conn.close()
    assert left == 0
    bad = run_cli("bench", "sleep", "--nodes", "0", env=env)
    assert bad.returncode == 2 and "at least 1" in bad.stderr
