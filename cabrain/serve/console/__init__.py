"""The console: web pages served by the ingress under ``/console``, on the API's port.

A person signs in with an API key and sees exactly what that agent may read: every page calls the
same :class:`~cabrain.brain.Brain` methods the API calls, as that agent, so the access rules are the
API's, enforced on the server. Pages are rendered on the server from templates shipped in the
package (:mod:`cabrain.serve.console.render`), with one stylesheet and one small script served from the
package too: nothing is fetched from another origin, and nothing needs building.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from cabrain.serve.console import (
    actions,
    admin,
    audit,
    capture,
    connectors,
    entities,
    health,
    overview,
    pages,
    playground,
    sleep,
    transfer,
    workflows,
)
from cabrain.serve.console.session import PATH


def mount(app: FastAPI) -> None:
    """Add the console's pages and its static files to ``app``."""
    app.mount(f"{PATH}/static", StaticFiles(packages=[("cabrain.serve.console", "static")]), name="console-static")
    app.include_router(pages.routes)
    app.include_router(playground.routes)
    app.include_router(entities.routes)
    app.include_router(sleep.routes)
    app.include_router(admin.routes)
    app.include_router(capture.routes)
    app.include_router(health.routes)
    app.include_router(workflows.routes)
    app.include_router(connectors.routes)
    app.include_router(actions.routes)
    app.include_router(overview.routes)
    app.include_router(audit.routes)
    app.include_router(transfer.routes)


__all__ = ["mount"]
