"""``cabrain backup`` and ``cabrain restore``: a brain (memories in Arabic and English, versions, grants,
entities, a cold tier) backed up and restored onto a brand new database and home folder comes back row
for row and cold batch for cold batch, and works; a backup taken while memories are written and demoted
restores to a consistent brain; a damaged backup, a used folder and a target holding data are refused."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import asyncpg
import pytest

from cabrain.brain import Brain
from cabrain.errors import ConfigError, ConflictError, DatabaseError, InputError
from cabrain.failpoints import EXIT_CODE
from cabrain.progress import Lines
from cabrain.settings import Settings, load_settings
from cabrain.sleep import cycle
from cabrain.sleep.cycle import run_cycle
from cabrain.store import backup as backup_mod
from cabrain.store import sleep as sleep_sql
from cabrain.store.backup import backup, restore
from cabrain.store.cold import ColdTier
from cabrain.store.embedded import EmbeddedPostgres
from cabrain.types import ArchiveQuery, MemoryInput, Network, RecallQuery, Visibility
from tests.conftest import brings, cli_env, free_port, make_scratch_dir, run_cli, run_cli_process, wait_for_port

DEMOTING = {"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0, "sleep_demote_invalid_after_days": 0}
TEAM = Visibility.TEAM
OLD_EVENTS = [
    "The March outage was a full disk on the log volume of db-2.",
    "انقطعت الخدمة في مارس بسبب امتلاء قرص السجلات على الخادم db-2.",
    "We rotated every deploy key after the contractor left.",
]
CURRENT = [
    "We moved the job queue to Valkey last sprint.",
    "Valkey needs 4 GB of memory on the cache node.",
    "اجتماع الفريق الأسبوعي انتقل إلى يوم الأحد في مكتب الرياض.",
]


async def _execute(dsn: str, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def _populate(brain: Brain, dsn: str, settings: Settings) -> dict[str, uuid.UUID]:
    """Old events (demoted), current facts with entities, a corrected fact (two versions), a grant."""
    old = datetime.now(UTC) - timedelta(days=90)
    ids = {}
    for text in OLD_EVENTS:
        [r] = await brain.retain("alice", MemoryInput(text, "proj", visibility=TEAM, valid_at=old), decide=False)
        ids[text] = r.memory_id
    await _execute(dsn, "UPDATE memories SET created_at = now() - interval '90 days'")
    for text in CURRENT:
        [r] = await brain.retain("alice", MemoryInput(text, "proj", visibility=TEAM, network=Network.FACT))
        ids[text] = r.memory_id
    [omar] = await brain.retain("alice", MemoryInput("Omar owns the billing service.", "proj", visibility=TEAM))
    layla = await brain.reconsolidate("alice", omar.memory_id, "Layla owns the billing service.", reason="handover")
    ids["omar"], ids["layla"] = omar.memory_id, layla.memory_id
    await brain.share("alice", "proj", "bob")
    report = await run_cycle(settings, dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == len(OLD_EVENTS) + 1  # and the superseded version
    return ids


async def _all_rows(dsn: str) -> dict[str, list[str]]:
    """Every row of every table, each as text, ordered by the table's primary key."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = [
            r["table_name"]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                "AND table_type = 'BASE TABLE' ORDER BY table_name"
            )
        ]
        rows = {}
        for table in tables:
            keys = await conn.fetch(
                "SELECT k.column_name FROM information_schema.table_constraints c "
                "JOIN information_schema.key_column_usage k USING (constraint_schema, constraint_name) "
                "WHERE c.table_schema = 'public' AND c.table_name = $1 AND c.constraint_type = 'PRIMARY KEY' "
                "ORDER BY k.ordinal_position",
                table,
            )
            order = ", ".join(f't."{k["column_name"]}"' for k in keys) or "t::text"
            rows[table] = [r[0] for r in await conn.fetch(f'SELECT t::text FROM public."{table}" t ORDER BY {order}')]
        return rows
    finally:
        await conn.close()


def _cold_rows(settings: Settings) -> list[dict[str, Any]]:
    rows = ColdTier(settings).refresh().scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: (r["id"], r["demote_batch"], r["demoted_at"]))


