"""Backups through the API (``/v1/backups``, admins only): a backup of the hot and cold tiers
(:mod:`cabrain.store.backup`) written in the background, on the machine of the replica asked, into a
new folder under ``CABRAIN_BACKUP_DIR``; and the list of the backups there, each with its manifest.
A restore replaces the database the service runs on, so it is never offered here: stop the service
and run ``cabrain restore DIR``."""

from __future__ import annotations

import re
from typing import Any

from cabrain.errors import NotFound
from cabrain.serve.deps import Admin, Svc
from cabrain.serve.routing import router

routes = router(tags=["backups"])

NAME = re.compile(r"^[0-9]{8}T[0-9]{6}Z(-[0-9]+)?$")


@routes.post("/v1/backups", status_code=202, summary="Start a backup of the hot and cold tiers (admin)")
async def start_backup(svc: Svc, p: Admin) -> dict[str, Any]:
    name = await svc.start_backup(p.agent_id)
    return {"name": name, "status": "running", "folder": str(svc.settings.resolved_backup_dir / name)}


@routes.get("/v1/backups", summary="The backups in CABRAIN_BACKUP_DIR, newest first (admin)")
async def list_backups(svc: Svc, p: Admin) -> dict[str, Any]:
    return {"backups": svc.backups()}


@routes.get("/v1/backups/{name}", summary="One backup: running, failed, or done with its manifest (admin)")
async def get_backup(name: str, svc: Svc, p: Admin) -> dict[str, Any]:
    found = [b for b in svc.backups() if b["name"] == name] if NAME.match(name) else []
    if not found:
        raise NotFound(f"no backup named {name!r} in {svc.settings.resolved_backup_dir}")
    return found[0]
