"""Entities: the names a namespace's memories mention, with what sleep summarised of each."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router
from cabrain.types import EntityPage, EntityWithMemories

routes = router(tags=["entities"])


@routes.get("/v1/entities", summary="Entities of a namespace (what its memories mention), with sleep's summaries")
async def list_entities(
    namespace: Annotated[str, Query(description="A namespace the caller may read.")],
    svc: Svc,
    p: Caller,
    q: Annotated[str | None, Query(max_length=200, description="Only names containing this (any case).")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(description="The next_cursor of the page before.")] = None,
) -> EntityPage:
    return await svc.run(lambda b: b.entities(p.agent_id, namespace, query=q, limit=limit, cursor=cursor))


@routes.get(
    "/v1/entities/{name_or_id:path}",
    summary="One entity (by name or id): its summary and the memories that mention it",
)
async def get_entity(
    name_or_id: str,
    namespace: Annotated[str, Query(description="The entity's namespace.")],
    svc: Svc,
    p: Caller,
    history: Annotated[bool, Query(description="Also superseded and forgotten memories.")] = False,
    limit: Annotated[int, Query(ge=1, le=200, description="Memories returned at most.")] = 20,
) -> EntityWithMemories:
    return await svc.run(lambda b: b.entity(p.agent_id, namespace, name_or_id, history=history, limit=limit))
