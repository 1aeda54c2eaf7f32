"""The ingress's outermost middleware: refuses bodies over the limit (413) and records per-route metrics."""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cabrain.errors import PayloadTooLarge
from cabrain.serve.errors import error_response
from cabrain.serve.metrics import IngressMetrics


class BodyTooLarge(Exception):
    pass


class Guard:
    """ASGI middleware: refuses bodies over the limit (413) and records per-route metrics."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, metrics: IngressMetrics) -> None:
        self.app, self.max_bytes, self.metrics = app, max_bytes, metrics

    async def _buffered(self, receive: Receive) -> Receive:
        """The whole request body read now (:class:`BodyTooLarge` past the limit), handed on as one
        message; then whatever the client sends next (its disconnect)."""
        body, disconnected = bytearray(), False
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected = True
                break
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
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

        return replay

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

        try:
            headers = dict(scope.get("headers") or [])
            length = headers.get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_bytes:
                raise BodyTooLarge
            if length is None and b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                # A body of unknown length is read (up to the limit) before the app sees it: a too large
                # one is a 413, not a parse error halfway through.
                receive = await self._buffered(receive)
            seen = 0

            async def limited_receive() -> Message:
                nonlocal seen
                message = await receive()
                if message["type"] == "http.request":
                    seen += len(message.get("body", b""))
                    if seen > self.max_bytes:
                        raise BodyTooLarge
                return message

            await self.app(scope, limited_receive, send_wrapper)
        except BodyTooLarge:
            if status["sent"]:
                raise
            too_large = PayloadTooLarge(
                f"the request body is larger than {self.max_bytes} bytes",
                hint="send smaller batches, or raise CABRAIN_API_MAX_BODY_BYTES",
            )
            await error_response(too_large)(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.finished(
                path,
                scope.get("method", ""),
                status["code"],
                (time.perf_counter() - started) * 1000,
            )