def _backup_folder() -> Path:
    return make_scratch_dir("cabrain-backup-") / "backup"


def test_the_backup_takes_the_sleep_cycles_own_namespace_lock() -> None:
    """The store does not import the sleep plane, so the lock's key is written in both: kept equal here."""
    assert backup_mod.SLEEP_LOCK_CLASS == cycle.LOCK_CLASS
    assert backup_mod.SLEEP_LOCK.replace("pg_advisory_lock", "pg_try_advisory_lock") == sleep_sql.TRY_LOCK


@pytest.mark.subprocess
async def test_a_brain_restored_on_a_new_machine_has_every_row_and_every_cold_batch(brain, db_dsn, home, embedder):
    settings = brain.settings.model_copy(update=DEMOTING)
    ids = await _populate(brain, db_dsn, settings)
    rows, cold = await _all_rows(db_dsn), _cold_rows(settings)
    assert len(cold) == len(OLD_EVENTS) + 1
    assert all(rows[t] for t in ("memory_ids", "namespace_grants", "entities", "memory_entities", "judgments"))
    folder = _backup_folder()

    done = run_cli("backup", str(folder), "--json", env=cli_env(database_url=db_dsn, home=str(home)))
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)
    assert "hot tier: dumping" in done.stderr and "cold tier: copying" in done.stderr
    assert manifest["hot"]["tables"]["memories"] == len(rows["memories"])
    assert manifest["hot"]["tables"]["memory_ids"] == len(rows["memory_ids"])
    assert manifest["embedding"] == {"model": "intfloat/multilingual-e5-small", "dim": 384}
    [latest] = await _execute(db_dsn, "SELECT name FROM schema_migrations ORDER BY version DESC LIMIT 1")
    assert manifest["schema"]["version"] == latest["name"]
    [table] = manifest["cold"]["tables"]
    live = ColdTier(settings).refresh()
    assert table["snapshot_id"] == live.current_snapshot().snapshot_id and table["records"] == len(cold)
    assert table["data_files"] == len(live.inspect.files())
    written = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert written == {*manifest["files"], "manifest.json"} and "cold/catalog.db" in written

    # a new machine: nothing but the backup, an empty home, the embedded PostgreSQL
    new_home = make_scratch_dir("cabrain-home-")
    server = EmbeddedPostgres(new_home / "pg", reaper_interval_s=0.5)
    try:
        back = run_cli("restore", str(folder), env=cli_env(home=str(new_home)), timeout=300)
        assert back.returncode == 0, back.stderr
        assert "every count matches the backup's" in back.stdout and "locations moved from" in back.stderr
        dsn = server.acquire()
        assert await _all_rows(dsn) == rows
        moved = load_settings(home=new_home, database_url=dsn, **DEMOTING)
        assert _cold_rows(moved) == cold
        table_now = ColdTier(moved).refresh()
        assert table_now.current_snapshot().snapshot_id == table["snapshot_id"]
        assert table_now.location().startswith(new_home.as_uri())

        restored = await Brain.open(moved, dsn=dsn, embedder=embedder)
        try:
            hits = (await restored.recall("bob", RecallQuery("where is the job queue now?", "proj", k=3))).hits
            assert hits[0].memory.id == ids[CURRENT[0]]  # bob reads through the restored grant
            arabic = await restored.recall("alice", RecallQuery("متى اجتماع الفريق الأسبوعي؟", "proj", k=1))
            assert arabic.hits[0].memory.id == ids[CURRENT[2]]
            assert (await restored.get("alice", ids[CURRENT[0]])).entities == ["Valkey"]
            archive = await restored.recall_archive("alice", ArchiveQuery("full disk on the log volume", "proj", k=2))
            assert archive.hits[0].memory.id == ids[OLD_EVENTS[0]] and archive.hits[0].memory.tier == "cold"
            omar = await restored.get("alice", ids["omar"])  # the superseded version, demoted
            assert omar.memory.tier == "cold" and omar.memory.superseded_by == ids["layla"]
            assert (await restored.get("alice", ids["layla"])).memory.content == "Layla owns the billing service."
            back_hot = await restored.unarchive("alice", ids[OLD_EVENTS[2]])
            assert back_hot.tier == "hot" and back_hot.content == OLD_EVENTS[2]
            # the moved table takes new demotions
            [late] = await restored.retain(
                "alice",
                MemoryInput("The old VPN was retired in May.", "proj", valid_at=datetime.now(UTC) - timedelta(days=80)),
                decide=False,
            )
            await _execute(
                dsn, "UPDATE memories SET created_at = now() - interval '80 days' WHERE id = $1", late.memory_id
            )
            again = await run_cycle(moved, dsn, steps=["demote"], use_ray=False)
            assert again.steps["demote"]["demoted"] == 2  # the new one, and the one unarchived above
            assert {str(late.memory_id)} <= {r["id"] for r in _cold_rows(moved)}
        finally:
            await restored.close()
    finally:
        server.release()
        shutil.rmtree(new_home, ignore_errors=True)
        shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.mark.subprocess
