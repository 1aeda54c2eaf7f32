"""The event stream as server-sent events: what ``GET /v1/events`` and the console's live findings
send. Each event once, in order, with its ``seq`` as the SSE id (a client resumes with
``Last-Event-ID``); a keep-alive comment when nothing happened; closed after ``seconds``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from cabrain.notify.facade import Notify


def frame(event: dict[str, Any]) -> bytes:
    return f"id: {event['seq']}\nevent: {event['kind']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


async def sse(
    hub: Notify,
    agent: str,
    *,
    after: int,
    namespace: str | None,
    seconds: float,
    poll_s: float,
    first: list[dict[str, Any]] | None = None,
) -> AsyncIterator[bytes]:
    """The stream of ``agent``'s events after ``after`` (``first``: the first batch, read already so
    that a refusal is an error answer, not a broken stream)."""
    seen = after
    batch = first if first is not None else await hub.events(agent, after=after, namespace=namespace)
    ends = time.monotonic() + seconds
    yield f"retry: {int(poll_s * 1000)}\n\n".encode()
    while True:
        for event in batch:
            seen = event["seq"]
            yield frame(event)
        if time.monotonic() >= ends:
            return
        await asyncio.sleep(poll_s)
        batch = await hub.events(agent, after=seen, namespace=namespace)
        if not batch:
            yield b": keep-alive\n\n"


class HeldStream(StreamingResponse):
    """A stream that holds one of its agent's stream slots (:mod:`cabrain.limits`) until it ends,
    however it ends (its time is up, the client went away, sending failed)."""

    def __init__(self, give_back: Callable[[], None], content: AsyncIterator[bytes], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._give_back = give_back

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._give_back()


def last_seen(after: int, last_event_id: str | None) -> int:
    """Where a (re)connecting client resumes: after ``Last-Event-ID`` when it sends one."""
    return max(after, int(last_event_id)) if last_event_id and last_event_id.isdigit() else after


__all__ = ["HeldStream", "frame", "last_seen", "sse"]
