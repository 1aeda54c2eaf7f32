"""The migration runner against a real PostgreSQL + pgvector."""

import asyncio
import re
import shutil
import subprocess
import sys
from datetime import date

import asyncpg
import pytest

from cabrain.errors import (
    EmbeddingDimensionMismatch,
    MigrationChecksumMismatch,
    MigrationError,
    SchemaError,
)
from cabrain.settings import default_schema_dir
from cabrain.store import migrations
from cabrain.store.db import connect
from tests.conftest import EMBEDDING_DIM, EMBEDDING_MODEL, REPO, cli_env

CORE_TABLES = {
    "agents",
    "agent_keys",
    "namespaces",
    "namespace_grants",
    "memory_ids",
    "memories",
    "memories_default",
    "entities",
    "memory_entities",
    "memory_events",
    "cabrain_settings",
    "schema_migrations",
}


async def tables(conn) -> set[str]:
    rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {r["tablename"] for r in rows}


async def schema_snapshot(conn) -> list[tuple]:
    """Every relation, column and function of the public schema."""
    rels = await conn.fetch(
        "SELECT c.relname, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod) AS type "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
        "WHERE n.nspname = 'public' ORDER BY 1, 3"
    )
    funcs = await conn.fetch(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'public' ORDER BY 1"
    )
    return [tuple(r) for r in rels] + [tuple(r) for r in funcs]


async def run(dsn, schema_dir=None, dim=EMBEDDING_DIM, model=EMBEDDING_MODEL, **kw):
    conn = await connect(dsn)
    try:
        return await migrations.migrate(
            conn, schema_dir or default_schema_dir(), embedding_dim=dim, embedding_model=model, **kw
        )
    finally:
        await conn.close()


@pytest.fixture
def schema_copy(tmp_path):
    target = tmp_path / "schema"
    shutil.copytree(default_schema_dir(), target)
    return target


async def test_migrations_apply_on_an_empty_database(empty_dsn):
    report = await run(empty_dsn, today=date(2026, 11, 15))
    assert report.applied == [m.name for m in migrations.discover(default_schema_dir())]
    conn = await connect(empty_dsn)
    try:
        assert CORE_TABLES <= await tables(conn)
        ledger = await conn.fetch("SELECT name, checksum FROM schema_migrations ORDER BY version")
        on_disk = migrations.discover(default_schema_dir())
        assert [(r["name"], r["checksum"]) for r in ledger] == [(m.name, m.checksum) for m in on_disk]
        assert await conn.fetchval("SELECT value FROM cabrain_settings WHERE key = 'embedding_dim'") == "384"
        typ = await conn.fetchval(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
        )
        assert typ == "vector(384)"
        assert report.partitions == [
            "memories_p202610",
            "memories_p202611",
            "memories_p202612",
            "memories_p202701",
            "memories_p202702",
        ]
        assert await conn.fetchval("SELECT count(*) FROM pg_roles WHERE rolname = 'cabrain_sleep'") == 1
        assert report.sleep_role == "role cabrain_sleep ready"
    finally:
        await conn.close()


async def test_rerunning_migrate_is_a_no_op(db_dsn):
    today = date(2027, 12, 31)  # any day: the template was migrated on another one, maybe in another month
    conn = await connect(db_dsn)
    try:
        await migrations.ensure_partitions(conn, today)  # the partitions migrate makes on that day exist
        before = [tuple(r) for r in await conn.fetch("SELECT * FROM schema_migrations ORDER BY version")]
        snapshot = await schema_snapshot(conn)
    finally:
        await conn.close()
    report = await run(db_dsn, today=today)
    assert report.applied == []
    assert report.already_applied == [row[1] for row in before]
    conn = await connect(db_dsn)
    try:
        after = [tuple(r) for r in await conn.fetch("SELECT * FROM schema_migrations ORDER BY version")]
        assert after == before
        assert await schema_snapshot(conn) == snapshot
    finally:
        await conn.close()


async def test_an_edited_applied_migration_is_reported(empty_dsn, schema_copy):
    await run(empty_dsn, schema_copy)
    core = schema_copy / "0001_core.sql"
    core.write_text(core.read_text() + "\n-- a harmless-looking edit\n")
    with pytest.raises(MigrationChecksumMismatch) as info:
        await run(empty_dsn, schema_copy)
    assert "0001_core.sql" in str(info.value)
    assert "new numbered file" in info.value.hint
    assert "git checkout cabrain/schema/" in info.value.hint
    conn = await connect(empty_dsn)
    try:
        state = await migrations.inspect(conn, schema_copy)
    finally:
        await conn.close()
    assert state.edited == ["0001_core.sql"] and not state.current