async def test_a_backup_taken_while_memories_are_written_and_demoted_restores_consistently(
    brain, db_dsn, pg_server, embedder
) -> None:
    settings = brain.settings.model_copy(update=DEMOTING)
    await _populate(brain, db_dsn, settings)
    old = datetime.now(UTC) - timedelta(days=90)
    episodes = [f"Standup {n}: the staging cluster was rebuilt from scratch." for n in range(30)]
    await brain.retain("alice", [MemoryInput(t, "proj", visibility=TEAM, valid_at=old) for t in episodes], decide=False)
    await _execute(db_dsn, "UPDATE memories SET created_at = now() - interval '90 days' WHERE namespace = 'proj'")
    await brain.create_namespace("alice", "ops")
    stop, written = asyncio.Event(), []

    async def keep_writing() -> None:  # into another namespace than the one demoted meanwhile
        while not stop.is_set():
            n = len(written)
            text = f"Deploy note {n}: build {n} of the billing service shipped to staging."
            [r] = await brain.retain("alice", MemoryInput(text, "ops", visibility=TEAM), decide=False)
            written.append(r.memory_id)

    writer = asyncio.create_task(keep_writing())
    folder = _backup_folder()
    target_name = f"t_{uuid.uuid4().hex[:16]}"
    target = pg_server.dsn(target_name)
    new_home = make_scratch_dir("cabrain-home-")
    try:
        while len(written) < 5:
            await asyncio.sleep(0.05)
        [batches] = await _execute(db_dsn, "SELECT count(*) AS n FROM cold_batches WHERE state = 'done'")
        before = len(written)
        manifest, cycle_report = await asyncio.gather(
            backup(settings, folder, dsn=db_dsn),
            run_cycle(settings, db_dsn, namespaces=["proj"], steps=["demote"], use_ray=False),
        )
        during = len(written) - before
        await asyncio.sleep(0.2)
        stop.set()
        await writer
        assert during > 0, "memories were written while the backup ran"
        # the cycle ran before the backup took the sleep locks (which waited for it), or skipped proj
        assert cycle_report.status == "done"
        demoted_by_then = cycle_report.steps.get("demote", {}).get("demoted", 0)
        assert demoted_by_then == len(episodes) or cycle_report.skipped == {
            "proj": "another sleep cycle is working on it"
        }
        assert manifest["cold"]["batches"] == {"done": batches["n"] + (1 if demoted_by_then else 0)}
        [source] = await _execute(db_dsn, "SELECT count(*) AS n FROM memory_ids")
        assert source["n"] > manifest["hot"]["tables"]["memory_ids"]  # the snapshot is older than the last writes

        moved = load_settings(home=new_home, database_url=target, **DEMOTING)
        report = await restore(moved, folder, dsn=target)  # creates the database
        assert report.mismatches == [] and report.pruned == 0
        assert report.restored["memories"] == manifest["hot"]["tables"]["memories"]
        assert report.restored["memory_ids"] == manifest["hot"]["tables"]["memory_ids"]
        cold_ids = {r["id"] for r in _cold_rows(moved)}
        refs = await _execute(
            target,
            "SELECT i.id::text AS id, b.state FROM memory_ids i LEFT JOIN cold_batches b ON b.id = i.cold_batch "
            "WHERE i.tier = 'cold'",
        )
        assert refs and all(r["state"] == "done" and r["id"] in cold_ids for r in refs)
        split = await _execute(
            target,
            "SELECT count(*) AS n FROM memories m JOIN memory_ids i ON i.id = m.id WHERE i.tier = 'cold'",
        )
        assert split[0]["n"] == 0  # no memory is in both tiers
        counted = await _execute(
            target,
            "SELECT n.memory_count, (SELECT count(*) FROM memories m WHERE m.namespace = n.name) AS actual "
            "FROM namespaces n",
        )
        assert all(r["memory_count"] == r["actual"] for r in counted)
        restored = await Brain.open(moved, dsn=target, embedder=embedder)
        try:
            found = await restored.recall_archive("alice", ArchiveQuery("Deploy note build shipped", "proj", k=3))
            assert found.hits and all(h.memory.tier == "cold" for h in found.hits)
        finally:
            await restored.close()
    finally:
        stop.set()
        await asyncio.gather(writer, return_exceptions=True)
        await _execute(pg_server.dsn("postgres"), f"DROP DATABASE IF EXISTS {target_name} WITH (FORCE)")
        shutil.rmtree(new_home, ignore_errors=True)
        shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.mark.subprocess
