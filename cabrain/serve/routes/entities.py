"""Entities: the names a namespace's memories mention, with what sleep summarised of each."""

from __future__ import annotations

from typing import Annotated, Literal, cast

from fastapi import Query
from pydantic import Field

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import JudgmentOut
from cabrain.serve.routing import router
from cabrain.serve.schemas import Body
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
    sort: Annotated[
        Literal["name", "mentions"],
        Query(description="name: in name order; mentions: the most mentioned first (by team and global memories)."),
    ] = "name",
) -> EntityPage:
    return await svc.run(lambda b: b.entities(p.agent_id, namespace, query=q, limit=limit, cursor=cursor, sort=sort))


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


class RenameIn(Body):
    new_name: str = Field(min_length=1, max_length=200, description="The entity's new name (its key follows).")
    reason: str | None = Field(default=None, max_length=2000, description="Why (kept with the judgment).")


class MergeIn(Body):
    into: str = Field(min_length=1, max_length=200, description="The entity (name or id) it is merged into.")
    reason: str | None = Field(default=None, max_length=2000, description="Why (kept with the judgment).")


@routes.post(
    "/v1/entities/{name_or_id:path}/rename",
    summary="Rename an entity (writers of its namespace); a revertible judgment, 409 when the name is taken",
)
async def rename_entity(
    name_or_id: str,
    body: RenameIn,
    namespace: Annotated[str, Query(description="The entity's namespace.")],
    svc: Svc,
    p: Caller,
) -> JudgmentOut:
    return cast(
        JudgmentOut,
        await svc.run(lambda b: b.rename_entity(p.agent_id, namespace, name_or_id, body.new_name, reason=body.reason)),
    )


@routes.post(
    "/v1/entities/{name_or_id:path}/merge",
    summary="Merge an entity into another (writers of its namespace): its memory links move; a revertible judgment",
)
async def merge_entity(
    name_or_id: str,
    body: MergeIn,
    namespace: Annotated[str, Query(description="The entities' namespace.")],
    svc: Svc,
    p: Caller,
) -> JudgmentOut:
    return cast(
        JudgmentOut,
        await svc.run(lambda b: b.merge_entity(p.agent_id, namespace, name_or_id, body.into, reason=body.reason)),
    )
