"""The HTTP API's edge guard: every request's path, query, headers and body pass :mod:`cabrain.edge`
before a route sees them, so a bad value is a 400 before anything is authenticated, counted or
stored, whatever route it was sent to (a new route included).

A JSON or form body is read whole (the outer :class:`cabrain.serve.guard.Guard` has bounded it),
checked, and handed on as it came. Three bodies are left to their route, which checks them with the
same rules at the point it can: a channel's delivery (checked after its signature, before parsing
nothing unsigned), an import's file (record by record, before any is written) and MCP's JSON-RPC
(each tool's arguments, answered as a tool error).
"""

from __future__ import annotations

import re
import urllib.parse

from starlette.datastructures import QueryParams
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cabrain import edge
from cabrain.errors import InputError
from cabrain.serve.docs import API_CSP
from cabrain.serve.errors import error_response
from cabrain.serve.guard import read_body

_SURROGATE = re.compile(r"%ED%[AB][0-9A-F]", re.IGNORECASE)
CHECKED_HEADERS = (b"last-event-id", b"idempotency-key", b"x-cabrain-namespace")


def _own_body(path: str) -> bool:
    """Routes that check their body themselves (see the module's doc)."""
    return (
        path == "/mcp"
        or path.startswith("/mcp/")
        or path == "/v1/import"
        or (path.startswith("/v1/channels/") and path.endswith("/events"))
    )


class EdgeGuard:
    """ASGI middleware: :mod:`cabrain.edge`'s checks on every HTTP request (400 on the first failure)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check_head(scope)
            headers = dict(scope.get("headers") or [])
            kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            path = scope.get("path", "")
            if scope.get("method") in ("POST", "PUT", "PATCH", "DELETE") and not _own_body(path):
                if kind == b"application/json" or kind.endswith(b"+json"):
                    body, receive = await read_body(receive)
                    if body.strip():
                        edge.load_json(body)
                elif kind == b"application/x-www-form-urlencoded":
                    body, receive = await read_body(receive)
                    _check_form(body)
        except InputError as exc:
            await error_response(exc)(scope, receive, _with_csp(send))
            return
        await self.app(scope, receive, _with_csp(send))

    @staticmethod
    def _check_head(scope: Scope) -> None:
        edge.check_path(scope.get("path", ""))
        if _SURROGATE.search((scope.get("raw_path") or b"").decode("latin-1")):
            raise InputError("the path holds a lone surrogate (not UTF-8)")
        raw = scope.get("query_string", b"")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("the query string is not UTF-8") from None
        _check_pairs(QueryParams(text).multi_items(), "query parameter", text)
        for name, value in scope.get("headers") or []:
            if name in CHECKED_HEADERS:
                edge.check_param("", value.decode("latin-1"), f"header {name.decode('latin-1')}")


def _with_csp(send: Send) -> Send:
    """``send``, adding the API's Content Security Policy to an answer that has none of its own."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or [])
            names = {name.lower() for name, _ in headers}
            if b"content-security-policy" not in names:
                headers.append((b"content-security-policy", API_CSP.encode()))
                if b"x-content-type-options" not in names:
                    headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
        await send(message)

    return sending


def _check_pairs(pairs: list[tuple[str, str]], where: str, raw: str) -> None:
    if _SURROGATE.search(raw):  # a surrogate's UTF-8 form, which decoding turns into U+FFFD
        raise InputError(f"a {where} holds a lone surrogate (not UTF-8)")
    for name, value in pairs:
        edge.check_param(name, value, where)


def _check_form(body: bytes) -> None:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("the form is not UTF-8") from None
    _check_pairs(urllib.parse.parse_qsl(text, keep_blank_values=True), "form field", text)
