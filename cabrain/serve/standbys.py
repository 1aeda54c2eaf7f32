"""The hot tier's read replicas (:mod:`cabrain.store.replicas`) as the HTTP API shows them.

Where ``CABRAIN_DATABASE_REPLICA_URLS`` is set:

- a write (a request other than GET and HEAD and the POSTs of read operations: recall, archive
  recall) answers with ``CaBrain-LSN``, the primary's WAL position once it is done;
- a request that sends a ``CaBrain-LSN`` back reads from a replica only once that replica has
  replayed it (waiting at most ``CABRAIN_REPLICA_WAIT_S``), else from the primary. The Python client
  (:mod:`cabrain.client`) sends the last one it was given with every request;
- the console and MCP read from the primary: a person's page shows what they just did, and an
  agent's tool call what its last one wrote.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cabrain import gate
from cabrain.errors import InputError
from cabrain.policy import Op
from cabrain.serve.errors import error_response
from cabrain.store import replicas

if TYPE_CHECKING:
    from cabrain.serve.replica import Replica

log = logging.getLogger(__name__)

HEADER = "CaBrain-LSN"
_HEADER = HEADER.lower().encode()
_PRIMARY_ONLY = ("/console", "/mcp")


def _read_posts() -> re.Pattern[str]:
    """The paths of the POST routes of read operations (recall is a POST), from their declarations."""
    paths = []
    for spec in gate.REGISTRY.values():
        if spec.kind in (Op.RECALL, Op.READ):
            for route in spec.faces.http:
                method, _, path = route.partition(" ")
                if method == "POST":
                    paths.append(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)))
    return re.compile("|".join(paths) or "(?!)")


class ReadYourWrites:
    """ASGI middleware: ``CaBrain-LSN`` on writes' answers, and reads routed by the one a request sends."""

    def __init__(self, app: ASGIApp, svc: Replica) -> None:
        self.app = app
        self.svc = svc
        self._reads: re.Pattern[str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.svc.settings.replica_dsns:
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if path.startswith(_PRIMARY_ONLY):
            primary = replicas.PRIMARY.set(True)
            try:
                await self.app(scope, receive, send)
            finally:
                replicas.PRIMARY.reset(primary)
            return
        given = dict(scope.get("headers") or []).get(_HEADER)
        try:
            after = replicas.parse_lsn(given.decode("latin-1")) if given else None
        except ValueError as exc:
            await error_response(InputError(f"{HEADER}: {exc}", hint=f"send back the {HEADER} a write answered with"))(
                scope, receive, send
            )
            return
        if self._reads is None:
            self._reads = _read_posts()
        method = scope.get("method", "GET")
        writes = method not in ("GET", "HEAD", "OPTIONS") and not (method == "POST" and self._reads.fullmatch(path))
        token = replicas.READ_AFTER.set(after)
        try:
            await self.app(scope, receive, self._answering_position(send) if writes else send)
        finally:
            replicas.READ_AFTER.reset(token)

    def _answering_position(self, send: Send) -> Send:
        async def sending(message: Message) -> None:
            brain = self.svc.brain
            if message["type"] == "http.response.start" and message["status"] < 400 and brain is not None:
                try:
                    position = await brain.wal_position()
                except Exception as exc:  # noqa: BLE001 - the write is done: its answer goes out without one
                    log.warning("no WAL position for the answer: %s", exc)
                else:
                    message = {**message, "headers": [*message.get("headers", []), (_HEADER, position.encode())]}
            await send(message)

        return sending


async def health(svc: Replica) -> list[dict[str, Any]]:
    """Each replica's state and lag (none before the replica's brain is open)."""
    return [] if svc.brain is None else await svc.brain.read_replicas()


def summary(replica: dict[str, Any]) -> str:
    """One replica's state in words (the console's health page)."""
    if replica["state"] in ("down", "not a replica"):
        return f"{replica['state']}: {replica['error']}; reads go to the primary"
    lag = "unknown" if replica["lag_s"] is None else f"{replica['lag_s']:.1f} s"
    said = f"replayed {replica['replayed_lsn']}, {replica['lag_bytes'] or 0:,} bytes and {lag} behind"
    said += ", replay paused" if replica["replay_paused"] else ""
    said += f"; {replica['reads']:,} reads served here"
    return said if replica["state"] == "ok" else f"too far behind to read from: {said}"
