"""The audit of judgments per namespace: filter by kind, origin and time, both sides' texts, bulk
revert behind a confirmation; and a person's corrections of one memory (correct, restore), each a
revertible judgment. Every page calls the Brain's operations as the signed-in agent."""

from __future__ import annotations

import urllib.parse
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import as_uuid
from cabrain.errors import InputError
from cabrain.serve.console import filters
from cabrain.serve.console import session as sessions
from cabrain.serve.console.pages import opening_namespace, readable_namespaces
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, change_form, router, see_other, text
from cabrain.serve.deps import Svc
from cabrain.write.corrections import DECIDERS, KINDS

routes = router()

AUDIT_FIELDS = ["namespace", "kind", "origin", "from", "to"]
PAGE_SIZE = 50


async def _audit_page(
    request: Request, svc: Svc, session: Any, params: Any, *, results: list[dict[str, Any]] | None = None
) -> Response:
    namespaces = await readable_namespaces(svc, session.agent)
    namespace = filters.field(params, "namespace") or await opening_namespace(svc, session.agent, namespaces)
    values = filters.form_values(params, AUDIT_FIELDS) | {"namespace": namespace}
    found: dict[str, Any] = {"judgments": [], "counts": [], "counts_capped": False, "next_cursor": None}
    if namespace:
        kind = filters.choice(params, "kind", list(KINDS)) or None
        origin = filters.choice(params, "origin", list(DECIDERS)) or None
        since, until = filters.day(params, "from"), filters.day(params, "to", end=True)
        cursor = filters.field(params, "cursor") or None
        found = await svc.run(
            lambda b: b.audit(
                session.agent,
                namespace,
                kind=kind,
                origin=origin,
                since=since,
                until=until,
                cursor=cursor,
                limit=PAGE_SIZE,
            )
        )
    next_url = None
    if found["next_cursor"]:
        query = {k: v for k, v in values.items() if v} | {"cursor": found["next_cursor"]}
        next_url = f"{sessions.PATH}/audit?{urllib.parse.urlencode(query)}"
    return page(
        request,
        "audit.html",
        title="Audit",
        namespaces=namespaces,
        values=values,
        found=found,
        total=sum(c["count"] for c in found["counts"]),
        kinds=KINDS,
        origins=DECIDERS,
        next_url=next_url,
        first_page=not filters.field(params, "cursor"),
        results=results,
    )


@routes.get("/audit")
async def audit(request: Request, svc: Svc, session: Current) -> Response:
    return await _audit_page(request, svc, session, request.query_params)


@routes.post("/audit/revert")
async def revert_selected(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    ids = [v.strip() for v in form.getlist("id") if isinstance(v, str) and v.strip()]
    if not ids:
        raise InputError("tick at least one judgment to revert")
    if text(form, "confirm") != "yes":
        raise InputError("tick the confirmation to revert the selected judgments", hint="each revert can be reverted")
    reason = text(form, "reason") or None
    results = await svc.run(lambda b: b.revert_judgments(session.agent, ids, reason=reason))
    return await _audit_page(request, svc, session, form, results=results)


@routes.post("/memories/{memory_id}/correct")
async def correct(request: Request, memory_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if text(form, "confirm") != "yes":
        raise InputError("tick the confirmation to save the correction", hint="the old version is kept, superseded")
    content = form.get("content")
    typed = content.replace("\r\n", "\n") if isinstance(content, str) else ""  # a textarea's lines end in CRLF
    reason = text(form, "reason") or None
    result = await svc.run(lambda b: b.correct(session.agent, memory_id, typed, reason=reason))
    return see_other(f"{sessions.PATH}/memories/{result.memory_id}?done=corrected")


@routes.post("/memories/{memory_id}/restore")
async def restore(request: Request, memory_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if text(form, "confirm") != "yes":
        raise InputError("tick the confirmation to bring this memory back", hint="a restore can be reverted")
    reason = text(form, "reason") or None
    await svc.run(lambda b: b.restore(session.agent, memory_id, reason=reason))
    return see_other(f"{sessions.PATH}/memories/{as_uuid(memory_id)}?done=restored")


__all__ = ["routes"]
