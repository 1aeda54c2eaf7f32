"""Agents, keys and grants: an admin creates agents (their key shown once, in the answer to the form,
never in a URL), makes and revokes keys, gives an agent its role (behind a confirmation) and its
daily caps, sees its usage of the last week drawn, and disables agents; every signed-in agent sees its
namespaces, shares those it owns, revokes grants, and accepts or declines grants offered to it.
Each change is a form with its CSRF token; who may make it is the gate's, as for the API."""

from __future__ import annotations

import urllib.parse
from datetime import date, timedelta
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import Brain
from cabrain.errors import InputError, NotFound
from cabrain.identity import NewKey
from cabrain.membership import cap_kinds, roles
from cabrain.serve.console import charts, filters
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
    caps = await svc.run(lambda b: b.caps(agent_id, agent=session.agent))
    usage = await svc.run(lambda b: b.usage(session.agent, agent_id=agent_id))
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
        roles=roles(),
        caps=caps,
        cap_kinds=["*", *sorted(cap_kinds())],
        **usage_charts(usage),
    )


def usage_charts(usage: dict[str, Any]) -> dict[str, Any]:
    """An agent's usage report as a line of its calls per day (every day of the range, none left
    out) and bars of its calls per kind."""
    first, last = date.fromisoformat(usage["since"]), date.fromisoformat(usage["until"])
    per_day = {(first + timedelta(days=i)).isoformat(): 0.0 for i in range((last - first).days + 1)}
    per_kind: dict[str, float] = {}
    for row in usage["rows"]:
        per_day[row["day"]] = per_day.get(row["day"], 0.0) + row["calls"]
        per_kind[row["op"]] = per_kind.get(row["op"], 0.0) + row["calls"]
    return {
        "calls": charts.line(list(per_day.items())) if per_kind else None,
        "kinds": charts.bars(dict(sorted(per_kind.items(), key=lambda kv: -kv[1]))),
        "usage_range": (usage["since"], usage["until"]),
    }


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


def _back(agent_id: str, done: str) -> Response:
    """Back to the agent's page, saying what was done."""
    return see_other(f"{sessions.PATH}/agents/{urllib.parse.quote(agent_id)}?done={urllib.parse.quote(done)}")


@routes.post("/agents/{agent_id}/role")
async def set_role(request: Request, agent_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    role = text(form, "role")
    if text(form, "confirm") != "yes":
        raise InputError(
            "tick the confirmation to change this agent's role", hint="the role decides what the agent may do at once"
        )
    done = await svc.run(lambda b: b.set_role(agent_id, role, agent=session.agent))
    return _back(agent_id, f"role {done}")


@routes.post("/agents/{agent_id}/caps")
async def set_cap(request: Request, agent_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    op, raw = text(form, "op"), text(form, "per_day")
    if text(form, "clear") == "yes":
        await svc.run(lambda b: b.set_cap(session.agent, agent_id, op, None))
        return _back(agent_id, f"cap on {op} removed")
    try:
        per_day = int(raw)
    except ValueError:
        raise InputError(
            f"calls per day: {raw!r} is not a whole number", hint="0 or more; 0 refuses every call"
        ) from None
    if not 0 <= per_day <= 2**63 - 1:
        raise InputError(f"calls per day must be between 0 and {2**63 - 1}, got {per_day}")
    await svc.run(lambda b: b.set_cap(session.agent, agent_id, op, per_day))
    return _back(agent_id, f"cap on {op} set")


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
