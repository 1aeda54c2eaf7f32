"""Issue 37: a re-embedded import spreads its embedding over the nodes of a Ray cluster
(``cabrain import --ray``, :mod:`cabrain.portable.spread`). Kept small: a two-node cluster, one
short export."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import asyncpg
import numpy as np
import pytest

from cabrain.portable.facade import Portable
from tests.conftest import REPO, _create_database, _drop_database, cli_env, make_scratch_dir
from tests.integration.test_portable import _fill

VECTORS = "SELECT id, embedding::text FROM memory_vectors ORDER BY id"


@pytest.fixture
async def second_dsn(pg_server, template_db):
    name = await _create_database(pg_server, template_db)
    yield pg_server.dsn(name)
    await _drop_database(pg_server, name)


async def _vectors(dsn: str) -> dict:
    conn = await asyncpg.connect(dsn)
    try:
        return {r["id"]: np.asarray(json.loads(r["embedding"])) for r in await conn.fetch(VECTORS)}
    finally:
        await conn.close()


@pytest.mark.ray
async def test_an_import_embeds_on_every_node_of_the_cluster(brain, db_dsn, second_dsn, tmp_path: Path) -> None:
    await _fill(brain)
    path = tmp_path / "brain.jsonl"
    with path.open("w", encoding="utf-8") as f:
        exported = await Portable(brain.engine).export(None, ["proj"], f)  # without vectors: re-embedded
    home = make_scratch_dir("cabrain-import-multinode-")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration.scripts.import_multinode", str(path), str(home)],
        cwd=REPO,
        env=cli_env(database_url=second_dsn, home=str(home)),
        capture_output=True,
        text=True,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    seen = json.loads(lines[-1].removeprefix("RESULT "))
    report = seen["report"]
    assert seen["code"] == 0 and report["added"]["memory"] == exported.counts["memory"]
    spread = report["embedded_on"]
    assert set(spread) == {seen["head"], seen["worker"]} and all(n > 0 for n in spread.values())
    assert sum(spread.values()) >= exported.counts["memory"]
    # the vectors made on the cluster are the model's: those retain made here for the same texts
    here, there = await _vectors(db_dsn), await _vectors(second_dsn)
    assert set(there) == set(here)
    assert all(float(np.dot(here[i], there[i])) > 0.999 for i in here)
