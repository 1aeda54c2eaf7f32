"""The FastAPI app of one ingress replica: CaBrain's versioned API (``/v1``), MCP at ``/mcp`` and the
console at ``/console`` (:mod:`cabrain.serve.console`).

Every request carries an API key (``Authorization: Bearer cbk_...``) that names the agent it acts
as; scoping is then enforced in SQL exactly as in process. Each area's routes are a router of
:mod:`cabrain.serve.routes`; errors answer as :mod:`cabrain.serve.errors` says, bodies as
:mod:`cabrain.serve.routing` says.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI

from cabrain import __version__
from cabrain.serve import console
from cabrain.serve.docs import add_docs
from cabrain.serve.edge_guard import EdgeGuard
from cabrain.serve.errors import ERROR_RESPONSES, add_handlers
from cabrain.serve.guard import Guard, limit_by_path
from cabrain.serve.mcp_endpoint import mcp_route
from cabrain.serve.replica import Replica
from cabrain.serve.routes import (
    agents,
    backups,
    capture,
    channels,
    connectors,
    corrections,
    entities,
    governance,
    health,
    judgments,
    memories,
    memory_tool,
    namespaces,
    overview,
    portable,
    pushes,
    recall,
    sleep,
    workflows,
)
from cabrain.serve.standbys import ReadYourWrites
from cabrain.serve.timing import ServerTiming

ROUTERS = (
    health,
    overview,
    agents,
    memories,
    memory_tool,
    judgments,
    corrections,
    recall,
    capture,
    entities,
    namespaces,
    workflows,
    sleep,
    connectors,
    portable,
    backups,
    governance,
    channels,
    pushes,
)


def create_api(svc: Replica) -> FastAPI:
    """The app of one ingress replica (routes reach ``svc`` through :mod:`cabrain.serve.deps`)."""
    mcp_server, mcp = mcp_route(svc)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp_server.session_manager.run():
            yield

    app = FastAPI(
        lifespan=lifespan,
        title="CaBrain",
        version=__version__,
        description=(
            "Shared, self-hosted memory for AI agents. Every `/v1` route except health and readiness "
            "needs `Authorization: Bearer <API key>`; the key decides which agent the call acts as."
        ),
        responses=ERROR_RESPONSES,
        docs_url=None,  # off unless CABRAIN_API_DOCS (cabrain.serve.docs)
        redoc_url=None,
    )
    app.state.replica = svc
    settings = svc.settings
    app.add_middleware(ReadYourWrites, svc=svc)  # innermost: CaBrain-LSN (cabrain.serve.standbys)
    app.add_middleware(EdgeGuard)  # inside Guard: the body is bounded before it is read here
    app.add_middleware(
        Guard,
        max_bytes=settings.api_max_body_bytes,
        metrics=svc.metrics,
        limit_of=limit_by_path(settings.api_max_body_bytes, settings.channel_max_body_bytes),
    )
    if settings.api_server_timing:  # outermost: its app stage is the whole of the ingress
        app.add_middleware(ServerTiming)
    app.router.routes.append(mcp)
    add_handlers(app)
    for area in ROUTERS:
        app.include_router(area.routes)
    console.mount(app)
    add_docs(app, svc.settings.api_docs)
    return app
