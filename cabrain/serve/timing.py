"""Where an API request's time goes: a ``Server-Timing`` header per answer (``CABRAIN_API_SERVER_TIMING``).

Off by default, and then nothing here runs: :class:`ServerTiming` is not installed, no request has
:class:`Stages`, and :func:`timed` awaits its work directly. On, every answer of the app says, in
milliseconds::

    Server-Timing: app;dur=14.20, before;dur=0.61, auth;dur=0.02, brain;dur=12.90, encode;dur=0.31

``app`` the ingress from its outermost middleware to the answer's start; ``before`` the part of it
before the route's own code (the guards, routing, reading and validating the body; the key check
excluded); ``auth`` the key check; ``brain`` the route's work (:meth:`Replica.run
<cabrain.serve.replica.Replica.run>`); ``encode`` turning its value into JSON. Serve's proxy adds
``proxy;dur=`` (:mod:`cabrain.serve.proxy`): from the proxy's middleware to the answer's start
there, so ``proxy - app`` is the hop between the two processes. ``cabrain bench http`` reads them.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

T = TypeVar("T")
HEADER = b"server-timing"


class Stages:
    """One request's stages: milliseconds per name (added up when a stage runs more than once)."""

    __slots__ = ("route_at", "spent", "started")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.route_at: float | None = None  # when the route's own code began
        self.spent: dict[str, float] = {}

    def add(self, name: str, ms: float) -> None:
        self.spent[name] = self.spent.get(name, 0.0) + ms

    def route_started(self) -> None:
        self.route_at = time.perf_counter()

    def header(self) -> bytes:
        """The ``Server-Timing`` value, as of now (the answer's start)."""
        now = time.perf_counter()
        spent = {"app": (now - self.started) * 1000}
        if self.route_at is not None:
            spent["before"] = max(0.0, (self.route_at - self.started) * 1000 - self.spent.get("auth", 0.0))
        spent.update(self.spent)
        return ", ".join(f"{name};dur={ms:.2f}" for name, ms in spent.items()).encode()


STAGES: contextvars.ContextVar[Stages | None] = contextvars.ContextVar("cabrain_server_timing", default=None)


def current() -> Stages | None:
    """This request's stages; None when timing is off (or outside a request)."""
    return STAGES.get()


async def timed(name: str, work: Awaitable[T]) -> T:
    """``await work``, its time added to this request's stage ``name`` when timing is on."""
    stages = STAGES.get()
    if stages is None:
        return await work
    started = time.perf_counter()
    try:
        return await work
    finally:
        stages.add(name, (time.perf_counter() - started) * 1000)


class ServerTiming:
    """Pure ASGI middleware, the ingress's outermost: each HTTP request gets its :class:`Stages`,
    and its answer a ``Server-Timing`` header with them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stages = Stages()
        token = STAGES.set(stages)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*(message.get("headers") or []), (HEADER, stages.header())]}
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            STAGES.reset(token)
