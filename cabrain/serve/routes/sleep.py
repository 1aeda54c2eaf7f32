"""Sleep runs (``/v1/sleep/runs``): an agent sees the runs that touched namespaces it may read (their
steps and judgments there); starting and cancelling a cycle are an admin's. Each route is one call of
:class:`cabrain.sleep.runs.SleepRuns` over the replica's engine; a started cycle runs on the
service's Ray and its run tells how it goes, and why it waits when it does."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Query
from pydantic import Field

from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router
from cabrain.serve.schemas import Body

routes = router(tags=["sleep"])


class SleepIn(Body):
    namespaces: list[str] | None = Field(
        default=None, max_length=1000, description="The namespaces to sleep over (default: every one)."
    )
    steps: list[str] | None = Field(
        default=None,
        max_length=20,
        description="consolidate, dedup, reconsolidate, decay, demote, purge, maintain (default: all, in that order).",
    )


@routes.post("/v1/sleep/runs", status_code=202, summary="Start a sleep cycle now (admin)")
async def start_sleep(body: SleepIn, svc: Svc, p: Caller) -> dict[str, Any]:
    run_id = await svc.run(lambda b: svc.sleep_runs(b).start(p.agent_id, body.namespaces, body.steps))
    return {"run_id": str(run_id), "status": "running"}


@routes.get("/v1/sleep/runs", summary="The newest sleep runs over namespaces you may read")
async def sleep_runs(svc: Svc, p: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> dict[str, Any]:
    return {"runs": await svc.run(lambda b: svc.sleep_runs(b).runs(p.agent_id, limit=limit))}


@routes.get("/v1/sleep/runs/{run_id}", summary="One sleep run: its steps, counts, judgments, and why it waits")
async def sleep_run(run_id: uuid.UUID, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: svc.sleep_runs(b).run(p.agent_id, run_id))


@routes.post("/v1/sleep/runs/{run_id}/cancel", status_code=202, summary="Cancel a running sleep cycle (admin)")
async def cancel_sleep(run_id: uuid.UUID, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: svc.sleep_runs(b).cancel(p.agent_id, run_id))


@routes.post(
    "/v1/sleep/runs/{run_id}/revert",
    summary="Undo everything a sleep run did, one revert judgment per namespace you may write",
)
async def revert_sleep(run_id: uuid.UUID, svc: Svc, p: Caller, body: schemas.RevertIn | None = None) -> dict[str, Any]:
    reason = body.reason if body else None
    return {"reverts": await svc.run(lambda b: b.revert_run(p.agent_id, run_id, reason=reason))}
