"""What Serve's HTTP proxy itself answers, in CaBrain's error shape.

Every answer of the CaBrain app is JSON (``{"error": {"type", "message", "hint"}}`` on failure),
but some answers come from Ray Serve's proxy in front of it, as plain text: a request in flight
when an ingress replica dies gets ``500 Internal Server Error``, a request while no replica is up
``503``, one that times out ``408``. This ASGI middleware, which Serve runs inside every proxy
(``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=cabrain.serve.proxy:middlewares``, set for every Ray
that CaBrain starts), turns those into JSON: a replica that died under a request is a ``503
service_unavailable`` with ``Retry-After``, as the API documents for a dependency that is down.
Answers the app made itself (JSON, or a console page, which says so in ``X-CaBrain-Answer``) pass
through untouched, but for one header: an answer that carries ``Server-Timing`` (the app's stages,
``CABRAIN_API_SERVER_TIMING``, :mod:`cabrain.serve.timing`) gets the proxy's own, ``proxy;dur=``, the
milliseconds from this middleware to the answer's start.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cabrain.errors import ServiceBusy, ServiceError, ServiceTimeout
from cabrain.serve.errors import error_json

RETRY_AFTER_S = 2
APP_ANSWER = "X-CaBrain-Answer"  # set by the app on answers that are not JSON (the console's pages)
SERVER_TIMING = b"server-timing"


class JsonErrors:
    """Pure ASGI middleware: plain-text errors of the proxy become CaBrain's JSON errors."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = {"start": None, "replaced": False, "sent": False, "text": b""}
        started = time.perf_counter()

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                is_json = headers.get(b"content-type", b"").startswith(b"application/json")
                own = is_json or APP_ANSWER.lower().encode() in headers
                if not own and message["status"] in (408, 429, 500, 502, 503, 504):
                    state["start"] = message  # the proxy's own plain-text error: replaced when its body ends
                    return
                state["sent"] = True
                if SERVER_TIMING in headers:  # the app times its stages: add the proxy's
                    proxy_ms = (time.perf_counter() - started) * 1000
                    timed = (SERVER_TIMING, f"proxy;dur={proxy_ms:.2f}".encode())
                    message = {**message, "headers": [*message.get("headers", []), timed]}
                await send(message)
                return
            if state["start"] is not None:  # the body of a replaced error
                state["text"] = (state["text"] + message.get("body", b""))[:2000]
                if not message.get("more_body", False) and not state["replaced"]:
                    state["replaced"] = True
                    await self._send_error(send, state["start"]["status"], state["text"].decode("utf-8", "replace"))
                return
            await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except Exception:
            if state["sent"]:
                raise
            if not state["replaced"]:
                state["replaced"] = True
                await self._send_error(send, 503)
            return
        if not state["sent"] and not state["replaced"]:
            state["replaced"] = True
            await self._send_error(send, state["start"]["status"] if state["start"] else 503)

    @staticmethod
    async def _send_error(send: Send, status: int, said: str = "") -> None:
        said = " ".join(said.split())
        error: ServiceError
        if status == ServiceTimeout.status:
            error = ServiceTimeout(
                "the request took longer than the service allows", hint="retry, or send less at once"
            )
        elif status == ServiceBusy.status:
            error = ServiceBusy(
                f"the service is busy ({said or 'too many requests'})", hint="retry after the time in Retry-After"
            )
        elif status == 503 and said:  # no replica can take it now (starting, overloaded): Serve says why
            error = ServiceError(
                f"the service cannot take this request now: {said}",
                hint="retry shortly; GET /v1/ready says when it is ready",
            )
        else:
            error = ServiceError(
                "the service could not answer this request: the replica that held it "
                "stopped (a restart or a crash), so its outcome is unknown",
                hint="retry it (a retain sent twice is recognised as a duplicate); a replacement is "
                "starting, GET /v1/ready says when it is ready",
            )
        body = json.dumps(error_json(error)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(RETRY_AFTER_S).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


def middlewares() -> list[Middleware]:
    """The import path Serve's proxy calls (``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``)."""
    return [Middleware(JsonErrors)]
