"""Limits per agent: how much of one process a single agent may hold at once, so that no agent can
starve the others (issue 31).

- **Running operations** (``CABRAIN_MAX_CONCURRENT_PER_AGENT``): the gate (:mod:`cabrain.gate`)
  holds one of the agent's slots while an operation runs; one more waits for a slot, up to
  ``CABRAIN_MAX_QUEUED_PER_AGENT`` waiting, and one beyond those is refused at once.
- **Event streams** (``CABRAIN_MAX_STREAMS_PER_AGENT``): where a stream is served (``GET /v1/events``,
  the console's live findings), one slot per open stream, none waiting.

A refusal is :class:`cabrain.errors.ServiceBusy` (429 ``too_many_requests`` with ``Retry-After``),
saying which limit and which setting raises it. The counts are per process (each Serve replica,
each in-process Brain): with several ingress replicas an agent may hold that many on each.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from cabrain.errors import ServiceBusy


@dataclass
class _Held:
    running: int = 0
    waiting: int = 0
    turn: asyncio.Condition = field(default_factory=asyncio.Condition)


class AgentSlots:
    """At most ``limit`` held at once per agent; at most ``queued`` more waiting for one."""

    def __init__(self, limit: int, queued: int, *, refusal: Callable[[str, int], str], setting: str) -> None:
        self.limit, self.queued = limit, queued
        self._refusal, self._setting = refusal, setting
        self._held: dict[str, _Held] = {}

    def running(self, agent: str) -> int:
        held = self._held.get(agent)
        return held.running if held is not None else 0

    def waiting(self, agent: str) -> int:
        held = self._held.get(agent)
        return held.waiting if held is not None else 0

    def _refuse(self, agent: str) -> ServiceBusy:
        return ServiceBusy(
            self._refusal(agent, self.limit),
            hint=f"retry after the time in Retry-After; an operator can raise {self._setting}",
        )

    @contextlib.asynccontextmanager
    async def hold(self, agent: str) -> AsyncIterator[None]:
        """One of ``agent``'s slots for the block (waiting for one while fewer than ``queued`` wait)."""
        held = self._held.setdefault(agent, _Held())
        if held.running >= self.limit:
            if held.waiting >= self.queued:
                raise self._refuse(agent)
            held.waiting += 1
            try:
                async with held.turn:
                    await held.turn.wait_for(lambda: held.running < self.limit)
                    held.running += 1
            finally:
                held.waiting -= 1
        else:
            held.running += 1
        try:
            yield
        finally:
            held.running -= 1
            if held.waiting:
                async with held.turn:  # every waiter looks again; the first to look takes the slot
                    held.turn.notify_all()
            elif held.running == 0 and self._held.get(agent) is held:
                self._held.pop(agent, None)

    def take(self, agent: str) -> Callable[[], None]:
        """One of ``agent``'s slots now, or the refusal; returns the function that gives it back
        (once, however often it is called: the slot outlives the call, as a stream's does)."""
        held = self._held.setdefault(agent, _Held())
        if held.running >= self.limit:
            raise self._refuse(agent)
        held.running += 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if given_back:
                return
            given_back = True
            held.running -= 1
            if held.running == 0 and held.waiting == 0 and self._held.get(agent) is held:
                self._held.pop(agent, None)

        return give_back


__all__ = ["AgentSlots"]
