"""Writing and reading single memories: retain (one, or a batch), get, forget, reconsolidate."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Header, Query

from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import RetainBatchOut
from cabrain.serve.routing import router
from cabrain.store import requests
from cabrain.types import MemoryWithHistory, RetainResult

routes = router(tags=["memories"])

# A write's key: the client's, or one made here before the first attempt, so that the replica's
# retry after a lost database connection (Replica.run) never writes twice.
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=requests.MAX_KEY_CHARS,
        description="The same key again (a retry) writes nothing and answers what the first call answered "
        "(kept CABRAIN_IDEMPOTENCY_TTL_S).",
    ),
]


def _key(given: str | None) -> str:
    """The client's key as given (retain checks it), else a new one."""
    return given if given is not None else requests.new_key()


@routes.post("/v1/memories", summary="Retain one memory (ADD / UPDATE / INVALIDATE / NOOP)")
async def retain_one(
    body: schemas.MemoryIn, svc: Svc, p: Caller, idempotency_key: IdempotencyKey = None
) -> RetainResult:
    key = _key(idempotency_key)
    [result] = await svc.run(lambda b: b.retain(p.agent_id, [body.to_input()], idempotency_key=key))
    return result


@routes.post("/v1/memories/batch", summary="Retain a batch in one transaction (all or nothing)")
async def retain_batch(
    body: schemas.RetainBatchIn, svc: Svc, p: Caller, idempotency_key: IdempotencyKey = None
) -> RetainBatchOut:
    items, key = [i.to_input() for i in body.items], _key(idempotency_key)
    return {"results": await svc.run(lambda b: b.retain(p.agent_id, items, decide=body.decide, idempotency_key=key))}


@routes.get("/v1/memories/{memory_id}", summary="A memory with its provenance and version history")
async def get_memory(
    memory_id: str,
    svc: Svc,
    p: Caller,
    as_of: Annotated[
        datetime | None,
        Query(
            description="The version of it that was current at this moment (ISO 8601; without an offset: UTC), "
            "with its own history; 404 when none was."
        ),
    ] = None,
) -> MemoryWithHistory:
    return await svc.run(lambda b: b.get(p.agent_id, memory_id, as_of=as_of))


@routes.post("/v1/memories/{memory_id}/forget", summary="Soft-forget: the memory leaves recall but is kept")
async def forget(memory_id: str, svc: Svc, p: Caller, body: schemas.ForgetIn | None = None) -> MemoryWithHistory:
    reason = body.reason if body else None
    return await svc.run(lambda b: b.forget(p.agent_id, memory_id, reason=reason))


@routes.post(
    "/v1/memories/{memory_id}/reconsolidate",
    summary="Replace a memory with a corrected version (the old one is superseded)",
)
async def reconsolidate(
    memory_id: str, body: schemas.ReconsolidateIn, svc: Svc, p: Caller, idempotency_key: IdempotencyKey = None
) -> RetainResult:
    key = _key(idempotency_key)
    return await svc.run(
        lambda b: b.reconsolidate(
            p.agent_id, memory_id, body.content, reason=body.reason, source_ref=body.source_ref, idempotency_key=key
        )
    )
