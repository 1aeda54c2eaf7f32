"""Agents, keys and grants: an admin creates agents (their key shown once, in the answer to the form,
never in a URL), makes and revokes keys and disables agents; every signed-in agent sees its
namespaces, shares those it owns, revokes grants, and accepts or declines grants offered to it.
Each change is a form with its CSRF token; who may make it is the gate's, as for the API."""

from __future__ import annotations

import urllib.parse
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import Brain
from cabrain.errors import InputError, NotFound
from cabrain.identity import NewKey
from cabrain.serve.console import filters
from cabrain.serve.console import session as sessions
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, change_form, router, see_other, text
from cabrain.serve.console.session import Session
from cabrain.serve.deps import Svc

routes = router()
ANSWERED = {"accept": "accepted", "decline": "declined"}


@routes.get("/agents")
async def agents(request: Request, svc: Svc, session: Current) -> Response:
    found = await svc.run(lambda b: b.agents(agent=session.agent))
    return page(request, "agents.html", title="Agents", agents=found, new_key=None)


@routes.post("/agents")
async def create_agent(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    agent_id, display = text(form, "id"), text(form, "display_name") or None
    is_admin = text(form, "is_admin") == "yes"
    if not agent_id:
        raise InputError("give the new agent an id")

    async def op(b: Brain) -> NewKey:
        await b.create_agent(agent_id, display_name=display, is_admin=is_admin, exist_ok=False, agent=session.agent)
        return await b.create_key(agent_id, label=text(form, "key_label") or "console", agent=session.agent)

    new_key = await svc.run(op)
    found = await svc.run(lambda b: b.agents(agent=session.agent))
    return page(request, "agents.html", title="Agents", agents=found, new_key=new_key, status=201)


async def _agent_page(
    request: Request, svc: Svc, session: Session, agent_id: str, *, new_key: NewKey | None = None, status: int = 200
) -> Response:
    known = [a for a in await svc.run(lambda b: b.agents(agent=session.agent)) if a.id == agent_id]
    if not known:
        raise NotFound(f"agent {agent_id!r} does not exist")
    keys = await svc.run(lambda b: b.keys(agent_id, agent=session.agent))
    done = "" if new_key else filters.field(request.query_params, "done")
    return page(
        request,
        "agent.html",
        title=f"Agent {agent_id}",
        agent=known[0],
        keys=keys,
        new_key=new_key,
        done=done,
        status=status,
    )


@routes.get("/agents/{agent_id}")
async def agent(request: Request, agent_id: str, svc: Svc, session: Current) -> Response:
    return await _agent_page(request, svc, session, agent_id)


@routes.post("/agents/{agent_id}/keys")
async def create_key(request: Request, agent_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    new_key = await svc.run(
        lambda b: b.create_key(agent_id, label=text(form, "label") or "console", agent=session.agent)
    )
    return await _agent_page(request, svc, session, agent_id, new_key=new_key, status=201)


@routes.post("/agents/{agent_id}/keys/{key_id}/revoke")
async def revoke_key(request: Request, agent_id: str, key_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if text(form, "confirm") != "yes":
        raise InputError("tick the confirmation to revoke this key", hint="whoever uses it is refused from then on")
    if not await svc.run(lambda b: b.revoke_key(key_id, agent_id=agent_id, agent=session.agent)):
        raise NotFound(f"agent {agent_id!r} has no active key {key_id}")
    svc.forget_keys()
    return see_other(f"{sessions.PATH}/agents/{urllib.parse.quote(agent_id)}?done=revoked")


@routes.post("/agents/{agent_id}/disable")
async def disable_agent(request: Request, agent_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if text(form, "confirm") != "yes":
        raise InputError(
            "tick the confirmation to disable this agent", hint="its keys stop working; nothing is deleted"
        )
    await svc.run(lambda b: b.disable_agent(agent_id, agent=session.agent))
    svc.forget_keys()
    return see_other(f"{sessions.PATH}/agents/{urllib.parse.quote(agent_id)}?done=disabled")


@routes.get("/namespaces")
async def namespaces(request: Request, svc: Svc, session: Current) -> Response:
    found = await svc.run(lambda b: b.namespaces(session.agent))
    owned = [n["name"] for n in found if session.principal.is_admin or n["owner_agent_id"] == session.agent]

    async def grants_of(b: Brain) -> dict[str, list[dict[str, Any]]]:
        return {name: await b.grants(session.agent, name) for name in owned}

    grants = await svc.run(grants_of)
    return page(
        request,
        "namespaces.html",
        title="Namespaces",
        namespaces=found,
        grants=grants,
        done=filters.field(request.query_params, "done"),
    )


@routes.post("/namespaces/share")
async def share(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    namespace, grantee = text(form, "namespace"), text(form, "agent")
    if not grantee:
        raise InputError("name the agent to share with")
    can_write = text(form, "can_write") == "yes"
    await svc.run(lambda b: b.share(session.agent, namespace, grantee, can_read=True, can_write=can_write))
    return see_other(f"{sessions.PATH}/namespaces?done=shared")


@routes.post("/namespaces/revoke")
async def revoke(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    namespace, grantee = text(form, "namespace"), text(form, "agent")
    if not await svc.run(lambda b: b.revoke(session.agent, namespace, grantee)):
        raise NotFound(f"agent {grantee!r} holds no grant on {namespace!r}")
    return see_other(f"{sessions.PATH}/namespaces?done=revoked")


@routes.post("/namespaces/answer")
async def answer(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    namespace, choice = text(form, "namespace"), text(form, "answer")
    if choice == "accept":
        await svc.run(lambda b: b.accept_grant(session.agent, namespace))
    elif choice == "decline":
        if not await svc.run(lambda b: b.decline_grant(session.agent, namespace)):
            raise NotFound(f"no grant on {namespace!r} to decline")
    else:
        raise InputError("answer accept or decline")
    return see_other(f"{sessions.PATH}/namespaces?done={ANSWERED[choice]}")
