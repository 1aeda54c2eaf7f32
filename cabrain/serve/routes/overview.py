"""The overview of what the brain holds and did: counts, activity, storage."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Query

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import OverviewOut
from cabrain.serve.routing import router

routes = router(tags=["overview"])


@routes.get(
    "/v1/overview",
    summary="What the brain holds and did: counts per namespace, tier, type and source; the last day and week",
)
async def overview(
    svc: Svc,
    p: Caller,
    namespace: Annotated[str | None, Query(description="One namespace; every one the key may read if left out")] = None,
    runs: Annotated[int, Query(ge=0, le=50, description="How many of the newest sleep runs")] = 5,
) -> OverviewOut:
    return cast(OverviewOut, await svc.run(lambda b: b.overview(p.agent_id, namespace=namespace, runs=runs)))
