"""Capture (Claude Code hooks): memories handed over are stored at once and retained in the
background by the replica's inbox worker; the same call can recall for context."""

from __future__ import annotations

import asyncio

from cabrain.brain import Brain
from cabrain.errors import InputError
from cabrain.faces.capture import WITHHELD
from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import CaptureOut
from cabrain.serve.routing import router
from cabrain.types import RecallQuery

routes = router(tags=["memories"])


@routes.post(
    "/v1/capture",
    status_code=202,
    summary="Hand over captured memories (Claude Code hooks): stored at once, retained in the background",
)
async def capture(body: schemas.CaptureIn, svc: Svc, p: Caller) -> CaptureOut:
    if (body.namespace is None) == (body.project is None):
        raise InputError("give either namespace (a configured one) or project (a derived one)")
    target: dict[str, str] = {}
    injectable = False

    async def op(b: Brain) -> int:
        nonlocal injectable
        target["namespace"], injectable = await b.capture_namespace(
            p.agent_id, namespace=body.namespace, project=body.project
        )
        if not body.items:
            return 0
        items = [i.model_dump(mode="json") for i in body.items]
        return await b.capture(p.agent_id, target["namespace"], items, decide=body.decide)

    warm = None
    if body.recall is not None and svc.brain is not None and len(body.recall.query) <= svc.settings.max_query_chars:
        # embed the query while the items are stored
        warm = asyncio.create_task(svc.brain.warm_query(p.agent_id, body.recall.query))
    try:
        queued = await svc.run(op)
    finally:
        if warm is not None:  # the recall below takes the vector from the query cache
            await asyncio.gather(warm, return_exceptions=True)
    if queued:
        svc.inbox_ready.set()
    namespace = target["namespace"]
    answer: CaptureOut = {"namespace": namespace, "queued": queued, "items": len(body.items)}
    if body.recall is not None:
        if injectable:
            query = RecallQuery(
                body.recall.query, namespace, k=body.recall.k, expand=False, context=tuple(body.recall.context)
            )
            result = await svc.run(lambda b: b.recall(p.agent_id, query))
            answer["hits"], answer["timings_ms"] = result.hits, dict(result.timings_ms)
        else:  # another agent's namespace the caller never accepted: nothing of it goes into its context
            answer["hits"], answer["withheld"] = [], WITHHELD.format(namespace)
    return answer
