"""The production cold tier: the Iceberg catalog in PostgreSQL (postgresql+psycopg2://) and the
warehouse on S3-compatible storage, end to end through demotion, archive recall and get.

S3 is the one part that cannot run here for real; moto's S3 server stands in for it, as a process
on loopback speaking the S3 protocol (the same role the scripted chat server plays for an LLM)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from cabrain.sleep.cycle import run_cycle
from cabrain.store.cold import ColdTier
from cabrain.types import ArchiveQuery, MemoryInput, Visibility
from tests.conftest import brings, free_port, wait_for_port

BUCKET = "cabrain-cold"


@pytest.fixture(scope="module")
@brings("subprocess")
def s3_endpoint():
    port = free_port()
    server = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if not wait_for_port(port, timeout=30):
        proc.kill()
        pytest.fail("the S3 stand-in (moto_server) did not start")
    from pyarrow import fs

    s3 = fs.S3FileSystem(
        endpoint_override=f"http://127.0.0.1:{port}",
        access_key="test",
        secret_key="test",
        region="us-east-1",
        allow_bucket_creation=True,
    )
    s3.create_dir(BUCKET)
    yield f"http://127.0.0.1:{port}", s3
    proc.terminate()
    proc.wait(10)


async def test_demotion_and_archive_recall_on_a_postgres_catalog_and_s3(open_brain, db_dsn, s3_endpoint) -> None:
    endpoint, s3 = s3_endpoint
    cold = {
        "cold_catalog_uri": db_dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        "cold_warehouse": f"s3://{BUCKET}/warehouse",
        "cold_s3_endpoint": endpoint,
        "cold_s3_region": "us-east-1",
        "cold_s3_access_key": "test",
        "cold_s3_secret_key": "test",
    }
    brain = await open_brain(sleep_demote_after_days=30, sleep_demote_keep_importance=1.0, **cold)
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "ops")
    when = datetime.now(UTC) - timedelta(days=70)
    events = [
        "The March outage was a full disk on the log volume of db-2.",
        "We rotated every deploy key after the contractor left.",
    ]
    results = await brain.retain(
        "alice", [MemoryInput(t, "ops", visibility=Visibility.TEAM, valid_at=when) for t in events], decide=False
    )
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '70 days'")
    finally:
        await conn.close()
    report = await run_cycle(brain.settings, db_dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 2
    # the data files are in the bucket, the catalog's tables in PostgreSQL
    files = ColdTier(brain.settings).files("ops")
    assert files and all(f.startswith(f"s3://{BUCKET}/warehouse/") for f in files)
    assert all(s3.get_file_info(f.removeprefix("s3://")).size > 0 for f in files)
    conn = await asyncpg.connect(db_dsn)
    try:
        tables = await conn.fetch("SELECT table_namespace, table_name FROM iceberg_tables")
    finally:
        await conn.close()
    assert [(t["table_namespace"], t["table_name"]) for t in tables] == [("cabrain", "memories")]
    found = await brain.recall_archive("alice", ArchiveQuery("what caused the outage in March?", "ops", k=1))
    assert found.hits[0].memory.id == results[0].memory_id and found.files == len(files)
    got = await brain.get("alice", results[1].memory_id)
    assert got.memory.tier == "cold" and got.memory.content == events[1]
