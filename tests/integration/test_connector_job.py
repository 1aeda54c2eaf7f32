"""A connector sync as the Ray job (``python -m jobs.connector_sync``; its ``main`` runs here, on the
session's Ray): a large sync's changed items fan out as Ray tasks, each opening its own engine, and
the result is the same as one process's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import asyncpg
import pytest

from cabrain.connectors.facade import Connectors
from cabrain.jobs import connector_sync
from tests.conftest import cli_env, run_main


@pytest.mark.ray
async def test_the_job_fans_a_sync_out_over_ray(brain, db_dsn: str, home: Path, tmp_path: Path, ray_cluster) -> None:
    folder = tmp_path / "wiki"
    folder.mkdir()
    for i in range(8):
        (folder / f"page-{i}.md").write_text(
            f"# Page {i}\n\nService {i} is owned by squad {i % 3} and runs in zone {i % 2}.\n"
        )
    await brain.create_namespace("root", "wiki")
    await Connectors(brain.engine).add("root", "wiki", "folder", "wiki", {"path": str(folder)})
    env = cli_env(
        database_url=db_dsn,
        home=str(home),
        connector_fan_out_items="3",
    )
    # what `ray job submit -- python -m jobs.connector_sync wiki` runs, on the session's Ray
    proc = await asyncio.to_thread(run_main, connector_sync.main, "wiki", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wiki: 8 changed items in 3 Ray tasks" in proc.stderr
    [report] = json.loads(proc.stdout)
    assert report["status"] == "done" and report["counts"]["added"] == 8 and report["counts"]["indexed"] == 8
    conn = await asyncpg.connect(db_dsn)
    try:
        contents = [r[0] for r in await conn.fetch("SELECT content FROM memories WHERE namespace = 'wiki'")]
        runs = await conn.fetch("SELECT status FROM connector_runs")
    finally:
        await conn.close()
    assert len(contents) == len(set(contents)) == 8
    assert [r["status"] for r in runs] == ["done"]
