"""Connectors (``/v1/connectors``): adding one is an admin's (it reads the server's files and
environment and reaches the network from it); listing, syncing and reading runs are for agents that
may write the connector's namespace; removing is the namespace owner's or an admin's. Each route is
one call of :class:`cabrain.connectors.facade.Connectors` over the replica's engine; a sync runs in
the background of the replica asked, and its run tells how it goes."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Query
from pydantic import Field

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router
from cabrain.serve.schemas import Body

routes = router(tags=["connectors"])


class ConnectorIn(Body):
    name: str = Field(description="Lowercase letters, digits, '.', '_' and '-'; at most 63.", examples=["handbook"])
    kind: str = Field(description="folder | webdav | gitlab | gdrive | vikunja | slack-export | whatsapp")
    namespace: str
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="The kind's settings; a credential only by the name of the variable holding it (token_env).",
        examples=[{"url": "https://gitlab.example.com", "project": "team/app", "token_env": "GITLAB_TOKEN"}],
    )
    visibility: str = Field(default="team", description="private | team | global: the memories' visibility.")
    every_s: int | None = Field(
        default=None, ge=60, le=2**31 - 1, description="Sync on a schedule, every this many seconds."
    )
    check: bool = Field(
        default=True,
        description="Reach the source first (the path, the credential, the project or folder) and refuse a wrong "
        "one; false adds a source not reachable yet.",
    )


@routes.post("/v1/connectors", status_code=201, summary="Add a connector (admin)")
async def add_connector(body: ConnectorIn, svc: Svc, p: Caller) -> dict[str, Any]:
    made = await svc.run(
        lambda b: svc.connectors(b).add(
            p.agent_id,
            body.name,
            body.kind,
            body.namespace,
            body.config,
            visibility=body.visibility,
            every_s=body.every_s,
            check=body.check,
        )
    )
    return made.to_json()


@routes.get("/v1/connectors", summary="The connectors writing to namespaces you may write")
async def list_connectors(svc: Svc, p: Caller) -> dict[str, Any]:
    found = await svc.run(lambda b: svc.connectors(b).listing(p.agent_id))
    return {"connectors": [c.to_json() for c in found]}


@routes.get("/v1/connectors/{name}", summary="A connector")
async def get_connector(name: str, svc: Svc, p: Caller) -> dict[str, Any]:
    return (await svc.run(lambda b: svc.connectors(b).get(p.agent_id, name))).to_json()


@routes.delete("/v1/connectors/{name}", summary="Remove a connector; the memories it wrote stay")
async def remove_connector(name: str, svc: Svc, p: Caller) -> dict[str, Any]:
    gone = await svc.run(lambda b: svc.connectors(b).remove(p.agent_id, name))
    return {"removed": gone.name}


@routes.post("/v1/connectors/{name}/sync", status_code=202, summary="Start a sync now")
async def sync_connector(name: str, svc: Svc, p: Caller) -> dict[str, Any]:
    run_id = await svc.run(lambda b: svc.connectors(b).start_sync(p.agent_id, name, spawn=svc.spawn_sync))
    return {"run_id": str(run_id), "status": "running"}


@routes.post("/v1/connectors/{name}/dry-run", summary="What a sync would do now, writing nothing")
async def dry_run_connector(name: str, svc: Svc, p: Caller) -> dict[str, Any]:
    return (await svc.run(lambda b: svc.connectors(b).dry_run(p.agent_id, name))).to_json()


@routes.get("/v1/connectors/{name}/runs", summary="A connector's recent syncs, newest first")
async def connector_runs(
    name: str, svc: Svc, p: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 20
) -> dict[str, Any]:
    return {"runs": await svc.run(lambda b: svc.connectors(b).runs(p.agent_id, name, limit=limit))}


@routes.get("/v1/connectors/{name}/runs/{run_id}", summary="One sync: its status and counts")
async def connector_run(name: str, run_id: uuid.UUID, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: svc.connectors(b).run(p.agent_id, name, run_id))
