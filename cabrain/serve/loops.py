"""The background loops of an ingress replica, each a coroutine over the replica that starts them
(:class:`cabrain.serve.replica.Replica`) and cancels them when it goes:

- :func:`work_inbox`: retain what ``/v1/capture`` handed over (any replica's), in a pause of this
  replica's requests;
- :func:`sync_due`: the connectors whose schedule is due (a connector's lock lets one replica sync it);
- :func:`push`: fan out new events, deliver due pushes, and ask trackers about the live agents'
  issues (rows are claimed, so each is worked once).

Each outlives a bad moment (a lost database, a failing sender): it logs and goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from cabrain.brain import Brain
from cabrain.channels.facade import Channels
from cabrain.channels.live import LiveAgent
from cabrain.connectors.facade import Connectors
from cabrain.notify.outbox import Outbox
from cabrain.notify.patterns import find_patterns
from cabrain.serve.metrics import IngressMetrics
from cabrain.settings import Settings

T = TypeVar("T")


class Replica(Protocol):
    """What the loops use of the replica that runs them."""

    settings: Settings
    metrics: IngressMetrics
    brain: Brain | None
    inbox_ready: asyncio.Event

    async def run(self, op: Callable[[Brain], Awaitable[T]]) -> T: ...

    def connectors(self, brain: Brain) -> Connectors: ...

    def channels(self, brain: Brain) -> Channels: ...

    def outbox(self, brain: Brain) -> Outbox: ...


log = logging.getLogger(__name__)

INBOX_QUIET_S = 0.3  # the capture inbox is worked once requests pause this long...
INBOX_MAX_DELAY_S = 5.0  # ...or once its oldest work has waited this long


async def quiet_moment(replica: Replica) -> None:
    """Background retains wait for a pause in this replica's requests (a burst of hook events
    gathers into fewer, larger embedding batches, and the recalls those events wait on do not
    share the CPU with them), but never longer than INBOX_MAX_DELAY_S."""
    metrics = replica.metrics
    first = time.monotonic()
    await asyncio.sleep(INBOX_QUIET_S)
    while time.monotonic() - first < INBOX_MAX_DELAY_S and (
        metrics.in_flight_now or time.monotonic() - metrics.last_request_at < INBOX_QUIET_S
    ):
        await asyncio.sleep(0.05)


async def work_inbox(replica: Replica, poll_s: float = 2.0) -> None:
    """Retain captured memories handed over through /v1/capture (any replica's)."""
    while True:
        try:
            await asyncio.wait_for(replica.inbox_ready.wait(), poll_s)
            await quiet_moment(replica)
        except TimeoutError:
            pass
        replica.inbox_ready.clear()
        if replica.brain is None:
            continue
        try:
            while await replica.run(lambda b: b.drain_captures()):
                pass
        except Exception as exc:  # noqa: BLE001 - the worker must outlive a bad moment
            log.warning("capture inbox", extra={"error": str(exc)})


async def sync_due(replica: Replica, poll_s: float = 30.0) -> None:
    """Sync the connectors whose schedule is due (each replica looks; a connector's lock lets one
    of them sync it)."""
    while True:
        await asyncio.sleep(poll_s)
        if replica.brain is None:
            continue
        hub = replica.connectors(replica.brain)
        try:
            due = await hub.due()
        except Exception as exc:  # noqa: BLE001 - the scheduler must outlive a bad moment
            log.info("scheduled connector syncs", extra={"error": str(exc)})
            continue
        for connector in due:
            try:  # a failure is recorded on the connector and its run; the others still sync
                await hub.sync(connector.agent_id, connector.name)
            except Exception as exc:  # noqa: BLE001
                log.info("scheduled connector sync", extra={"connector": connector.name, "error": str(exc)})


async def push(replica: Replica) -> None:
    """Fan out new events, send due pushes, and ask trackers about the live agents' issues (every
    replica does; rows are claimed, so each is worked once)."""
    settings = replica.settings
    watched = 0.0
    while True:
        await asyncio.sleep(settings.notify_poll_s)
        brain = replica.brain
        if brain is None:
            continue
        try:
            outbox = replica.outbox(brain)
            await find_patterns(brain.engine)
            while await outbox.fan_out():
                pass
            while await outbox.deliver():
                pass
            if time.monotonic() - watched >= min(settings.live_watch_s, 30.0):
                watched = time.monotonic()
                await LiveAgent(replica.channels(brain)).watch()
        except Exception as exc:  # noqa: BLE001 - the loop must outlive a bad moment
            log.warning("pushes", extra={"error": str(exc)})


__all__ = ["INBOX_MAX_DELAY_S", "INBOX_QUIET_S", "Replica", "push", "quiet_moment", "sync_due", "work_inbox"]
