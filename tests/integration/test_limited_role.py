"""Migrating as an ordinary role, as on a managed PostgreSQL: no superuser, no CREATEROLE.

Runs on a server of its own, since roles are server-wide and the shared test server already has
``cabrain_sleep``.
"""

import shutil

import asyncpg
import pytest

from cabrain.errors import ExtensionMissing
from cabrain.settings import default_schema_dir
from cabrain.store import migrations
from cabrain.store.db import connect
from cabrain.store.embedded import EmbeddedPostgres
from tests.conftest import EMBEDDING_DIM, EMBEDDING_MODEL, brings, make_scratch_dir


@pytest.fixture(scope="module")
@brings("subprocess")
def server():
    scratch = make_scratch_dir("cabrain-roles-")
    pg = EmbeddedPostgres(scratch / "pg", reaper_interval_s=0.5)
    pg.acquire()
    yield pg
    pg.release()
    shutil.rmtree(scratch, ignore_errors=True)


async def limited_database(server: EmbeddedPostgres, name: str, *, with_vector: bool) -> str:
    admin = await connect(server.dsn("postgres"))
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = 'app'"):
            await admin.execute("CREATE ROLE app LOGIN NOSUPERUSER NOCREATEROLE")
        await admin.execute(f"CREATE DATABASE {name} OWNER app")
    finally:
        await admin.close()
    if with_vector:
        su = await connect(server.dsn(name))
        try:
            await su.execute("CREATE EXTENSION vector")
        finally:
            await su.close()
    return server.dsn(name).replace("cabrain@", "app@", 1)


async def migrate_as(dsn: str):
    conn = await connect(dsn)
    try:
        return await migrations.migrate(
            conn, default_schema_dir(), embedding_dim=EMBEDDING_DIM, embedding_model=EMBEDDING_MODEL
        )
    finally:
        await conn.close()


async def test_a_role_that_cannot_create_the_extension_is_told_what_a_superuser_must_run(server):
    dsn = await limited_database(server, "no_vector", with_vector=False)
    with pytest.raises(ExtensionMissing) as info:
        await migrate_as(dsn)
    assert "could not create an extension" in str(info.value)
    assert "CREATE EXTENSION vector" in info.value.hint
    conn = await connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0
    finally:
        await conn.close()


async def test_a_role_that_cannot_create_roles_migrates_and_explains_the_sleep_role(server):
    dsn = await limited_database(server, "with_vector", with_vector=True)
    report = await migrate_as(dsn)
    assert report.applied == [m.name for m in migrations.discover(default_schema_dir())]
    assert "app may not create roles" in report.sleep_role
    assert "CREATE ROLE cabrain_sleep LOGIN" in report.sleep_role
    admin = await asyncpg.connect(server.dsn("postgres"))
    try:
        assert await admin.fetchval("SELECT count(*) FROM pg_roles WHERE rolname = 'cabrain_sleep'") == 0
        # Once a superuser creates the role, the next migrate grants it access.
        await admin.execute("CREATE ROLE cabrain_sleep LOGIN")
    finally:
        await admin.close()
    again = await migrate_as(dsn)
    assert again.applied == [] and again.sleep_role == "role cabrain_sleep ready"
    sleep = await asyncpg.connect(dsn.replace("app@", "cabrain_sleep@", 1))
    try:
        assert await sleep.fetchval("SELECT count(*) FROM memories") == 0
    finally:
        await sleep.close()