async def test_damaged_backups_used_folders_busy_sleep_and_targets_holding_data_are_refused(
    brain, db_dsn, empty_dsn, home
) -> None:
    settings = brain.settings.model_copy(update=DEMOTING)
    await _populate(brain, db_dsn, settings)
    folder = _backup_folder()
    new_home = make_scratch_dir("cabrain-home-")
    try:
        # a sleep cycle working on proj: the backup waits for it, then says so
        holder = await asyncpg.connect(db_dsn)
        try:
            assert await holder.fetchval(sleep_sql.TRY_LOCK, cycle.LOCK_CLASS, "proj")
            with pytest.raises(DatabaseError, match="sleep cycle has been working on namespace 'proj'"):
                await backup(settings, folder, dsn=db_dsn, lock_wait_s=0.3)
        finally:
            await holder.close()
        assert not folder.exists()  # a failed backup leaves nothing behind
        # a demotion batch in Iceberg that the hot tier does not know (as one committed after the snapshot
        # would be): backed up with the rest, removed on restore
        cold = ColdTier(settings)
        stray = cold.scan("proj").slice(0, 1)
        stray_batch = uuid.uuid4()
        stray = stray.set_column(
            stray.schema.get_field_index("demote_batch"), stray.schema.field("demote_batch"), [[str(stray_batch)]]
        )
        cold.append_batch(stray_batch, stray)
        ticks = itertools.count()
        said: list[str] = []
        progress = Lines(said.append, every_s=1.0, clock=lambda: float(next(ticks)))  # a second at each look
        manifest = await backup(
            settings, folder, dsn=db_dsn, clock=lambda: datetime(2030, 1, 2, tzinfo=UTC), say=progress
        )
        assert manifest["cold"]["tables"][0]["records"] == len(OLD_EVENTS) + 2
        assert manifest["created_at"] == "2030-01-02T00:00:00+00:00"
        copied = len([f for f in manifest["files"] if f.startswith("cold/warehouse/")])
        assert any(line.startswith(f"cold tier: copying: {copied}/{copied} files (") for line in said), said
        assert any(" files (" in line and "left)" in line for line in said)  # its rate and the time left

        used = run_cli("backup", str(folder), env=cli_env(database_url=db_dsn, home=str(home)))
        assert used.returncode == 1 and "is not empty" in used.stderr and "new or empty folder" in used.stderr

        # the target holds data: refused without --force, replaced with it (saying what)
        moved = load_settings(home=new_home, database_url=empty_dsn)
        first = await restore(moved, folder, dsn=empty_dsn)
        assert first.pruned == 1 and str(stray_batch) not in {r["demote_batch"] for r in _cold_rows(moved)}
        assert len(_cold_rows(moved)) == len(OLD_EVENTS) + 1
        with pytest.raises(ConflictError, match="already holds data") as refused:
            await restore(moved, folder, dsn=empty_dsn)
        assert "CaBrain data" in refused.value.message and "--force" in (refused.value.hint or "")
        await _execute(empty_dsn, "DELETE FROM namespace_grants")
        said.clear()
        report = await restore(moved, folder, dsn=empty_dsn, force=True, say=progress)
        assert report.mismatches == [] and any(line.startswith("--force: replacing the database") for line in said)
        size = sum(f["bytes"] for f in manifest["files"].values())
        assert any(line.startswith(f"checking the backup: {size:,}/{size:,} bytes (") for line in said), said
        assert any(line.startswith(f"cold tier: restoring: {copied}/{copied} files (") for line in said), said
        assert len(await _execute(empty_dsn, "SELECT * FROM namespace_grants")) == 1
        with pytest.raises(ConflictError, match="CaBrain data"):
            await restore(settings, folder, dsn=db_dsn)  # the source itself

        # one byte of the dump changed: refused before anything is touched, naming the file
        dump = folder / "hot.dump"
        data = bytearray(dump.read_bytes())
        data[len(data) // 2] ^= 0xFF
        dump.write_bytes(bytes(data))
        with pytest.raises(InputError, match=r"hot\.dump does not match its sha256") as damaged:
            await restore(moved, folder, dsn=empty_dsn, force=True)
        assert "another copy" in (damaged.value.hint or "")
        assert len(await _execute(empty_dsn, "SELECT * FROM namespace_grants")) == 1
    finally:
        shutil.rmtree(new_home, ignore_errors=True)
        shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.mark.subprocess
async def test_a_demotion_crashed_after_its_iceberg_commit_is_kept_and_finished_after_restore(
    brain, db_dsn, empty_dsn, home
) -> None:
    """The batch is planned in the hot tier and appended in Iceberg: referenced, so restore keeps it, and
    the restored brain's next sleep finishes it as it would have on the machine that crashed."""
    then = datetime.now(UTC) - timedelta(days=90)
    inputs = [
        MemoryInput(f"Old episode {i}: the nightly build took {i * 3} minutes.", "proj", valid_at=then)
        for i in range(6)
    ]
    await brain.retain("alice", inputs, decide=False)
    await _execute(db_dsn, "UPDATE memories SET created_at = created_at - interval '90 days'")
    env = cli_env(database_url=db_dsn, home=str(home), sleep_demote_keep_importance="1.0")
    crashed = run_cli_process(
        "sleep", "--inline", "--steps", "demote", env={**env, "CABRAIN_FAILPOINTS": "demote.after_cold_commit"}
    )
    assert crashed.returncode == EXIT_CODE, crashed.stderr
    folder = _backup_folder()
    new_home = make_scratch_dir("cabrain-home-")
    try:
        manifest = await backup(brain.settings, folder, dsn=db_dsn)
        assert manifest["cold"]["batches"] == {"planned": 1} and manifest["cold"]["tables"][0]["records"] == 6
        moved = load_settings(home=new_home, database_url=empty_dsn, sleep_demote_keep_importance=1.0)
        report = await restore(moved, folder, dsn=empty_dsn)
        assert report.pruned == 0 and report.restored["memories"] == 6
        again = await run_cycle(moved, empty_dsn, steps=["demote"], use_ray=False)
        assert again.steps["demote"] == {"demoted": 6, "batches": 1, "batches_resumed": 1}
        [state] = await _execute(
            empty_dsn,
            "SELECT (SELECT count(*) FROM memories) AS hot, (SELECT count(*) FROM memory_ids WHERE tier = 'cold') AS cold",
        )
        cold = [r["id"] for r in _cold_rows(moved)]
        assert (state["hot"], state["cold"], len(cold), len(set(cold))) == (0, 6, 6, 6)
    finally:
        shutil.rmtree(new_home, ignore_errors=True)
        shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.mark.subprocess
def test_the_client_tools_are_found_by_version_and_the_password_stays_off_the_command_line() -> None:
    tool, version = backup_mod.pg_tool("pg_dump", embedded=True, at_least=15)
    assert Path(tool).name == "pg_dump" and int(version.split(".")[0]) >= 15
    with pytest.raises(ConfigError, match="no pg_restore for PostgreSQL 99 or newer was found") as missing:
        backup_mod.pg_tool("pg_restore", embedded=False, at_least=99)
    assert "postgresql-client-99" in (missing.value.hint or "") and version in missing.value.message
    with backup_mod._libpq("postgresql://ana:s3cr%3At@db.example:6543/brain?sslmode=require") as conninfo:
        assert "s3cr" not in conninfo and conninfo.startswith("postgresql://ana@db.example:6543/brain?sslmode=require&")
        passfile = Path(unquote(conninfo.rpartition("passfile=")[2]))
        assert passfile.read_text() == "*:*:*:*:s3cr\\:t\n" and passfile.stat().st_mode & 0o077 == 0
    assert not passfile.exists()


# --- the production cold tier: the catalog in the hot database, the warehouse on S3 (moto stands in) ---------
BUCKET = "cabrain-cold"


@pytest.fixture(scope="module")
@brings("subprocess")
def s3_endpoint() -> Iterator[str]:
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
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def _production(dsn: str, endpoint: str, prefix: str) -> dict[str, str]:
    return {
        "cold_catalog_uri": dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        "cold_warehouse": f"s3://{BUCKET}/{prefix}",
        "cold_s3_endpoint": endpoint,
        "cold_s3_region": "us-east-1",
        "cold_s3_access_key": "test",
        "cold_s3_secret_key": "test",
    }


async def test_a_catalog_in_the_database_and_an_s3_warehouse_move_to_another_database_and_prefix(
    open_brain, db_dsn, pg_server, s3_endpoint, embedder
) -> None:
    brain = await open_brain(**DEMOTING, **_production(db_dsn, s3_endpoint, "warehouse"))
    for agent in ("alice", "bob"):
        await brain.create_agent(agent)
    await brain.create_namespace("alice", "proj")
    ids = await _populate(brain, db_dsn, brain.settings)
    rows, cold = await _all_rows(db_dsn), _cold_rows(brain.settings)
    folder, new_home = _backup_folder(), make_scratch_dir("cabrain-home-")
    target_name = f"t_{uuid.uuid4().hex[:16]}"
    target = pg_server.dsn(target_name)
    try:
        manifest = await backup(brain.settings, folder, dsn=db_dsn)
        assert manifest["cold"]["catalog"] == "hot database" and "cold/catalog.db" not in manifest["files"]
        assert manifest["cold"]["warehouse"] == f"s3://{BUCKET}/warehouse"
        assert any(f.endswith(".parquet") for f in manifest["files"])

        moved = load_settings(home=new_home, **_production(target, s3_endpoint, "moved"))
        report = await restore(moved, folder, dsn=target)
        assert report.mismatches == [] and report.catalog == "catalog restored with the database"
        restored_rows = await _all_rows(target)
        [pointer] = restored_rows.pop("iceberg_tables")
        assert f"s3://{BUCKET}/moved/cabrain/memories/metadata/" in pointer
        assert restored_rows == {k: v for k, v in rows.items() if k != "iceberg_tables"}
        assert _cold_rows(moved) == cold
        assert all(f.startswith(f"s3://{BUCKET}/moved/") for f in ColdTier(moved).files("proj"))
        restored = await Brain.open(moved, dsn=target, embedder=embedder)
        try:
            found = await restored.recall_archive("alice", ArchiveQuery("rotated every deploy key", "proj", k=1))
            assert found.hits[0].memory.id == ids[OLD_EVENTS[2]]
        finally:
            await restored.close()
    finally:
        await _execute(pg_server.dsn("postgres"), f"DROP DATABASE IF EXISTS {target_name} WITH (FORCE)")
        shutil.rmtree(new_home, ignore_errors=True)
        shutil.rmtree(folder.parent, ignore_errors=True)
