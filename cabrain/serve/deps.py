"""What a route takes besides its body: the replica it runs in, and the agent its API key names
(``Authorization: Bearer cbk_...``). Whether that agent may do what the route asks is the gate's
(:mod:`cabrain.gate`), in the facade method the route calls: no route checks it itself."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cabrain.identity import Principal
from cabrain.serve import timing
from cabrain.serve.replica import Replica

bearer = HTTPBearer(auto_error=False, description="An agent's API key (cbk_...).")


def replica(request: Request) -> Replica:
    """The replica serving the request (``create_api`` puts it in the app's state)."""
    return request.app.state.replica


Svc = Annotated[Replica, Depends(replica)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]


async def caller(svc: Svc, creds: Credentials) -> Principal:
    return await timing.timed("auth", svc.authenticate(creds.credentials if creds else None))


Caller = Annotated[Principal, Depends(caller)]
