"""The folder of the embedded PostgreSQL's unix socket, private to us.

``root/run`` (mode 0700) where the socket's path fits a unix socket address; where it does not (a
long ``CABRAIN_HOME``), a fresh :func:`tempfile.mkdtemp` folder (0700, a name no one knew before),
recorded in ``root/socket_dir`` so that every CaBrain process on the same root finds it, and used
again only while it is a real folder (not a link), owned by us (or, as root, the server's account)
and 0700. Never a predictable shared path such as ``/tmp/cabrain-pg-<digest>``: another local user
who made that first (or made it a link to a folder of theirs) would get a superuser connection over
trust."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from cabrain.errors import EmbeddedPostgresError

__all__ = ["make_socket_dir", "private_problem", "socket_dir"]

_MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux; keep a margin
_RECORD = "socket_dir"  # root/socket_dir: the private folder chosen when root/run is too long
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _fits(folder: Path, socket_name: str) -> bool:
    """Whether the socket's path in ``folder`` fits a unix socket address."""
    return len(str(folder / socket_name)) <= _MAX_SOCKET_PATH


def private_problem(path: Path, owners: set[int]) -> str | None:
    """Why ``path`` may not hold the server's socket (None: it may): it must be a real folder, not
    a link, owned by one of ``owners``, mode 0700."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return "not a folder (a link?)"
    if st.st_uid not in owners:
        return f"owned by uid {st.st_uid}"
    if stat.S_IMODE(st.st_mode) != 0o700:
        return f"mode {stat.S_IMODE(st.st_mode):o}, not 700"
    return None


def _recorded(root: Path, socket_name: str, owners: set[int]) -> Path | None:
    try:
        fd = os.open(root / _RECORD, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    try:
        text = os.read(fd, 4096).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)
    path = Path(text) if text else None
    if path is None or not path.is_absolute() or not _fits(path, socket_name):
        return None
    return path if private_problem(path, owners) is None else None


def socket_dir(root: Path, socket_name: str, owners: set[int]) -> Path:
    """Where the server's socket is (or will be): ``root/run``, or the recorded private folder
    (``root/run`` itself until one is made: a path that is never used while too long)."""
    own = root / "run"
    if _fits(own, socket_name):
        return own
    recorded = _recorded(root, socket_name, owners)
    return recorded if recorded is not None else own


def make_socket_dir(root: Path, socket_name: str, owners: set[int], chown: Callable[[Path], None]) -> Path:
    """The socket folder for a server about to start (under the root's lock): ``root/run`` made
    0700, or the recorded private folder while it still checks out, else a fresh ``mkdtemp``
    (given to the server's account by ``chown``)."""
    own = root / "run"
    if _fits(own, socket_name):
        own.mkdir(mode=0o700, exist_ok=True)
        if not own.is_symlink() and os.lstat(own).st_uid == os.geteuid():
            os.chmod(own, 0o700)
        problem = private_problem(own, owners)
        if problem is not None:
            raise EmbeddedPostgresError(
                f"the socket folder {own} is not private: {problem}", hint="remove it; CaBrain makes it again, 0700"
            )
        return own
    recorded = _recorded(root, socket_name, owners)
    if recorded is not None:
        return recorded
    base = tempfile.gettempdir()
    if not _fits(Path(base) / "cabrain-pg-xxxxxxxx", socket_name):
        base = "/tmp"
    made = Path(tempfile.mkdtemp(prefix="cabrain-pg-", dir=base))  # 0700, ours, a name no one knew
    chown(made)
    record = root / _RECORD
    scratch = record.with_name(f"{_RECORD}.{os.getpid()}")
    scratch.unlink(missing_ok=True)
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(str(made))
    os.replace(scratch, record)
    return made
