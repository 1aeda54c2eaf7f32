"""Roles, held actions, usage and caps: ``PUT /v1/agents/NAME/role`` and the caps are an admin's;
``/v1/actions`` lists and decides what roles held for a person; ``/v1/usage`` reports what agents
used, by day, agent, namespace and kind (an agent: its own)."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

from pydantic import Field

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router
from cabrain.serve.schemas import Body

routes = router(tags=["governance"])


class RoleIn(Body):
    role: str = Field(description="member | live | reader", examples=["live"])


class CapIn(Body):
    per_day: int = Field(ge=0, description="Calls per day (UTC) before the agent gets 429.", examples=[1000])


@routes.put("/v1/agents/{agent}/role", summary="Give an agent a role (admin)")
async def set_role(agent: str, body: RoleIn, svc: Svc, p: Caller) -> dict[str, Any]:
    role = await svc.run(lambda b: b.set_role(agent, body.role, agent=p.agent_id))
    svc.forget_keys()
    return {"agent": agent, "role": role}


@routes.get("/v1/actions", summary="Held actions you may see (yours, and those on namespaces you own)")
async def actions(svc: Svc, p: Caller, status: str | None = "pending") -> dict[str, Any]:
    wanted = None if status == "all" else status
    return {"actions": await svc.run(lambda b: b.pending_actions(p.agent_id, status=wanted))}


@routes.post("/v1/actions/{action_id}/approve", summary="Approve a held action: it runs, as the agent that asked")
async def approve(action_id: uuid.UUID, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: b.decide_action(p.agent_id, action_id, approve=True))


@routes.post("/v1/actions/{action_id}/deny", summary="Deny a held action")
async def deny(action_id: uuid.UUID, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: b.decide_action(p.agent_id, action_id, approve=False))


@routes.get("/v1/usage", summary="Usage by day, agent, namespace and kind")
async def usage(
    svc: Svc,
    p: Caller,
    since: date | None = None,
    until: date | None = None,
    agent: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    return await svc.run(lambda b: b.usage(p.agent_id, since=since, until=until, agent_id=agent, namespace=namespace))


@routes.put("/v1/agents/{agent}/caps/{op}", summary="Cap an agent's calls of a kind per day (admin)")
async def set_cap(agent: str, op: str, body: CapIn, svc: Svc, p: Caller) -> dict[str, Any]:
    return {"caps": await svc.run(lambda b: b.set_cap(p.agent_id, agent, op, body.per_day))}


@routes.delete("/v1/agents/{agent}/caps/{op}", summary="Remove a cap (admin)")
async def clear_cap(agent: str, op: str, svc: Svc, p: Caller) -> dict[str, Any]:
    return {"caps": await svc.run(lambda b: b.set_cap(p.agent_id, agent, op, None))}
