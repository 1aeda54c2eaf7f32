"""The recall playground: a query against a namespace (hot recall, or the cold tier's archive recall)
taken apart - each hit's place in the vector list, the keyword list and after fusion, each term of
its score with its formula, the timing of each stage, what one hop through entities reached - and
"why not this memory?". It runs the very recall the API runs, as the signed-in agent, but as a
look, not a use (:meth:`cabrain.brain.Brain.explain_recall`): nothing it shows is counted."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.errors import InputError
from cabrain.serve.console import filters
from cabrain.serve.console.pages import readable_namespaces
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, router
from cabrain.serve.deps import Svc
from cabrain.types import ArchiveQuery, MemoryType, Network, RecallMode, RecallQuery

routes = router()

FIELDS = [
    "q",
    "namespace",
    "mode",
    "k",
    "network",
    "memory_type",
    "source_kind",
    "from",
    "to",
    "as_of",
    "context",
    "why_not",
]
FLAGS = ["rerank", "expand", "include_invalid", "archive"]
# each stage's timing, in words
STAGES = {
    "lookups_ms": "lookups",
    "embed_ms": "embedding",
    "vector_ms": "vector search",
    "bm25_ms": "keyword search",
    "rerank_ms": "rerank",
    "expand_ms": "through entities",
    "scan_ms": "cold scan",
    "score_ms": "scoring",
    "fetch_ms": "fetch",
    "total_ms": "total",
}
NO_RERANKER = "no reranker configured: set CABRAIN_RERANKER_PROVIDER (cross-encoder or http)"


def stages(timings: dict[str, float]) -> list[tuple[str, float]]:
    """A recall's timings as (what, milliseconds), named in words."""
    return [(STAGES.get(key, key.removesuffix("_ms").replace("_", " ")), ms) for key, ms in timings.items()]


def memory_id(params: Any) -> uuid.UUID | None:
    value = filters.field(params, "why_not")
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise filters.FieldError("why_not", f"why not: {value!r} is not a memory id (a UUID)") from None


@routes.get("/recall")
async def recall(request: Request, svc: Svc, session: Current) -> Response:
    params = request.query_params
    namespaces = await readable_namespaces(svc, session.agent)
    values = filters.form_values(params, FIELDS)
    asked = bool(values["q"])
    # the replica's own settings never name a reranker (it is a deployment of its own, when configured)
    reranker = "reranker" in svc.models
    # an empty form starts with expansion on, and reranking when there is a reranker to rerank with
    defaults = {"expand", "rerank"} if reranker else {"expand"}
    flags = {name: filters.flag(params, name) if asked else name in defaults for name in FLAGS}
    values["namespace"] = values["namespace"] or (namespaces[0]["name"] if namespaces else "")
    result = archive = None
    if asked:
        mode = RecallMode(filters.choice(params, "mode", filters.MODES) or RecallMode.HYBRID.value)
        k = int(filters.number(params, "k", low=1, high=svc.settings.recall_max_k, integer=True) or 10)
        network = filters.choice(params, "network", filters.NETWORKS)
        memory_type = filters.choice(params, "memory_type", filters.MEMORY_TYPES)
        why_not = memory_id(params)
        scope: dict[str, Any] = {
            "query": values["q"],
            "namespace": values["namespace"],
            "k": k,
            "mode": mode,
            "networks": (Network(network),) if network else None,
            "memory_types": (MemoryType(memory_type),) if memory_type else None,
            "source_kinds": (values["source_kind"],) if values["source_kind"] else None,
            "valid_from": filters.day(params, "from"),
            "valid_to": filters.day(params, "to", end=True),
            "include_invalid": flags["include_invalid"],
        }
        as_of = filters.as_of(params)
        # the earlier turns of a conversation, one a line, oldest first
        context = tuple(line.strip() for line in values["context"].splitlines() if line.strip())
        if flags["archive"]:
            if as_of is not None or context or why_not is not None:
                raise InputError("as of, earlier turns and why not are for hot recall", hint="untick the archive")
            archive_query = ArchiveQuery(**scope)
            archive = await svc.run(lambda b: b.recall_archive(session.agent, archive_query))
        else:
            query = RecallQuery(**scope, rerank=flags["rerank"], expand=flags["expand"], as_of=as_of, context=context)
            result = await svc.run(lambda b: b.explain_recall(session.agent, query, why_not=why_not))
    answered = result or archive
    return page(
        request,
        "recall.html",
        title="Recall",
        namespaces=namespaces,
        values=values,
        flags=flags,
        result=result,
        archive=archive,
        timings=stages(dict(answered.timings_ms)) if answered is not None else [],
        asked=asked,
        reranker=reranker,
        no_reranker=NO_RERANKER,
        modes=filters.MODES,
        networks=filters.NETWORKS,
        memory_types=filters.MEMORY_TYPES,
    )
