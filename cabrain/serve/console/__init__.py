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

# Every module of pages, in the order their routes are added.
MODULES = (
    pages,
    playground,
    entities,
    sleep,
    admin,
    capture,
    health,
    workflows,
    connectors,
    actions,
    overview,
    audit,
    transfer,
)


def mount(app: FastAPI) -> None:
    """Add the console's pages and its static files to ``app``."""
    app.mount(f"{PATH}/static", StaticFiles(packages=[("cabrain.serve.console", "static")]), name="console-static")
    for module in MODULES:
        app.include_router(module.routes)


__all__ = ["MODULES", "mount"]
