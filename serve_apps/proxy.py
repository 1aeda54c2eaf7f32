"""What Serve's HTTP proxy itself answers, in CaBrain's error shape.

Every answer of the CaBrain app is JSON (``{"error": {"type", "message", "hint"}}`` on failure),
but some answers come from Ray Serve's proxy in front of it, as plain text: a request in flight
when an ingress replica dies gets ``500 Internal Server Error``, a request while no replica is up
``503``, one that times out ``408``. This ASGI middleware, which Serve runs inside every proxy
(``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=serve_apps.proxy:middlewares``, set for every Ray that
CaBrain starts), turns those into JSON: a replica that died under a request is a ``503
service_unavailable`` with ``Retry-After``, as the API documents for a dependency that is down.
Answers the app made itself (JSON) pass through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

RETRY_AFTER_S = 2
KINDS = {408: "timeout", 429: "too_many_requests", 503: "service_unavailable", 500: "service_unavailable"}


def error_body(status: int, message: str, hint: str) -> bytes:
    return json.dumps(
        {"error": {"type": KINDS.get(status, "service_unavailable"), "message": message, "hint": hint}}
    ).encode()


class JsonErrors:
    """Pure ASGI middleware: plain-text errors of the proxy become CaBrain's JSON errors."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = {"start": None, "replaced": False, "sent": False, "text": b""}

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                is_json = headers.get(b"content-type", b"").startswith(b"application/json")
                if not is_json and message["status"] in (408, 429, 500, 502, 503, 504):
                    state["start"] = message  # the proxy's own plain-text error: replaced when its body ends
                    return
                state["sent"] = True
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
        if status == 408:
            body = error_body(408, "the request took longer than the service allows", "retry, or send less at once")
        elif status == 429:
            body = error_body(
                429, f"the service is busy ({said or 'too many requests'})", "retry after the time in Retry-After"
            )
        elif status == 503 and said:  # no replica can take it now (starting, overloaded): Serve says why
            body = error_body(
                503,
                f"the service cannot take this request now: {said}",
                "retry shortly; GET /v1/ready says when it is ready",
            )
        else:
            status = 503
            body = error_body(
                503,
                "the service could not answer this request: the replica that held it "
                "stopped (a restart or a crash), so its outcome is unknown",
                "retry it (a retain sent twice is recognised as a duplicate); a replacement is "
                "starting, GET /v1/ready says when it is ready",
            )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(RETRY_AFTER_S).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


def middlewares() -> list:
    """The import path Serve's proxy calls (``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``)."""
    from starlette.middleware import Middleware

    return [Middleware(JsonErrors)]
