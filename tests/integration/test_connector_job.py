"""A connector sync as the Ray job (``python -m jobs.connector_sync``): a large sync's changed items
fan out as Ray tasks, each opening its own engine, and the result is the same as one process's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import asyncpg

from cabrain.connectors.facade import Connectors
from tests.conftest import REPO, cli_env


async def test_the_job_fans_a_sync_out_over_ray(brain, db_dsn: str, home: Path, tmp_path: Path) -> None:
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
        ray_num_cpus="2",
        ray_object_store_bytes=str(100 * 1024 * 1024),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.connector_sync", "wiki"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
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
