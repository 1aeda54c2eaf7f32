"""The ingress's outermost middleware: refuses bodies over the limit (413) and records per-route metrics.

The limit is ``CABRAIN_API_MAX_BODY_BYTES``, and ``CABRAIN_CHANNEL_MAX_BODY_BYTES`` on the routes
chat platforms post to (``/v1/channels/NAME/events``), for every name alike. A declared length over
it is refused before any of the body is read; a body of unknown length is read up to it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cabrain.errors import PayloadTooLarge
from cabrain.serve.errors import error_response
from cabrain.serve.metrics import IngressMetrics

CHANNEL_EVENTS = re.compile(r"/v1/channels/[^/]+/events")


class BodyTooLarge(Exception):
    pass


def too_large(limit: int, setting: str = "CABRAIN_API_MAX_BODY_BYTES") -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the request body is larger than {limit} bytes", hint=f"send smaller batches, or raise {setting}"
    )


async def bounded_body(request: Request, limit: int) -> bytes:
    """The request's body, read no further than ``limit`` bytes (:class:`PayloadTooLarge` beyond)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise too_large(limit, "CABRAIN_CHANNEL_MAX_BODY_BYTES")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large(limit, "CABRAIN_CHANNEL_MAX_BODY_BYTES")
    return bytes(body)


async def read_body(receive: Receive, max_bytes: int | None = None) -> tuple[bytes, Receive]:
    """The whole request body read now (:class:`BodyTooLarge` past ``max_bytes``), and a ``receive``
    that hands it on as one message, then whatever the client sends next (its disconnect)."""
    body, disconnected = bytearray(), False
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            disconnected = True
            break
        body += message.get("body", b"")
        if max_bytes is not None and len(body) > max_bytes:
            raise BodyTooLarge
        if not message.get("more_body", False):
            break
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}
        if disconnected:
            return {"type": "http.disconnect"}
        return await receive()

    return bytes(body), replay


def limit_by_path(api_max: int, channel_max: int) -> Callable[[str], tuple[int, str]]:
    """The body limit of a path, and the setting that raises it."""

    def limit(path: str) -> tuple[int, str]:
        if CHANNEL_EVENTS.fullmatch(path):
            return min(api_max, channel_max), "CABRAIN_CHANNEL_MAX_BODY_BYTES"
        return api_max, "CABRAIN_API_MAX_BODY_BYTES"

    return limit


class Guard:
    """ASGI middleware: refuses bodies over the limit (413) and records per-route metrics."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        metrics: IngressMetrics,
        limit_of: Callable[[str], tuple[int, str]] | None = None,
    ) -> None:
        self.app, self.max_bytes, self.metrics = app, max_bytes, metrics
        self.limit_of = limit_of or (lambda _path: (max_bytes, "CABRAIN_API_MAX_BODY_BYTES"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: dict[str, Any] = {"code": 500, "sent": False}
        self.metrics.started()

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["sent"] = message["status"], True
            await send(message)

        max_bytes, setting = self.limit_of(scope.get("path", ""))
        try:
            headers = dict(scope.get("headers") or [])
            length = headers.get(b"content-length")
            if length is not None and length.isdigit() and int(length) > max_bytes:
                raise BodyTooLarge
            if length is None and b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                # A body of unknown length is read (up to the limit) before the app sees it: a too large
                # one is a 413, not a parse error halfway through.
                _, receive = await read_body(receive, max_bytes)
            seen = 0

            async def limited_receive() -> Message:
                nonlocal seen
                message = await receive()
                if message["type"] == "http.request":
                    seen += len(message.get("body", b""))
                    if seen > max_bytes:
                        raise BodyTooLarge
                return message

            await self.app(scope, limited_receive, send_wrapper)
        except BodyTooLarge:
            if status["sent"]:
                raise
            await error_response(too_large(max_bytes, setting))(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.finished(
                path,
                scope.get("method", ""),
                status["code"],
                (time.perf_counter() - started) * 1000,
            )
