"""The capture feed: what Claude Code capture stored (``source_kind`` claude_code), newest first, per
project (namespace) and session, live: the page polls ``capture.json`` for what arrived since it
was drawn. Secrets were redacted before anything was stored; the page marks where (``[REDACTED]``)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from cabrain.faces.capture.events import SOURCE_KIND
from cabrain.redact import REDACTED
from cabrain.serve.console import filters
from cabrain.serve.console.pages import readable_namespaces
from cabrain.serve.console.render import HEADERS, page
from cabrain.serve.console.routing import Current, router
from cabrain.serve.deps import Svc
from cabrain.store.browse import BrowseFilters
from cabrain.types import Memory

routes = router()
PAGE_SIZE = 100


def _item(m: Memory) -> dict[str, str | None]:
    return {
        "id": str(m.id),
        "content": m.content,
        "session": m.source_ref,
        "hook": str(m.metadata.get("hook") or ""),
        "valid_at": m.valid_at.isoformat(),
    }


async def _feed(svc: Svc, agent: str, namespace: str, since: datetime | None) -> list[Memory]:
    chosen = BrowseFilters(source_kinds=(SOURCE_KIND,), valid_from=since)
    result = await svc.run(lambda b: b.browse(agent, namespace, chosen, limit=PAGE_SIZE))
    return result.memories


@routes.get("/capture")
async def capture(request: Request, svc: Svc, session: Current) -> Response:
    params = request.query_params
    namespaces = await readable_namespaces(svc, session.agent)
    namespace = filters.field(params, "namespace") or (namespaces[0]["name"] if namespaces else "")
    wanted = filters.field(params, "session")
    found = await _feed(svc, session.agent, namespace, None) if namespace else []
    sessions_seen = sorted({m.source_ref for m in found if m.source_ref})
    if wanted:
        found = [m for m in found if m.source_ref == wanted]
    return page(
        request,
        "capture.html",
        title="Capture",
        namespaces=namespaces,
        namespace=namespace,
        sessions=sessions_seen,
        wanted=wanted,
        items=found,
        marker=REDACTED,
        newest=found[0].valid_at.isoformat() if found else datetime.now(UTC).isoformat(),
    )


@routes.get("/capture.json")
async def capture_json(request: Request, svc: Svc, session: Current) -> Response:
    params = request.query_params
    namespace = filters.field(params, "namespace")
    since = filters.day(params, "since")
    wanted = filters.field(params, "session")
    found = await _feed(svc, session.agent, namespace, since)
    items = [_item(m) for m in found if not wanted or m.source_ref == wanted]
    return JSONResponse({"items": items, "marker": REDACTED}, headers=HEADERS)
