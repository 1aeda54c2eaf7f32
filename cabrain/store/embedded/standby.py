"""A streaming replica of the embedded server (``cabrain db replica DIR``), for reads to spread over.

It is made once with the embedded server's own ``pg_basebackup -R`` over the primary's private unix
socket (initdb's ``local replication`` rule: the socket's folder is the only way in), and then runs
as the embedded server does: from its own folder, on its own private unix socket and nothing else,
with its own leases and watchdog (:mod:`cabrain.store.embedded`). It follows the primary's WAL as a
hot standby (read-only; ``hot_standby_feedback`` on, so the primary keeps the rows its long reads,
an export, still see). Its URL goes in ``CABRAIN_DATABASE_REPLICA_URLS``.

No replication slot is kept on the primary (a replica left stopped can never fill the primary's
disk): a replica stopped longer than the primary keeps its WAL is made again (remove its folder).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from cabrain.errors import EmbeddedPostgresError
from cabrain.store.embedded.host import ensure_os_user
from cabrain.store.embedded.server import PORT, SUPERUSER, EmbeddedPostgres

STANDBY_OPTIONS = {"hot_standby": "on", "hot_standby_feedback": "on"}


class EmbeddedReplica(EmbeddedPostgres):
    """A hot standby of ``primary`` under ``root`` (its data in ``root/data``), made on first start."""

    def __init__(
        self,
        root: Path,
        primary: EmbeddedPostgres,
        *,
        start_timeout_s: float = 60.0,
        reaper_interval_s: float = 1.0,
        shared_buffers: str = "auto",
        server_options: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            root,
            os_user=primary.os_user,
            start_timeout_s=start_timeout_s,
            reaper_interval_s=reaper_interval_s,
            install_dir=primary.install_dir,
            shared_buffers=shared_buffers,
            server_options={**STANDBY_OPTIONS, **(server_options or {})},
        )
        self.primary = primary
        if self.root == primary.root or primary.root in self.root.parents or self.root in primary.root.parents:
            raise EmbeddedPostgresError(
                f"a replica's folder ({self.root}) must be outside the primary's ({primary.root}) and not hold it",
                hint="name a folder of its own, e.g. ~/.cabrain/replica1",
            )

    def _ensure_initialised(self) -> None:
        """Copy the running primary with ``pg_basebackup -R`` (into a scratch folder, then renamed)."""
        if (self.data_dir / "PG_VERSION").exists():
            return
        if self.primary.status().pid is None:
            raise EmbeddedPostgresError(
                "the embedded PostgreSQL is not running: a replica is copied from it",
                hint="run `cabrain db replica` as the same user and with the same CABRAIN_HOME as the service",
            )
        if self._as_root:
            ensure_os_user(self.os_user)
        for leftover in self.root.glob("data.init-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise EmbeddedPostgresError(
                f"{self.data_dir} exists but is not a PostgreSQL data directory (no PG_VERSION)",
                hint="move it away; CaBrain copies the primary there",
            )
        scratch = self.root / f"data.init-{os.getpid()}"
        scratch.mkdir(mode=0o700)
        self._chown_for_server(self.root, scratch, self.log_dir)
        self._run(
            "pg_basebackup",
            "--pgdata",
            str(scratch),
            "--host",
            str(self.primary.socket_dir),
            "--port",
            str(PORT),
            "--username",
            SUPERUSER,
            "--no-password",
            "--write-recovery-conf",  # standby.signal and primary_conninfo: it follows the primary
            "--wal-method=stream",
            "--checkpoint=fast",
        )
        if self.data_dir.exists():
            self.data_dir.rmdir()
        scratch.rename(self.data_dir)
