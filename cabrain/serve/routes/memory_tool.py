"""What the memory tool (``cabrain.faces.memory_tool``, Claude's file-like memory) needs beyond the
memory routes: a namespace's memories by provenance, counting reads, bringing archived ones back."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import CountedOut, MemoriesOut
from cabrain.serve.routing import router
from cabrain.types import Memory

routes = router(tags=["memories"])


@routes.get("/v1/memories", summary="Current memories of a namespace, by provenance")
async def list_memories(
    namespace: Annotated[str, Query()],
    svc: Svc,
    p: Caller,
    source_kind: Annotated[str | None, Query()] = None,
    source_ref_prefix: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    include_archived: Annotated[bool, Query(description="also current ones of source_kind in the cold tier")] = False,
) -> MemoriesOut:
    memories = await svc.run(
        lambda b: b.list_memories(
            p.agent_id,
            namespace,
            source_kind=source_kind,
            source_ref_prefix=source_ref_prefix,
            limit=limit,
            include_archived=include_archived,
        )
    )
    return {"memories": memories}


@routes.post(
    "/v1/memories/{memory_id}/unarchive",
    summary="Bring an archived current memory back to the hot tier (writers of its namespace)",
)
async def unarchive(memory_id: str, svc: Svc, p: Caller) -> Memory:
    return await svc.run(lambda b: b.unarchive(p.agent_id, memory_id))


@routes.post("/v1/memories/accessed", summary="Count a read of these memories (a memory-tool file viewed)")
async def touch(body: schemas.TouchIn, svc: Svc, p: Caller) -> CountedOut:
    return {"counted": await svc.run(lambda b: b.touch(p.agent_id, body.ids))}
