"""The MCP endpoint of the ingress: streamable HTTP MCP at ``/mcp`` (stateless, JSON responses),
each call acting as the agent its bearer key names."""

from __future__ import annotations

from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from cabrain.errors import CabrainError, MethodNotAllowed
from cabrain.faces.backend import BrainBackend
from cabrain.faces.mcp import build_server
from cabrain.serve.errors import error_response
from cabrain.serve.replica import Replica

MCP_PRINCIPAL = "cabrain_principal"


class McpAuth:
    """ASGI guard in front of the MCP endpoint: the bearer key names the agent the tools act as."""

    def __init__(self, app: ASGIApp, svc: Replica) -> None:
        self.app, self.svc = app, svc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        try:
            principal = await self.svc.authenticate(token.strip() if scheme.lower() == "bearer" else None)
        except CabrainError as exc:
            await error_response(exc)(scope, receive, send)
            return
        if scope.get("method") == "GET":
            # A stateless server sends nothing on its own: no stream to hold open (and hold a request
            # slot of the ingress) for ever. The MCP spec's answer for that is 405.
            refused = MethodNotAllowed(
                "this MCP endpoint is stateless: it opens no server-sent event stream", hint="send requests with POST"
            )
            await error_response(refused, Allow="POST, DELETE")(scope, receive, send)
            return
        scope.setdefault("state", {})[MCP_PRINCIPAL] = principal
        await self.app(scope, receive, send)


def mcp_route(svc: Replica) -> tuple[Any, Route]:
    """The MCP server and its route, ``/mcp``; the server's session manager must run for the app's
    lifetime."""

    async def backend_for(ctx: Any) -> BrainBackend:
        principal = ctx.request_context.request.scope["state"][MCP_PRINCIPAL]
        return BrainBackend(await svc.get_brain(), principal.agent_id)

    server = build_server(backend_for)
    # Every call is authenticated by its key, and the API may sit behind any host name: the SDK's
    # DNS-rebinding check (meant for unauthenticated local servers) would only refuse real clients.
    inner = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return server, Route("/mcp", endpoint=McpAuth(inner, svc), methods=["GET", "POST", "DELETE"])
