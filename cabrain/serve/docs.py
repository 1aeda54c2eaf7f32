"""The API's interactive docs (``/docs``), off unless ``CABRAIN_API_DOCS`` is set (finding 17).

Swagger UI is a page of scripts from a CDN on the console's origin: a changed or hijacked asset
would run with the console's cookies in reach. So it is off by default (``/openapi.json`` still
describes every route), and when an operator turns it on, the page is sent under a Content Security
Policy that runs only the pinned Swagger UI files and the page's one inline script (by its digest),
connects only to this origin, and cannot be framed. Every other answer of the API carries
:data:`API_CSP` (:mod:`cabrain.serve.edge_guard`); the console's pages their own
(:mod:`cabrain.serve.console.render`).
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

SWAGGER_UI = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5.17.14"
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
_INLINE = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_page(title: str, openapi_url: str = "/openapi.json") -> HTMLResponse:
    """Swagger UI for ``openapi_url``, with a CSP that allows exactly what the page needs."""
    page = get_swagger_ui_html(
        openapi_url=openapi_url,
        title=title,
        swagger_js_url=f"{SWAGGER_UI}/swagger-ui-bundle.js",
        swagger_css_url=f"{SWAGGER_UI}/swagger-ui.css",
        swagger_favicon_url="data:,",
    )
    body = bytes(page.body).decode()
    digests = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in _INLINE.findall(body)
    )
    csp = (
        f"default-src 'none'; script-src {SWAGGER_UI}/ {digests}; style-src {SWAGGER_UI}/; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
    headers = {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
    return HTMLResponse(body, headers=headers)


def add_docs(app: FastAPI, enabled: bool) -> None:
    """``/docs`` on ``app`` when ``enabled`` (``CABRAIN_API_DOCS``); nothing otherwise."""
    if not enabled:
        return

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return docs_page(f"{app.title} - API docs")
