"""Where CaBrain keeps its data by default. Standard library only: the capture hook imports it
on every Claude Code event, so it must stay cheap to import."""

from __future__ import annotations

import os
from pathlib import Path


def default_home() -> Path:
    """Per-user data directory; for root a system directory.

    Root's home is not traversable by the unprivileged account the embedded PostgreSQL runs as,
    so root gets ``/var/lib/cabrain`` instead of ``~/.local/share/cabrain``.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/cabrain")
    import platformdirs

    return Path(platformdirs.user_data_dir("cabrain", appauthor=False))
