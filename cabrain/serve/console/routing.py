"""How the console's routes answer: as pages, errors included, for the signed-in agent only.

A route's failure keeps the person where they were, with the API's status (a bad value 400, a
change the key may not make 403):

- a page given a bad filter value (``min_importance=abc``) is shown again without that value, its
  form filled in with what was typed and the error above it;
- a refused change (a forget without its confirmation, a wrong key at sign-in) shows the page the
  form came from again, with the error above it;
- anything else is an error page; a missing or refused key on a page leads to the sign-in page and
  back.

Errors are worded for a person in the console (:func:`console_hint`), never as another face's
route or command. The session id is read from its cookie on every request and looked up in
PostgreSQL (:mod:`cabrain.serve.console.session`).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Coroutine, MutableMapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.datastructures import FormData
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect

from cabrain.errors import CabrainError, InputError, Unauthenticated
from cabrain.fixes import render
from cabrain.serve.console import session as sessions
from cabrain.serve.console.render import ERRORS, TYPED, Shown, page
from cabrain.serve.console.session import Session
from cabrain.serve.deps import Svc
from cabrain.serve.errors import bad_value, error_response

log = logging.getLogger(__name__)

DEPTH = "console_depth"  # how many times this request tried to show a page again (request.state)
SHOWN = "console_shown"  # how many pages it did show again
MOST_AGAIN = 8  # a page with more bad values than this is an error page
LOGIN = f"{sessions.PATH}/login"


def console_hint(exc: CabrainError) -> str | None:
    """What a person in the console can do about ``exc``: its fix in the console's words (none when
    the console has none: never another face's route or command), else its plain hint."""
    if exc.fix is not None:
        return render(exc.fix, "console")
    return exc.hint


def shown(request: Request, exc: CabrainError) -> Shown:
    if isinstance(exc, Unauthenticated) and request.method == "POST" and request.url.path == LOGIN:
        return Shown(f"This key was refused: {exc.message}", console_hint(exc))
    return Shown(exc.message, console_hint(exc))


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
        hint=console_hint(exc),
        errors=[],
    )


def bad_fields(request: Request, exc: CabrainError) -> list[str]:
    """The query fields a page's :class:`InputError` is about: the one it names (``field``, or its
    message's first word), else every field given."""
    given = list(dict.fromkeys(name for name, _ in request.query_params.multi_items()))
    named = getattr(exc, "field", None)
    if named in given:
        return [named]
    for name in given:
        if exc.message.startswith((f"{name}:", f"{name} ")):
            return [name]
    return given


async def came_from(request: Request) -> tuple[str, str] | None:
    """The console page (path, query) a form was sent from: its ``Referer``, when it is this
    console's own page (without the notice of an earlier change); for a sign-in, the sign-in page
    leading where the form led."""
    if request.url.path == LOGIN:
        try:
            form: Any = await request.form()  # read by the sign-in already: Starlette keeps it
        except (RuntimeError, ValueError, ClientDisconnect, MultiPartException):  # no form to read: no next
            form = {}
        return LOGIN, urllib.parse.urlencode({"next": text(form, "next")})
    referer = urllib.parse.urlsplit(request.headers.get("referer", ""))
    path = referer.path
    if (
        referer.netloc == request.url.netloc
        and referer.scheme == request.url.scheme
        and sessions.safe_next(path) == path
        and not path.startswith(f"{sessions.PATH}/static")
        and not path.endswith(".json")
    ):
        kept = [(k, v) for k, v in urllib.parse.parse_qsl(referer.query, keep_blank_values=True) if k != "done"]
        return path, urllib.parse.urlencode(kept)
    return None


async def show_again(request: Request, exc: CabrainError) -> Response | None:
    """The page to show instead of an error page for ``exc``, with the error above it (None: an
    error page it is). A GET page is shown without the bad fields; a refused change shows the page
    the form came from."""
    if exc.status >= 500 or request.url.path.endswith(".json"):
        return None
    if isinstance(exc, Unauthenticated) and not (request.method == "POST" and request.url.path == LOGIN):
        return None
    state: MutableMapping[str, Any] = request.scope.setdefault("state", {})
    if state.get(DEPTH, 0) >= MOST_AGAIN:
        return None
    if request.method == "GET" and isinstance(exc, InputError) and request.query_params:
        bad = bad_fields(request, exc)
        typed = state.setdefault(TYPED, {})
        for name in bad:
            typed.setdefault(name, request.query_params.get(name, ""))
        kept = [(k, v) for k, v in request.query_params.multi_items() if k not in bad]
        target: tuple[str, str] | None = (request.url.path, urllib.parse.urlencode(kept))
    elif request.method == "POST":
        target = await came_from(request)
    else:
        target = None
    if target is None:
        return None
    state[DEPTH] = state.get(DEPTH, 0) + 1
    state.setdefault(ERRORS, []).append(shown(request, exc))
    answer = await get_page(request, *target)
    if answer is None:
        state[ERRORS].pop()
        return None
    answer.status_code = exc.status
    state[SHOWN] = state.get(SHOWN, 0) + 1
    return answer


async def get_page(request: Request, path: str, query: str) -> Response | None:
    """The console page at ``path?query`` as this request's GET would answer it (None unless it is
    a page: a redirect or an error page is not shown instead)."""
    scope = {k: v for k, v in request.scope.items() if k not in ("route", "endpoint", "path_params")}
    scope.update(
        method="GET",
        path=path,
        raw_path=path.encode(),
        query_string=query.encode(),
        headers=[(k, v) for k, v in request.scope["headers"] if k not in (b"content-type", b"content-length")],
    )
    sent: list[dict[str, Any]] = []
    state = request.scope.get("state") or {}
    before = state.get(SHOWN, 0)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    await request.scope["router"](scope, receive, send)
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    if start is None or not (start["status"] == 200 or state.get(SHOWN, 0) > before):  # shown again itself
        return None
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    answer = Response(body)
    answer.raw_headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
    answer.raw_headers.append((b"content-length", str(len(body)).encode()))
    return answer


class ConsoleRoute(APIRoute):
    """A console route: CaBrain's errors answer as pages, anything else as a 500 page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except CabrainError as exc:
                return await show_again(request, exc) or error_page(request, exc)
            except Exception as exc:
                refused = bad_value(exc)
                if refused is not None:
                    return await show_again(request, refused) or error_page(request, refused)
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
