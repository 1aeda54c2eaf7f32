"""Backups through the API (``/v1/backups``, admins only): each route is one operation of
:class:`cabrain.serve.service_ops.ServiceOps`. A restore replaces the database the service runs on,
so it is never offered here: stop the service and run ``cabrain restore DIR``."""

from __future__ import annotations

from typing import Any

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router

routes = router(tags=["backups"])


@routes.post("/v1/backups", status_code=202, summary="Start a backup of the hot and cold tiers (admin)")
async def start_backup(svc: Svc, p: Caller) -> dict[str, Any]:
    name = await svc.ops.start_backup(p.agent_id)
    return {"name": name, "status": "running", "folder": str(svc.settings.resolved_backup_dir / name)}


@routes.get("/v1/backups", summary="The backups in CABRAIN_BACKUP_DIR, newest first (admin)")
async def list_backups(svc: Svc, p: Caller) -> dict[str, Any]:
    return {"backups": await svc.ops.backups(p.agent_id)}


@routes.get("/v1/backups/{name}", summary="One backup: running, failed, or done with its manifest (admin)")
async def get_backup(name: str, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.ops.backup(p.agent_id, name)
