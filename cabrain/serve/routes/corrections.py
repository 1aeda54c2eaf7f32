"""A person's corrections of memories (correct, restore) and the audit of judgments per namespace."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, cast

from fastapi import Query
from pydantic import Field

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import AuditOut, JudgmentOut, RevertResultOut, RevertsOut
from cabrain.serve.routing import router
from cabrain.serve.schemas import Body
from cabrain.types import RetainResult

routes = router(tags=["corrections"])


class CorrectIn(Body):
    content: str = Field(description="The memory's corrected text: a new version; the old one is superseded.")
    reason: str | None = Field(default=None, max_length=2000, description="Why (kept with the correction).")


class RestoreIn(Body):
    reason: str | None = Field(default=None, max_length=2000, description="Why it comes back.")


class RevertManyIn(Body):
    ids: list[str] = Field(min_length=1, max_length=100, description="The judgments to revert (at most 100).")
    reason: str | None = Field(default=None, max_length=2000, description="Why (kept with each revert).")


@routes.post(
    "/v1/memories/{memory_id}/correct",
    summary="Correct a memory: a new version supersedes it, as a revertible judgment (writers of its namespace)",
)
async def correct(memory_id: str, body: CorrectIn, svc: Svc, p: Caller) -> RetainResult:
    return await svc.run(lambda b: b.correct(p.agent_id, memory_id, body.content, reason=body.reason))


@routes.post(
    "/v1/memories/{memory_id}/restore",
    summary="Bring a forgotten memory back to recall, as a revertible judgment (writers of its namespace)",
)
async def restore(memory_id: str, svc: Svc, p: Caller, body: RestoreIn | None = None) -> JudgmentOut:
    reason = body.reason if body else None
    return cast(JudgmentOut, await svc.run(lambda b: b.restore(p.agent_id, memory_id, reason=reason)))


@routes.get(
    "/v1/namespaces/{namespace:path}/judgments",
    summary="The audit: a namespace's judgments newest first, by kind, origin and time, with both sides' texts",
)
async def audit(
    namespace: str,
    svc: Svc,
    p: Caller,
    kind: Annotated[str | None, Query(description="Only this kind (supersede, correction, forget, ...).")] = None,
    origin: Annotated[str | None, Query(description="Only those decided by write, sleep, person or import.")] = None,
    since: Annotated[datetime | None, Query(alias="from", description="Made at or after (ISO 8601).")] = None,
    until: Annotated[datetime | None, Query(alias="to", description="Made before (ISO 8601).")] = None,
    cursor: Annotated[str | None, Query(max_length=200, description="A page's next_cursor.")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> AuditOut:
    page = await svc.run(
        lambda b: b.audit(
            p.agent_id,
            namespace,
            kind=kind,
            origin=origin,
            since=since,
            until=until,
            cursor=cursor,
            limit=limit,
        )
    )
    return cast(AuditOut, page)


@routes.post(
    "/v1/judgments/revert",
    summary="Revert several judgments, each as its own revert; per id, done or why not (writers of the namespace)",
)
async def revert_many(body: RevertManyIn, svc: Svc, p: Caller) -> RevertsOut:
    results = await svc.run(lambda b: b.revert_judgments(p.agent_id, body.ids, reason=body.reason))
    return {"results": cast(list[RevertResultOut], results)}
