"""What the running service itself offers, beside the brain: backups of its tiers and its metrics.
Each is an operation the gate (:mod:`cabrain.gate`) lets through first, like every facade's.

- **backups** (admins): a backup of the hot and cold tiers (:mod:`cabrain.store.backup`) written in
  the background, on the machine of the replica asked, into a new folder under
  ``CABRAIN_BACKUP_DIR``; the list of the backups there, each with its manifest;
- **metrics** (admins; Prometheus scrapes with ``CABRAIN_METRICS_KEY`` instead, a token the route
  checks before any agent is involved).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import TYPE_CHECKING, Any

from cabrain.errors import ConfigError, ConflictError, NotFound
from cabrain.gate import operation, system
from cabrain.policy import Op
from cabrain.serve.metrics import collect

if TYPE_CHECKING:
    from cabrain.brain import Brain
    from cabrain.settings import Settings

log = logging.getLogger(__name__)

NAME = re.compile(r"[0-9]{8}T[0-9]{6}Z(-[0-9]+)?")


class ServiceOps:
    """The service's own operations, for one replica (its running backups are its own)."""

    def __init__(self, settings: Settings, brain: Any) -> None:
        self.settings = settings
        self._brain = brain  # () -> awaitable Brain: the replica's, once open
        self._backups: dict[str, dict[str, Any]] = {}

    async def get_brain(self) -> Brain:
        return await self._brain()

    @operation(Op.ADMIN, admin=True, http="POST /v1/backups")
    async def start_backup(self, agent: str) -> str:
        """Start a backup; its name is its folder's."""
        from cabrain.store.backup import backup  # lazy: the dump tools and the cold tier's machinery

        if self.settings.database_url is None:
            raise ConfigError("the service has no CABRAIN_DATABASE_URL to back up")
        if any(b["status"] == "running" for b in self._backups.values()):
            raise ConflictError("a backup is running already", hint="wait for it (GET /v1/backups)")
        brain = await self.get_brain()
        root = self.settings.resolved_backup_dir
        stamp = brain.engine.clock().strftime("%Y%m%dT%H%M%SZ")
        name, n = stamp, 2
        while (root / name).exists() or name in self._backups:
            name, n = f"{stamp}-{n}", n + 1
        state: dict[str, Any] = {"name": name, "status": "running", "started_by": agent}
        self._backups[name] = state
        dsn = self.settings.database_url.get_secret_value()

        async def run() -> None:
            try:
                await backup(self.settings, root / name, dsn=dsn, clock=brain.engine.clock)
                state["status"] = "done"
            except Exception as exc:  # noqa: BLE001 - the backup's answer is its state
                state.update(status="failed", error=str(exc))
                log.warning("backup failed", extra={"backup": name, "error": str(exc)})

        state["task"] = asyncio.create_task(run())
        return name

    @operation(Op.ADMIN, admin=True, http="GET /v1/backups")
    async def backups(self, agent: str) -> list[dict[str, Any]]:
        """The backups under CABRAIN_BACKUP_DIR (a manifest: done), and this replica's running or
        failed ones, newest first."""
        return self._listing()

    @operation(Op.ADMIN, admin=True, http="GET /v1/backups/{name}")
    async def backup(self, agent: str, name: str) -> dict[str, Any]:
        """One backup of this service, by name: its status and what it holds (admin)."""
        found = [b for b in self._listing() if b["name"] == name] if NAME.fullmatch(name) else []
        if not found:
            raise NotFound(f"no backup named {name!r} in {self.settings.resolved_backup_dir}")
        return found[0]

    def _listing(self) -> list[dict[str, Any]]:
        root = self.settings.resolved_backup_dir
        found: dict[str, dict[str, Any]] = {}
        if root.is_dir():
            for folder in root.iterdir():
                manifest = folder / "manifest.json"
                if manifest.is_file():
                    data = json.loads(manifest.read_text())
                    found[folder.name] = {
                        "name": folder.name,
                        "status": "done",
                        "created_at": data.get("created_at"),
                        "schema": data.get("schema"),
                        "hot_memories": data.get("hot", {}).get("tables", {}).get("memories"),
                        "bytes": sum(f.get("bytes", 0) for f in data.get("files", {}).values()),
                    }
        for name, state in self._backups.items():
            if name not in found:
                found[name] = {k: v for k, v in state.items() if k != "task"}
        return sorted(found.values(), key=lambda b: b["name"], reverse=True)

    @operation(Op.ADMIN, admin=True)
    async def metrics(self, agent: str) -> str:
        """Prometheus metrics of every replica on every node."""
        return await collect()

    @system(
        "Prometheus, with CABRAIN_METRICS_KEY checked by the route: a token good for metrics alone", http="GET /metrics"
    )
    async def scrape(self) -> str:
        """The same, for Prometheus (no agent: the route has checked the scrape token)."""
        return await collect()


__all__ = ["ServiceOps"]
