"""The caller's identity, and agents and their API keys (admins)."""

from __future__ import annotations

from cabrain import identity
from cabrain.brain import Brain
from cabrain.errors import NotFound
from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import AgentDisabledOut, AgentsOut, KeyRevokedOut, KeysOut, NewKeyOut, WhoAmIOut
from cabrain.serve.routing import router

routes = router(tags=["agents"])


def new_key_out(new: identity.NewKey) -> NewKeyOut:
    return {"agent_id": new.agent_id, "key_id": str(new.id), "key": new.key, "prefix": new.prefix}


@routes.get("/v1/whoami", summary="The agent this key acts as")
async def whoami(p: Caller) -> WhoAmIOut:
    return {"agent_id": p.agent_id, "is_admin": p.is_admin, "key_id": str(p.key_id)}


@routes.get("/v1/agents", summary="Every agent (admin)")
async def list_agents(svc: Svc, p: Caller) -> AgentsOut:
    return {"agents": await svc.run(lambda b: b.agents(agent=p.agent_id))}


@routes.post(
    "/v1/agents",
    status_code=201,
    summary="Create an agent and its first key (admin); the key is shown once",
)
async def create_agent(body: schemas.AgentIn, svc: Svc, p: Caller) -> NewKeyOut:
    async def op(b: Brain) -> identity.NewKey:
        await b.create_agent(
            body.id, display_name=body.display_name, is_admin=body.is_admin, exist_ok=False, agent=p.agent_id
        )
        return await b.create_key(body.id, label=body.key_label, agent=p.agent_id)

    return new_key_out(await svc.run(op))


@routes.get("/v1/agents/{agent_id}/keys", summary="An agent's keys, without their secrets (admin)")
async def list_keys(agent_id: str, svc: Svc, p: Caller) -> KeysOut:
    return {"keys": await svc.run(lambda b: b.keys(agent_id, agent=p.agent_id))}


@routes.post("/v1/agents/{agent_id}/keys", status_code=201, summary="Make another key for an agent (admin)")
async def create_key(agent_id: str, svc: Svc, p: Caller, body: schemas.KeyIn | None = None) -> NewKeyOut:
    label = body.label if body else None
    return new_key_out(await svc.run(lambda b: b.create_key(agent_id, label=label, agent=p.agent_id)))


@routes.delete("/v1/agents/{agent_id}/keys/{key_id}", summary="Revoke a key (admin)")
async def revoke_key(agent_id: str, key_id: str, svc: Svc, p: Caller) -> KeyRevokedOut:
    if not await svc.run(lambda b: b.revoke_key(key_id, agent_id=agent_id, agent=p.agent_id)):
        raise NotFound(f"agent {agent_id!r} has no active key {key_id}")
    svc.forget_keys()
    return {"key_id": key_id, "revoked": True}


@routes.post("/v1/agents/{agent_id}/disable", summary="Disable an agent: its keys stop (admin)")
async def disable_agent(agent_id: str, svc: Svc, p: Caller) -> AgentDisabledOut:
    changed = await svc.run(lambda b: b.disable_agent(agent_id, agent=p.agent_id))
    svc.forget_keys()
    return {"agent_id": agent_id, "disabled": True, "changed": changed}
