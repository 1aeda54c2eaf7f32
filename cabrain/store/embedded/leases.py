"""Who uses the embedded server: one lease file per process, and the lock that guards them.

A lease is ``leases/<pid>`` holding ``<start time>[ service]``: the process's start time tells a
reused pid from the process that wrote it, and ``service`` marks a running service's lease, which
``cabrain db stop --force`` may not drop.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil

log = logging.getLogger("cabrain.store.embedded")

# Leases are per process and per server root, however many EmbeddedPostgres objects point at it:
# how many uses this process holds of each root.
HELD: dict[Path, int] = {}
HELD_LOCK = threading.Lock()


def process_start_time(pid: int) -> float | None:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def recorded_process(pid_path: Path) -> int | None:
    """The process ``pid_path`` records (``<pid> <start time>``), if it still runs."""
    try:
        pid_text, started = pid_path.read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    return pid if process_start_time(pid) == float(started) else None


def stop_recorded_process(pid_path: Path) -> None:
    """Stop the process ``pid_path`` records (not this one) and wait for it, then drop the record."""
    pid = recorded_process(pid_path)
    if pid is not None and pid != os.getpid():
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            proc.terminate()
            psutil.wait_procs([proc], timeout=10)
    pid_path.unlink(missing_ok=True)


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold the server root's ``flock`` (between processes) for the block."""
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Leases:
    """The lease files under one directory (read and changed under :func:`locked`)."""

    def __init__(self, lease_dir: Path) -> None:
        self.dir = lease_dir

    def path(self, pid: int) -> Path:
        return self.dir / str(pid)

    def write(self, *, service: bool = False) -> None:
        """This process's lease: ``<start time>[ service]``."""
        pid = os.getpid()
        self.path(pid).write_text(str(process_start_time(pid)) + (" service" if service else ""))

    def read(self, path: Path) -> tuple[int, float, bool] | None:
        try:
            fields = path.read_text().split()
            return int(path.name), float(fields[0] if fields else "nan"), "service" in fields[1:]
        except (ValueError, OSError):
            return None

    def is_service(self, pid: int) -> bool:
        lease = self.read(self.path(pid))
        return lease is not None and lease[2] and process_start_time(pid) == lease[1]

    def live(self) -> list[int]:
        live = []
        for path in self.dir.glob("*"):
            lease = self.read(path)
            if lease is not None and process_start_time(lease[0]) == lease[1]:
                live.append(lease[0])
        return live

    def prune(self) -> list[int]:
        """Remove leases of processes that are gone (or whose pid was reused); return live pids."""
        live = set(self.live())
        for path in self.dir.glob("*"):
            if not path.name.isdigit() or int(path.name) not in live:
                log.info("embedded_pg.lease_pruned", extra={"lease": path.name})
                path.unlink(missing_ok=True)
        return sorted(live)

    def clear(self) -> None:
        for path in self.dir.glob("*"):
            path.unlink(missing_ok=True)
