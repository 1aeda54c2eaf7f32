"""Where CaBrain keeps its data by default. Standard library only: the capture hook imports it
on every Claude Code event, so it must stay cheap to import."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def default_home() -> Path:
    """Per-user data directory; for root a system directory.

    Root's home is not traversable by the unprivileged account the embedded PostgreSQL runs as,
    so root gets ``/var/lib/cabrain`` instead of ``~/.local/share/cabrain``.
    """
    from pathlib import Path

    return Path(default_home_dir())


def default_home_dir() -> str:
    """:func:`default_home` as a string, without importing pathlib (the capture hook's path)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return "/var/lib/cabrain"
    return user_data_dir("cabrain")


def user_data_dir(app: str) -> str:
    """The platform's per-user data directory for ``app``, as ``platformdirs.user_data_dir(app,
    appauthor=False)`` gives it (XDG on Linux and BSDs, Application Support on macOS, LOCALAPPDATA
    on Windows), in the standard library."""
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~/Library/Application Support"), app)
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser(r"~\AppData\Local")
        return os.path.join(base, app)
    base = (os.environ.get("XDG_DATA_HOME") or "").strip() or os.path.expanduser("~/.local/share")
    return os.path.join(base, app)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user alone (mode 0600), atomically: a reader sees
    the old file or the whole new one, never a file another user could read first. The folder is
    made (mode 0700) when missing; an existing one is left as it is."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)
