"""A real PostgreSQL 15 without pgvector (Debian's, from the machine image) through CABRAIN_DATABASE_URL."""

import shutil
from pathlib import Path

import pytest

from cabrain.doctor import Status, run_doctor
from cabrain.store.db import connect
from cabrain.store.embedded import EmbeddedPostgres
from tests.conftest import brings, cli_env, make_scratch_dir, run_cli

DEBIAN_PG15 = Path("/usr/lib/postgresql/15")


@pytest.fixture(scope="module")
@brings("subprocess")
def pg15_without_pgvector():
    if not (DEBIAN_PG15 / "bin" / "postgres").exists():
        pytest.fail("Debian's postgresql-15 is needed: run the tests through scripts/test")
    assert not (Path("/usr/share/postgresql/15/extension/vector.control")).exists(), (
        "this test needs a server WITHOUT pgvector"
    )
    scratch = make_scratch_dir("cabrain-pg15-")
    server = EmbeddedPostgres(scratch / "pg", install_dir=DEBIAN_PG15, reaper_interval_s=0.5)
    server.acquire()
    yield server
    server.release()
    shutil.rmtree(scratch, ignore_errors=True)


async def test_doctor_says_pgvector_is_missing_and_how_to_get_it(pg15_without_pgvector, settings_for):
    checks = {c.name: c for c in await run_doctor(settings_for(pg15_without_pgvector.dsn()))}
    assert checks["database"].status is Status.OK
    check = checks["postgresql + pgvector"]
    assert check.status is Status.FAIL
    assert "pgvector extension is not installed" in check.detail
    assert "pgvector" in check.hint and "CABRAIN_DATABASE_URL" in check.hint


async def test_migrate_refuses_with_one_clear_message_and_changes_nothing(pg15_without_pgvector, home):
    dsn = pg15_without_pgvector.dsn()
    result = run_cli("migrate", env=cli_env(database_url=dsn, home=str(home)))
    assert result.returncode == 1
    assert "pgvector extension is not installed" in result.stderr
    assert "fix:" in result.stderr and "Traceback" not in result.stderr
    conn = await connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0
    finally:
        await conn.close()