async def test_a_failed_migration_leaves_an_empty_database_empty(empty_dsn, schema_copy):
    (schema_copy / "0902_broken.sql").write_text("CREATE TABLE would_be_kept (x int);\nSELECT no_such_function();\n")
    with pytest.raises(MigrationError) as info:
        await run(empty_dsn, schema_copy)
    message = str(info.value)
    assert "0902_broken.sql" in message and "no_such_function" in message and "line 2" in message
    assert "nothing of this run was applied" in message
    conn = await connect(empty_dsn)
    try:
        assert await tables(conn) == set()
        assert await conn.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'vector'") == 0
    finally:
        await conn.close()


async def test_a_failed_migration_leaves_a_migrated_schema_exactly_as_it_was(db_dsn, schema_copy):
    conn = await connect(db_dsn)
    try:
        snapshot = await schema_snapshot(conn)
    finally:
        await conn.close()
    (schema_copy / "0901_good.sql").write_text("CREATE TABLE good_but_not_alone (x int);")
    (schema_copy / "0902_bad.sql").write_text("ALTER TABLE memories ADD COLUMN oops no_such_type;")
    with pytest.raises(MigrationError, match=re.escape("0902_bad.sql")):
        await run(db_dsn, schema_copy)
    conn = await connect(db_dsn)
    try:
        assert await schema_snapshot(conn) == snapshot
        assert await conn.fetchval("SELECT count(*) FROM schema_migrations WHERE version > 900") == 0
    finally:
        await conn.close()
    # Once fixed, the same run goes through.
    (schema_copy / "0902_bad.sql").write_text("ALTER TABLE memories ADD COLUMN fixed boolean;")
    report = await run(db_dsn, schema_copy)
    assert report.applied == ["0901_good.sql", "0902_bad.sql"]


async def test_a_database_migrated_by_a_newer_version_is_refused(db_dsn, schema_copy):
    (schema_copy / "0950_future.sql").write_text("CREATE TABLE from_the_future (x int);")
    await run(db_dsn, schema_copy)
    with pytest.raises(SchemaError, match=re.escape("does not know: 0950_future.sql")):
        await run(db_dsn)


async def test_concurrent_migrate_runs_are_safe(empty_dsn):
    results = await asyncio.gather(*(run(empty_dsn) for _ in range(6)))
    applied = [r.applied for r in results if r.applied]
    assert len(applied) == 1, "exactly one run applies the migrations"
    assert all(r.already_applied == applied[0] for r in results if not r.applied)
    conn = await connect(empty_dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM schema_migrations") == len(applied[0])
    finally:
        await conn.close()


@pytest.mark.subprocess
def test_concurrent_migrate_commands_are_safe(empty_dsn):
    env = cli_env(database_url=empty_dsn)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cabrain.cli", "migrate"],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    stdout = [out for out, _ in outputs]
    assert sum("migration(s): 0001_core.sql" in out for out in stdout) == 1
    assert sum("schema up to date" in out for out in stdout) == 2


async def test_a_model_of_another_dimension_is_refused_before_anything_changes(db_dsn):
    with pytest.raises(EmbeddingDimensionMismatch) as info:
        await run(db_dsn, dim=1024, model="Qwen/Qwen3-Embedding-0.6B")
    message = str(info.value)
    assert "384-dimensional" in message and "1024-dimensional" in message
    assert "intfloat/multilingual-e5-small" in info.value.hint


async def test_the_sleep_role_can_run_partition_maintenance_but_not_touch_agents(db_dsn, pg_server):
    sleep = await asyncpg.connect(db_dsn.replace("cabrain@", "cabrain_sleep@", 1))
    try:
        assert await sleep.fetchval("SELECT cabrain_ensure_memories_partition('2040-01-01')") == "memories_p204001"
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await sleep.execute("INSERT INTO agents (id) VALUES ('intruder')")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await sleep.execute("DELETE FROM memory_ids")
    finally:
        await sleep.close()
