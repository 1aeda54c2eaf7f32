"""The console's pages as HTML: Jinja2 templates shipped in the package, every value escaped.

Content is only ever text: templates autoescape everything (no value is marked safe), links are
built here from ids and never from memory text, and every page is sent with a Content Security
Policy that runs only the console's own script files (no inline script, no ``javascript:`` URL, no
other origin), so a memory holding ``<script>`` or a ``javascript:`` link is shown, never run.

A page shown again after an error (:mod:`cabrain.serve.console.routing`) carries the errors above
its content, and its form keeps what was typed in the fields it was shown without.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, NamedTuple

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from cabrain import __version__
from cabrain.serve.proxy import APP_ANSWER

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    APP_ANSWER: "console",  # Serve's proxy passes a page's own error status through as it is
}


ERRORS = "console_errors"  # request.state: the errors to show above the page
TYPED = "console_typed"  # request.state: the fields a page was shown without, as typed


class Shown(NamedTuple):
    """An error shown above a page: what went wrong and what to do about it."""

    message: str
    hint: str | None


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True, default=str)


ENV = Environment(
    loader=PackageLoader("cabrain.serve.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters.update(when=_when, number=_number, as_json=_as_json)
ENV.globals.update(version=__version__)


def page(request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """``template`` rendered with ``context`` (and the session, when signed in) as an HTML answer."""
    context.setdefault("session", getattr(request.state, "console_session", None))
    context.setdefault("title", "")
    state = request.scope.get("state") or {}
    context.setdefault("errors", list(state.get(ERRORS, ())))
    typed = dict(state.get(TYPED) or {})
    context.setdefault("typed", typed)
    if typed and isinstance(context.get("values"), dict):
        context["values"] = context["values"] | typed
    html = ENV.get_template(template).render(request_path=request.url.path, **context)
    return HTMLResponse(html, status_code=status, headers=HEADERS)
