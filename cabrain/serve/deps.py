"""What a route takes besides its body: the replica it runs in, and the agent its API key names
(``Authorization: Bearer cbk_...``; :data:`Admin` only an admin's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cabrain.errors import AccessDenied
from cabrain.identity import Principal
from cabrain.serve.replica import Replica

bearer = HTTPBearer(auto_error=False, description="An agent's API key (cbk_...).")


def replica(request: Request) -> Replica:
    """The replica serving the request (``create_api`` puts it in the app's state)."""
    return request.app.state.replica


Svc = Annotated[Replica, Depends(replica)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]


async def caller(svc: Svc, creds: Credentials) -> Principal:
    return await svc.authenticate(creds.credentials if creds else None)


async def admin(principal: Annotated[Principal, Depends(caller)]) -> Principal:
    if not principal.is_admin:
        raise AccessDenied(f"agent {principal.agent_id!r} is not an admin", hint="use an admin key")
    return principal


Caller = Annotated[Principal, Depends(caller)]
Admin = Annotated[Principal, Depends(admin)]
