"""Namespaces and grants: creating namespaces, offering, accepting, declining and revoking access."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Query
from fastapi.responses import JSONResponse

from cabrain.serve import schemas
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.responses import (
    AcceptedOut,
    DeclinedOut,
    GrantOut,
    GrantsOut,
    NamespaceCreatedOut,
    NamespaceOut,
    NamespacesOut,
    RevokedOut,
    SharedOut,
)
from cabrain.serve.routing import answer, router

routes = router(tags=["namespaces"])


@routes.get("/v1/namespaces", summary="Namespaces the caller owns or holds a grant on")
async def list_namespaces(svc: Svc, p: Caller) -> NamespacesOut:
    rows = await svc.run(lambda b: b.namespaces(p.agent_id))
    return {"namespaces": cast(list[NamespaceOut], rows)}  # the Brain's rows


@routes.post(
    "/v1/namespaces",
    status_code=201,
    response_model=NamespaceCreatedOut,
    responses={200: {"model": NamespaceCreatedOut, "description": "The caller owned it already"}},
    summary="Create a namespace the caller owns",
)
async def create_namespace(body: schemas.NamespaceIn, svc: Svc, p: Caller) -> JSONResponse:
    created = await svc.run(lambda b: b.create_namespace(p.agent_id, body.name))
    out: NamespaceCreatedOut = {"name": body.name, "created": created}
    return answer(out, 201 if created else 200)


@routes.get("/v1/grants", summary="Grants on a namespace (its owner or an admin)")
async def list_grants(namespace: Annotated[str, Query()], svc: Svc, p: Caller) -> GrantsOut:
    rows = await svc.run(lambda b: b.grants(p.agent_id, namespace))
    return {"grants": cast(list[GrantOut], rows)}  # the Brain's rows


@routes.post(
    "/v1/grants",
    summary="Offer an agent access to a namespace's team memories (it reads at once, writes once it accepts)",
)
async def share(body: schemas.GrantIn, svc: Svc, p: Caller) -> SharedOut:
    accepted = await svc.run(
        lambda b: b.share(p.agent_id, body.namespace, body.agent, can_read=body.can_read, can_write=body.can_write)
    )
    return {
        "namespace": body.namespace,
        "agent": body.agent,
        "can_read": body.can_read,
        "can_write": body.can_write,
        "accepted": accepted,
    }


@routes.post(
    "/v1/grants/accept",
    summary="Accept the grant the caller was offered on a namespace (writes, and capture, need it)",
)
async def accept_grant(body: schemas.GrantAnswerIn, svc: Svc, p: Caller) -> AcceptedOut:
    return cast(AcceptedOut, await svc.run(lambda b: b.accept_grant(p.agent_id, body.namespace)))


@routes.post("/v1/grants/decline", summary="Decline (or give up) the caller's grant on a namespace")
async def decline_grant(body: schemas.GrantAnswerIn, svc: Svc, p: Caller) -> DeclinedOut:
    declined = await svc.run(lambda b: b.decline_grant(p.agent_id, body.namespace))
    return {"namespace": body.namespace, "agent": p.agent_id, "declined": declined}


@routes.delete("/v1/grants", summary="Revoke an agent's grant on a namespace")
async def revoke(namespace: Annotated[str, Query()], agent: Annotated[str, Query()], svc: Svc, p: Caller) -> RevokedOut:
    removed = await svc.run(lambda b: b.revoke(p.agent_id, namespace, agent))
    return {"namespace": namespace, "agent": agent, "revoked": removed}
