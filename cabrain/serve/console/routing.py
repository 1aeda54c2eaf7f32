"""How the console's routes answer: as pages, errors included, for the signed-in agent only.

Each route's failures become an error page with the API's status (a namespace or memory the key
may not read is the API's 404, a change it may not make the API's 403), except a missing or
refused key on a page, which leads to the sign-in page and back. The session id is read from its
cookie on every request and looked up in PostgreSQL (:mod:`cabrain.serve.console.session`).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.datastructures import FormData

from cabrain.errors import CabrainError, Unauthenticated
from cabrain.serve.console import session as sessions
from cabrain.serve.console.render import page
from cabrain.serve.console.session import Session
from cabrain.serve.deps import Svc
from cabrain.serve.errors import bad_value, error_response

log = logging.getLogger(__name__)


def error_page(request: Request, exc: CabrainError) -> Response:
    if exc.status >= 500:
        log.warning("console request failed", extra={"path": request.url.path, "error": str(exc)})
    if request.url.path.endswith(".json"):  # what the pages' scripts fetch: the API's error shape
        return error_response(exc)
    if isinstance(exc, Unauthenticated) and request.method == "GET":
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"{sessions.PATH}/login?next={urllib.parse.quote(target, safe='')}", status_code=303)
    return page(
        request,
        "error.html",
        status=exc.status,
        title="Error",
        kind=exc.kind,
        message=exc.message,
        hint=exc.hint_for("http"),
    )


class ConsoleRoute(APIRoute):
    """A console route: CaBrain's errors answer as pages, anything else as a 500 page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except CabrainError as exc:
                return error_page(request, exc)
            except Exception as exc:
                refused = bad_value(exc)
                if refused is not None:
                    return error_page(request, refused)
                log.exception("console: unhandled error", extra={"path": request.url.path})
                return error_page(request, CabrainError(f"unexpected error: {type(exc).__name__}"))

        return handle


def router() -> APIRouter:
    return APIRouter(prefix=sessions.PATH, route_class=ConsoleRoute, include_in_schema=False)


async def current(request: Request, svc: Svc) -> Session:
    """The signed-in session (:class:`Unauthenticated` without a cookie, or with a refused key)."""
    session_id = sessions.session_id(request)
    if not session_id:
        raise sessions.signed_out()
    principal = await svc.run(lambda b: b.console_session(session_id))
    found = Session(principal, sessions.csrf_token(session_id))
    request.state.console_session = found
    return found


Current = Annotated[Session, Depends(current)]


async def change_form(request: Request, session: Session) -> FormData:
    """The form of a change, after its origin and CSRF token are checked."""
    sessions.check_origin(request)
    form = await request.form()
    token = form.get(sessions.CSRF_FIELD)
    sessions.check_csrf(token if isinstance(token, str) else None, session.csrf)
    return form


def text(form: FormData | Any, name: str, default: str = "") -> str:
    """A form or query field as text (stripped; ``default`` when absent)."""
    value = form.get(name)
    return value.strip() if isinstance(value, str) else default


def see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)
