"""Recall, get, browse and export from a streaming replica of the hot tier (issue 37).

One embedded primary and one streaming replica of it, made and run by ``cabrain db replica`` (the
embedded server's own pg_basebackup), for the module. A replica whose replay is paused is how these
tests tell who answered: what was written after the pause is on the primary only.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from cabrain.brain import Brain
from cabrain.client import AsyncClient
from cabrain.errors import NotFound
from cabrain.identity import Principal
from cabrain.portable.facade import Portable
from cabrain.serve.errors import add_handlers
from cabrain.serve.routes import health, memories, recall
from cabrain.serve.standbys import HEADER, ReadYourWrites
from cabrain.settings import default_schema_dir
from cabrain.store import migrations
from cabrain.store.browse import BrowseFilters
from cabrain.store.db import connect
from cabrain.store.embedded import EmbeddedPostgres
from cabrain.store.replicas import READ_AFTER, parse_lsn
from cabrain.types import MemoryInput, RecallQuery
from tests.conftest import (
    EMBEDDING_DIM,
    EMBEDDING_MODEL,
    NOT_DURABLE,
    REPO,
    brings,
    cli_env,
    make_scratch_dir,
    remove_home,
    run_cli,
)

BUFFERS = "128MB"


class ReplicaCommand:
    """``cabrain db replica DIR`` running as its own process, as a person runs it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def start(self) -> str:
        env = cli_env(home=str(self.home), embedded_pg_shared_buffers=BUFFERS)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cabrain.cli", "db", "replica", str(self.home / "replica")],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if line.startswith("CABRAIN_DATABASE_REPLICA_URLS="):
                return line.strip().partition("=")[2]
        raise AssertionError(f"cabrain db replica ended: {''.join(self.output)}")

    def stop(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        self.proc.send_signal(signal.SIGTERM)
        rest = self.proc.stdout.read()
        self.output.append(rest)
        assert self.proc.wait() == 0, "".join(self.output)
        assert "replica stopped" in rest
        self.proc = None


@pytest.fixture(scope="module")
@brings("pg", "subprocess")
def primary() -> Iterator[EmbeddedPostgres]:
    home = make_scratch_dir("cabrain-replicas-")
    server = EmbeddedPostgres(home / "pg", reaper_interval_s=0.5, shared_buffers=BUFFERS, server_options=NOT_DURABLE)
    server.acquire()
    try:
        yield server
    finally:
        server.release()
        remove_home(home)


@pytest.fixture(scope="module")
async def migrated(primary: EmbeddedPostgres) -> str:
    conn = await connect(primary.dsn())
    try:
        await migrations.migrate(
            conn, default_schema_dir(), embedding_dim=EMBEDDING_DIM, embedding_model=EMBEDDING_MODEL
        )
    finally:
        await conn.close()
    return primary.dsn()


@pytest.fixture(scope="module")
@brings("pg", "subprocess")
def replica(primary: EmbeddedPostgres, migrated: str) -> Iterator[tuple[ReplicaCommand, str]]:
    command = ReplicaCommand(primary.root.parent)
    url = command.start()
    assert "copied and started" in "".join(command.output)
    try:
        yield command, url
    finally:
        if command.proc is not None:
            command.stop()


@pytest.fixture
async def open_replicated(migrated: str, replica: tuple[ReplicaCommand, str], settings_for, embedder):
    """Brains on the primary that read from the replica (overrides go to Settings)."""
    opened: list[Brain] = []

    async def make(**overrides: object) -> Brain:
        given = {
            "database_replica_urls": replica[1],
            "replica_check_s": 0.05,
            "replica_retry_s": 0.2,
            "replica_wait_s": 10.0,  # a read after a write waits for the replica: this machine may be slow
        }
        settings = settings_for(migrated, **{**given, **overrides})
        brain = await Brain.open(settings, dsn=migrated, embedder=embedder)
        opened.append(brain)
        return brain

    yield make
    for brain in opened:
        await brain.close()


@contextlib.contextmanager
def after(position: str) -> Iterator[None]:
    """Reads here name the WAL position of a write (as the HTTP API does for CaBrain-LSN)."""
    token = READ_AFTER.set(parse_lsn(position))
    try:
        yield
    finally:
        READ_AFTER.reset(token)


@contextlib.asynccontextmanager
async def paused(url: str, brain: Brain) -> AsyncIterator[None]:
    """The replica replays nothing more until the block ends: paused once it has replayed every
    write ``brain`` made before (on a busy machine it may be behind when the block starts)."""
    async with brain.engine.pool.acquire() as primary:
        position = parse_lsn(await primary.fetchval("SELECT pg_current_wal_lsn()::text"))
    conn = await connect(url)
    try:
        while parse_lsn(await conn.fetchval("SELECT pg_last_wal_replay_lsn()::text")) < position:
            await asyncio.sleep(0.05)  # bounded by the test's own timeout
        await conn.execute("SELECT pg_wal_replay_pause()")
        yield
    finally:
        await conn.execute("SELECT pg_wal_replay_resume()")
        await conn.close()


async def state(brain: Brain) -> dict:
    [only] = await brain.read_replicas()
    return only


async def until(brain: Brain, wanted: str) -> dict:
    while (found := await state(brain))["state"] != wanted:
        await asyncio.sleep(0.05)
    return found


async def recalled(brain: Brain, namespace: str, text: str) -> set:
    """The ids ``namespace``'s agent (each test's agent is named as its namespace) recalls for ``text``."""
    result = await brain.recall(namespace, RecallQuery(text, namespace, k=10))
    return {hit.memory.id for hit in result.hits}


async def test_reads_come_from_the_replica_and_a_read_after_a_write_sees_it(open_replicated, replica) -> None:
    brain = await open_replicated(replica_max_lag_s=60.0)
    await brain.create_agent("ops")
    await brain.create_namespace("ops", "ops")
    [first] = await brain.retain("ops", [MemoryInput("The deploy key lives in the team vault.", "ops")])
    written = await brain.wal_position()
    # on a busy machine the replica may be behind, or not yet seen healthy: wait until it has replayed
    # the write and is in service (bounded by the test's own timeout), so that it is what answers
    while (seen := await state(brain))["state"] != "ok" or parse_lsn(seen["replayed_lsn"]) < parse_lsn(written):
        await asyncio.sleep(0.05)
    with after(written):  # the replica has replayed the write before it answers
        assert first.memory_id in await recalled(brain, "ops", "where is the deploy key")
    assert (await state(brain))["reads"] == 1

    async with paused(replica[1], brain):
        [second] = await brain.retain("ops", [MemoryInput("The staging database moved to port 6543.", "ops")])
        position = await brain.wal_position()
        # the replica answers, without the write: recall, get, browse and export alike
        assert second.memory_id not in await recalled(brain, "ops", "staging database port")
        with pytest.raises(NotFound):
            await brain.get("ops", second.memory_id)
        page = await brain.browse("ops", "ops", BrowseFilters())
        assert [m.id for m in page.memories] == [first.memory_id]
        out = io.StringIO()
        await Portable(brain.engine).export("ops", ["ops"], out)
        assert "deploy key" in out.getvalue() and "staging database" not in out.getvalue()
        behind = await state(brain)
        assert behind["state"] == "ok" and behind["replay_paused"] and behind["lag_bytes"] > 0
        assert parse_lsn(behind["replayed_lsn"]) < parse_lsn(position)
        served = behind["reads"]

        # a read naming the write's position: the replica has not replayed it (in the time a read
        # waits for it), the primary answers
        quick = await open_replicated(replica_max_lag_s=60.0, replica_wait_s=0.2)
        with after(position):
            assert second.memory_id in await recalled(quick, "ops", "staging database port")
            assert (await quick.get("ops", second.memory_id)).memory.id == second.memory_id
        assert (await state(quick))["reads"] == 0
        assert (await state(brain))["reads"] == served

        # bounded staleness: past CABRAIN_REPLICA_MAX_LAG_S the replica is not read from
        strict = await open_replicated(replica_max_lag_s=0.3)
        stale = await until(strict, "behind")
        assert stale["lag_s"] > 0.3 and stale["lag_bytes"] > 0
        assert second.memory_id in await recalled(strict, "ops", "staging database port")
        assert (await state(strict))["reads"] == 0

    caught_up = await until(strict, "ok")
    assert caught_up["lag_s"] <= 0.3 and not caught_up["replay_paused"]
    assert second.memory_id in await recalled(strict, "ops", "staging database port")
    assert (await state(strict))["reads"] == 1


async def test_a_replica_that_stops_leaves_reads_to_the_primary(open_replicated, replica, caplog) -> None:
    command, url = replica
    brain = await open_replicated()
    await brain.create_agent("stops")
    await brain.create_namespace("stops", "stops")
    [kept] = await brain.retain("stops", [MemoryInput("Backups run nightly at two.", "stops")])
    with after(await brain.wal_position()):
        assert kept.memory_id in await recalled(brain, "stops", "when do backups run")
    assert (await state(brain))["reads"] == 1

    command.stop()
    with caplog.at_level(logging.WARNING, logger="cabrain.store.replicas"):
        for _ in range(3):  # no error for the caller: the primary answers
            assert kept.memory_id in await recalled(brain, "stops", "when do backups run")
            await asyncio.sleep(0.3)  # past CABRAIN_REPLICA_RETRY_S: the replica is tried again
        down = await state(brain)
    assert down["state"] == "down" and down["error"] and down["reads"] == 1
    said = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(said) == 1, "an outage is logged once"
    assert url.split("@")[0] in said[0].getMessage()

    assert command.start() == url  # the same folder: started again, not copied again
    said_at_start = [line for line in command.output if line.startswith("replica ")]
    assert said_at_start[0].startswith("replica copied and started") and said_at_start[-1].startswith("replica started")
    await until(brain, "ok")
    assert kept.memory_id in await recalled(brain, "stops", "when do backups run")
    assert (await state(brain))["reads"] == 2


class InProcess:
    """What the routes reach of an ingress replica (:class:`cabrain.serve.replica.Replica`), over one
    Brain in this process: its settings, its brain, running an operation and checking a key."""

    def __init__(self, brain: Brain) -> None:
        self.brain = brain
        self.settings = brain.settings

    async def run(self, op):
        return await self.brain.riding_out(lambda: op(self.brain))

    async def authenticate(self, key: str | None) -> Principal:
        return await self.brain.authenticate(key)


def api(svc: InProcess) -> FastAPI:
    """The API's health, memory and recall routes behind the read-your-writes middleware, as create_api mounts them."""
    app = FastAPI()
    app.state.replica = svc
    app.add_middleware(ReadYourWrites, svc=svc)
    add_handlers(app)
    for area in (health, memories, recall):
        app.include_router(area.routes)
    return app


async def test_over_http_a_write_answers_its_position_and_the_client_reads_after_it(open_replicated, replica) -> None:
    brain = await open_replicated(replica_max_lag_s=60.0, replica_wait_s=0.2)
    await brain.create_agent("web")
    await brain.create_namespace("web", "web")
    key = (await brain.create_key("web")).key
    app = httpx.ASGITransport(api(InProcess(brain)))
    async with (
        paused(replica[1], brain),
        AsyncClient("http://cabrain.test", key, transport=app) as writer,
        AsyncClient("http://cabrain.test", key, transport=app) as other,
    ):
        written = await writer.retain(MemoryInput("The on-call phone is in the second drawer.", "web"))
        assert writer.lsn is not None and other.lsn is None
        query = RecallQuery("where is the on-call phone", "web")
        # the writer's client sends its CaBrain-LSN back: the primary answers, as the paused replica lacks it
        assert written.memory_id in {h.memory.id for h in (await writer.recall(query)).hits}
        # another client names no write: the replica answers, without it
        assert written.memory_id not in {h.memory.id for h in (await other.recall(query)).hits}
        assert other.lsn is None, "a recall is a read: it answers no position"
        [shown] = (await other.health())["replicas"]
        assert shown["state"] == "ok" and shown["replay_paused"] and shown["reads"] == 1
        assert shown["lag_bytes"] > 0 and "@" in shown["url"]
    async with httpx.AsyncClient(transport=app, base_url="http://cabrain.test") as plain:
        refused = await plain.post("/v1/recall", json={"query": "x", "namespace": "web"}, headers={HEADER: "0-1"})
    assert refused.status_code == 400 and HEADER in refused.json()["error"]["message"]


async def test_replica_urls_are_checked_and_the_command_needs_the_embedded_server(home: Path) -> None:
    from cabrain.errors import ConfigError
    from cabrain.settings import load_settings

    with pytest.raises(ConfigError, match="CABRAIN_DATABASE_REPLICA_URLS") as refused:
        load_settings(home=home, database_replica_urls="postgresql://a@/x, mysql://b:secret@h/db")
    assert "secret" not in str(refused.value)
    settings = load_settings(home=home, database_replica_urls="postgresql://a:pw@r1/x , postgresql://b@r2/x")
    assert settings.replica_dsns == ["postgresql://a:pw@r1/x", "postgresql://b@r2/x"]
    assert "pw" not in repr(settings)
    said = run_cli("db", "replica", str(home / "r"), env=cli_env(database_url="postgresql://cabrain@db/cabrain"))
    assert said.returncode != 0 and "pg_basebackup -R" in said.stderr
