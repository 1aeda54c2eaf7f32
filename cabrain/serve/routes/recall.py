"""Recall: hybrid search of the hot tier, and of the archive (the cold tier)."""

from __future__ import annotations

from pydantic import Field

from cabrain.search.explain import Explanation
from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router
from cabrain.types import ArchiveResult, RecallQuery, RecallResult

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


class ExplainIn(schemas.RecallIn):
    """A recall to take apart (the same fields as a recall), and a memory to ask about."""

    why_not: str | None = Field(
        default=None,
        description="A memory id: where it stood in each list and what kept it out of the hits "
        "(a memory the caller may not read is only 'not found').",
    )

    def to_query(self) -> RecallQuery:
        return schemas.RecallIn.model_validate(self.model_dump(exclude={"why_not"})).to_query()


@routes.post(
    "/v1/recall/explain",
    summary="Recall as a debugger: the same recall, not counted as a use, each hit's ranks, scores and formula",
)
async def explain_recall(body: ExplainIn, svc: Svc, p: Caller) -> Explanation:
    return await svc.run(lambda b: b.explain_recall(p.agent_id, body.to_query(), why_not=body.why_not))
