"""The recall playground: a query against a namespace (hot recall, or the cold tier's archive recall)
with every hit's score breakdown, the timing of each stage, and what one hop through entities reached.
It runs the very recall the API runs, as the signed-in agent."""

from __future__ import annotations

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

FIELDS = ["q", "namespace", "mode", "k", "network", "memory_type", "source_kind", "from", "to", "as_of", "context"]
FLAGS = ["rerank", "expand", "include_invalid", "archive"]


@routes.get("/recall")
async def recall(request: Request, svc: Svc, session: Current) -> Response:
    params = request.query_params
    namespaces = await readable_namespaces(svc, session.agent)
    values = filters.form_values(params, FIELDS)
    asked = bool(values["q"])
    # an empty form starts with reranking and expansion on, as the API's defaults are
    flags = {name: filters.flag(params, name) if asked else name in {"rerank", "expand"} for name in FLAGS}
    values["namespace"] = values["namespace"] or (namespaces[0]["name"] if namespaces else "")
    result = archive = None
    if asked:
        mode = RecallMode(filters.choice(params, "mode", filters.MODES) or RecallMode.HYBRID.value)
        k = int(filters.number(params, "k", low=1, high=svc.settings.recall_max_k, integer=True) or 10)
        network = filters.choice(params, "network", filters.NETWORKS)
        memory_type = filters.choice(params, "memory_type", filters.MEMORY_TYPES)
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
            if as_of is not None or context:
                raise InputError("as of and earlier turns are for hot recall", hint="untick the archive")
            archive_query = ArchiveQuery(**scope)
            archive = await svc.run(lambda b: b.recall_archive(session.agent, archive_query))
        else:
            query = RecallQuery(**scope, rerank=flags["rerank"], expand=flags["expand"], as_of=as_of, context=context)
            result = await svc.run(lambda b: b.recall(session.agent, query))
    return page(
        request,
        "recall.html",
        title="Recall",
        namespaces=namespaces,
        values=values,
        flags=flags,
        result=result,
        archive=archive,
        asked=asked,
        modes=filters.MODES,
        networks=filters.NETWORKS,
        memory_types=filters.MEMORY_TYPES,
    )
