"""Recall: hybrid search of the hot tier, and of the archive (the cold tier)."""

from __future__ import annotations

from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router
from cabrain.types import ArchiveResult, RecallResult

routes = router(tags=["memories"])


@routes.post("/v1/recall", summary="Hybrid recall: vectors + BM25, fused, reranked, one entity hop")
async def recall(body: schemas.RecallIn, svc: Svc, p: Caller) -> RecallResult:
    result = await svc.run(lambda b: b.recall(p.agent_id, body.to_query()))
    if svc.brain is not None and svc.brain.caches:
        svc.metrics.recall_cache(result.cached)
    return result


@routes.post(
    "/v1/recall/archive",
    summary="Archive recall: search the cold tier (demoted memories), same scoping as recall",
)
async def recall_archive(body: schemas.ArchiveRecallIn, svc: Svc, p: Caller) -> ArchiveResult:
    return await svc.run(lambda b: b.recall_archive(p.agent_id, body.to_query()))
