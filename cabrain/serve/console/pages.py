"""The console's pages: signing in and out, browsing memories, a memory with its history, and the
changes a person may make to it (forget, revert a judgment), each behind a confirmation."""

from __future__ import annotations

import dataclasses
import urllib.parse
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import as_uuid
from cabrain.errors import InputError
from cabrain.serve.console import filters
from cabrain.serve.console import session as sessions
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, change_form, current, router, see_other, text
from cabrain.serve.deps import Svc

routes = router()

BROWSE_FIELDS = [
    "namespace",
    "tier",
    "network",
    "memory_type",
    "source_kind",
    "from",
    "to",
    "min_importance",
    "history",
    "as_of",
    "q",
    "speaker",
    "thread",
]
TIERS = ["hot", "cold"]
PAGE_SIZE = 50


async def readable_namespaces(svc: Svc, agent: str) -> list[dict[str, Any]]:
    return [n for n in await svc.run(lambda b: b.namespaces(agent)) if n["can_read"]]


@routes.get("")
@routes.get("/")
async def home() -> Response:
    return see_other(f"{sessions.PATH}/overview")


@routes.get("/login")
async def login_page(request: Request) -> Response:
    nonce = sessions.login_nonce()
    response = page(
        request,
        "login.html",
        title="Sign in",
        nonce=nonce,
        next=sessions.safe_next(request.query_params.get("next")),
        message="",
    )
    sessions.set_cookie(response, request, sessions.LOGIN_COOKIE, nonce)
    return response


@routes.post("/login")
async def login(request: Request, svc: Svc) -> Response:
    sessions.check_origin(request)
    form = await request.form()
    nonce = request.cookies.get(sessions.LOGIN_COOKIE, "")
    sessions.check_csrf(text(form, sessions.CSRF_FIELD) or None, nonce or "-")
    key = text(form, "key")
    target = sessions.safe_next(text(form, "next"))
    if not key:
        raise InputError("enter an API key (cbk_...)")
    held = sessions.session_id(request)  # a sign-in rotates the session: the one held before ends
    # a refused key is the API's 401, shown on the error page
    session_id, _ = await svc.run(lambda b: b.open_console_session(key, replaces=held))
    response = see_other(target)
    sessions.set_cookie(response, request, sessions.COOKIE, session_id)
    sessions.clear_cookie(response, request, sessions.LOGIN_COOKIE)
    return response


@routes.post("/logout")
async def logout(request: Request, svc: Svc, session: Current) -> Response:
    await change_form(request, session)
    session_id = sessions.session_id(request)
    if session_id:
        await svc.run(lambda b: b.close_console_session(session_id))
    response = see_other(f"{sessions.PATH}/login")
    sessions.clear_cookie(response, request, sessions.COOKIE)
    return response


async def opening_namespace(svc: Svc, agent: str, namespaces: list[dict[str, Any]]) -> str:
    """Where the memory list opens: the namespace written to last among those the agent may read,
    else its own, else the first."""
    names = [n["name"] for n in namespaces]
    last = await svc.run(lambda b: b.last_written(agent))
    if last in names:
        return str(last)
    own = [n["name"] for n in namespaces if n.get("owner_agent_id") == agent]
    return own[0] if own else (names[0] if names else "")


@routes.get("/memories")
async def memories(request: Request, svc: Svc, session: Current) -> Response:
    params = request.query_params
    namespaces = await readable_namespaces(svc, session.agent)
    namespace = filters.field(params, "namespace") or await opening_namespace(svc, session.agent, namespaces)
    values = filters.form_values(params, BROWSE_FIELDS) | {"namespace": namespace}
    found, next_cursor, counted = [], None, None
    if namespace:
        chosen = dataclasses.replace(
            filters.browse_filters(params),
            text=filters.field(params, "q") or None,
            speaker=filters.field(params, "speaker") or None,
            thread=filters.field(params, "thread") or None,
        )
        cursor = filters.field(params, "cursor") or None
        archived = filters.choice(params, "tier", TIERS) == "cold"
        result = await svc.run(
            lambda b: b.browse(session.agent, namespace, chosen, limit=PAGE_SIZE, cursor=cursor, archived=archived)
        )
        found, next_cursor = result.memories, result.next_cursor
        if not archived and cursor is None and next_cursor is None and chosen.narrowed:
            counted = {"count": len(found), "more": False}  # the whole list is on this page
        elif not archived:
            counted = await svc.run(lambda b: b.browse_count(session.agent, namespace, chosen))
    next_url = None
    if next_cursor:
        query = {k: v for k, v in values.items() if v} | {"cursor": next_cursor}
        next_url = f"{sessions.PATH}/memories?{urllib.parse.urlencode(query)}"
    return page(
        request,
        "memories.html",
        title="Memories",
        namespaces=namespaces,
        values=values,
        memories=found,
        counted=counted,
        next_url=next_url,
        first_page=not filters.field(params, "cursor"),
        networks=filters.NETWORKS,
        memory_types=filters.MEMORY_TYPES,
    )


@routes.get("/memories/{memory_id}")
async def memory(request: Request, memory_id: str, svc: Svc, session: Current) -> Response:
    as_of = filters.as_of(request.query_params)  # the version that was current then
    found = await svc.run(lambda b: b.get(session.agent, memory_id, as_of=as_of))
    judgments = await svc.run(lambda b: b.judgments(session.agent, found.memory.id))
    used = await svc.run(lambda b: b.access_history(session.agent, found.memory.id))
    return page(
        request,
        "memory.html",
        title="Memory",
        found=found,
        m=found.memory,
        judgments=judgments,
        used=used,
        done=filters.field(request.query_params, "done"),
        as_of=as_of,
    )


@routes.post("/memories/{memory_id}/forget")
async def forget(request: Request, memory_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if text(form, "confirm") != "yes":
        raise InputError("tick the confirmation to forget this memory", hint="it leaves recall; it is never deleted")
    reason = text(form, "reason") or None
    await svc.run(lambda b: b.forget(session.agent, memory_id, reason=reason))
    return see_other(f"{sessions.PATH}/memories/{urllib.parse.quote(memory_id)}?done=forgotten")


@routes.post("/judgments/{judgment_id}/revert")
async def revert(request: Request, judgment_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if text(form, "confirm") != "yes":
        raise InputError("tick the confirmation to revert this judgment", hint="a revert can itself be reverted")
    reason = text(form, "reason") or None
    await svc.run(lambda b: b.revert(session.agent, judgment_id=judgment_id, reason=reason))
    run = text(form, "run")
    if run:  # reverted from a sleep run's page: back to it
        return see_other(f"{sessions.PATH}/sleep/{urllib.parse.quote(str(as_uuid(run, 'sleep run id')))}?done=reverted")
    back = text(form, "memory")
    if back:
        return see_other(f"{sessions.PATH}/memories/{urllib.parse.quote(back)}?done=reverted")
    return see_other(f"{sessions.PATH}/memories")


__all__ = ["current", "routes"]
