"""The judgments that changed a memory (supersessions, merges, corrections, reverts), and undoing one."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Query

from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import JudgmentOut, JudgmentsOut
from cabrain.serve.routing import router

routes = router(tags=["judgments"])


@routes.get(
    "/v1/memories/{memory_id}/judgments",
    summary="The judgments that changed a memory: supersessions, merges, corrections, reverts",
)
async def memory_judgments(
    memory_id: str, svc: Svc, p: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> JudgmentsOut:
    rows = await svc.run(lambda b: b.judgments(p.agent_id, memory_id, limit=limit))
    return {"judgments": cast(list[JudgmentOut], rows)}  # judgments.describe's rows


@routes.post(
    "/v1/memories/{memory_id}/revert",
    summary="Undo the latest judgment that changed a memory (writers of its namespace)",
)
async def revert_memory(memory_id: str, svc: Svc, p: Caller, body: schemas.RevertIn | None = None) -> JudgmentOut:
    reason = body.reason if body else None
    return cast(JudgmentOut, await svc.run(lambda b: b.revert(p.agent_id, memory_id=memory_id, reason=reason)))


@routes.post(
    "/v1/judgments/{judgment_id}/revert",
    summary="Undo a judgment (a revert too) by its id (writers of its namespace)",
)
async def revert_judgment(judgment_id: str, svc: Svc, p: Caller, body: schemas.RevertIn | None = None) -> JudgmentOut:
    reason = body.reason if body else None
    return cast(JudgmentOut, await svc.run(lambda b: b.revert(p.agent_id, judgment_id=judgment_id, reason=reason)))
