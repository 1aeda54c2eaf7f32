"""What one ingress replica holds: its :class:`cabrain.brain.Brain` (a connection pool to the shared
hot tier, the L1 cache) whose embedder and reranker are handles to the model deployments, the API
keys it checked lately, the tasks it runs in the background (connector syncs, the live agent's
answers) and its background loops (:mod:`cabrain.serve.loops`). Its facades come from the one
composition root, :class:`cabrain.facades.Facades`. Routes reach it through
:mod:`cabrain.serve.deps`; :class:`cabrain.serve.ingress.Ingress` makes it a Serve deployment.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cabrain import __version__, identity
from cabrain.brain import Brain
from cabrain.channels.live import LiveAgent
from cabrain.errors import DatabaseUnreachable, ServiceError
from cabrain.facades import Facades
from cabrain.fixes import Fix
from cabrain.identity import Principal
from cabrain.limits import AgentSlots
from cabrain.providers.embedders import load_embedder
from cabrain.serve import loops, timing
from cabrain.serve.metrics import IngressMetrics
from cabrain.serve.models import LocalQueries, RemoteEmbedder, RemoteReranker, call_with_retry
from cabrain.serve.responses import ReadyOut
from cabrain.serve.service_ops import ServiceOps
from cabrain.settings import load_settings
from cabrain.store.reconnect import CONNECTION_LOST

log = logging.getLogger(__name__)
T = TypeVar("T")

WAITING_FOR_DATABASE: tuple[type[BaseException], ...] = (DatabaseUnreachable, *CONNECTION_LOST)


class Replica(Facades):
    """One replica of the HTTP API: its Brain, opened once the models answer."""

    def __init__(
        self, settings: dict[str, Any], embedder: Any, reranker: Any = None, local_queries: bool = False
    ) -> None:
        # Models run in their own deployments (never a reranker in the ingress itself), except the
        # query embedder where it pays to keep a copy here (IngressArgs.query_embedding).
        self.settings = load_settings(**{**settings, "reranker_provider": "none"})
        self._embedder_handle, self._reranker_handle = embedder, reranker
        self._local_queries = local_queries
        self.metrics = IngressMetrics()
        self.brain: Brain | None = None
        self.models: dict[str, Any] = {}
        self.start_error: str | None = None
        self._keys: dict[bytes, tuple[Principal, float]] = {}
        # open event streams per agent here (cabrain.limits): each holds a request slot of this replica
        self.streams = AgentSlots(
            self.settings.max_streams_per_agent,
            0,
            refusal=lambda agent, limit: (
                f"agent {agent!r} has {limit} event streams open on this replica, the most one agent may"
            ),
            setting="CABRAIN_MAX_STREAMS_PER_AGENT",
        )
        # the facades, built one way (cabrain.facades); the credentials connectors, channels and
        # notifiers name by variable are read here, at the entry point (never stored)
        super().__init__(self.settings, dict(os.environ))
        self.ops = ServiceOps(self.settings, self.get_brain)
        self.inbox_ready = asyncio.Event()
        self._syncs: dict[uuid.UUID, asyncio.Task[Any]] = {}
        self._live_tasks: set[asyncio.Task[Any]] = set()
        self._started = asyncio.create_task(self._start())
        self._loops = [asyncio.create_task(loop(self)) for loop in (loops.work_inbox, loops.sync_due, loops.push)]

    # --- start-up: wait for the models, then open the hot tier ---------------------------------
    async def _start(self) -> None:
        timeout = self.settings.serve_ready_timeout_s
        try:
            info = await call_with_retry("embedder", lambda: self._embedder_handle.info.remote(), timeout)
            local = None
            if self._local_queries:
                model = await asyncio.to_thread(load_embedder, self.settings)
                local = LocalQueries(model, max_batch_size=int(info.get("max_batch_size") or 32))
                info = {**info, "queries": "local"}
            embedder = RemoteEmbedder(
                self._embedder_handle, info, timeout_s=self.settings.embedding_timeout_s, local=local
            )
            self.models["embedder"] = info
            reranker = None
            if self._reranker_handle is not None:
                rinfo = await call_with_retry("reranker", lambda: self._reranker_handle.info.remote(), timeout)
                reranker = RemoteReranker(
                    self._reranker_handle,
                    rinfo,
                    timeout_s=self.settings.embedding_timeout_s,
                )
                self.models["reranker"] = rinfo
            delay = 0.5
            while True:
                try:
                    self.brain = await Brain.open(self.settings, embedder=embedder, reranker=reranker)
                    self.start_error = None
                    return
                except WAITING_FOR_DATABASE as exc:  # the hot tier is not up yet
                    self.start_error = f"waiting for the database: {exc}"
                    log.warning("database not ready", extra={"error": str(exc)})
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
        except Exception as exc:  # schema not current, wrong dimension, bad settings: say so on every request
            self.start_error = str(exc)
            log.error("ingress cannot start", extra={"error": str(exc)})
            raise

    # --- connectors: syncs run in the background of the replica that was asked -----------------
    def spawn_sync(self, sync: Awaitable[Any], run_id: uuid.UUID) -> None:
        """Run a sync the gate let through in the background of this replica; its run
        (``connector_runs``) tells how it goes."""

        async def run() -> None:
            try:
                await sync
            except Exception as exc:  # noqa: BLE001 - recorded in the run and on the connector
                log.warning("connector sync failed", extra={"run": str(run_id), "error": str(exc)})
            finally:
                self._syncs.pop(run_id, None)

        self._syncs[run_id] = asyncio.create_task(run())

    # --- channels, pushes and the live agent (issue 22) ----------------------------------------------
    def hand_to_live_agent(self, brain: Brain, channel: str, stored: list[tuple[Any, list[uuid.UUID]]]) -> None:
        """Let the live agent answer a channel's new messages, in order, in the background."""

        async def answer() -> None:
            hub = self.channels(brain)
            try:
                found = await hub.get(channel)
                agent = LiveAgent(hub)
                for message, memory_ids in stored:
                    await agent.handle(found, message, memory_ids)
            except Exception as exc:  # noqa: BLE001 - the message is stored; the agent's failure is logged
                log.warning("live agent failed", extra={"channel": channel, "error": str(exc)})

        task = asyncio.create_task(answer())
        self._live_tasks.add(task)
        task.add_done_callback(self._live_tasks.discard)

    async def get_brain(self, wait_s: float = 30.0) -> Brain:
        if self.brain is not None:
            return self.brain
        failed = ServiceError(
            f"the service failed to start: {self.start_error}", hint="fix the cause above and redeploy (cabrain up)"
        )
        if self._started.done() and self._started.exception() is not None:
            raise failed
        try:
            await asyncio.wait_for(asyncio.shield(self._started), wait_s)
        except TimeoutError:
            raise ServiceError(
                f"the service is still starting ({self.start_error or 'loading models'})",
                fix=Fix("wait_ready"),
            ) from None
        except Exception:  # noqa: BLE001 - the start task's failure, reported with its cause
            raise failed from None
        assert self.brain is not None
        return self.brain

    async def run(self, op: Callable[[Brain], Awaitable[T]]) -> T:
        """Run ``op`` on the Brain; if the hot tier dropped its connections (restart, failover),
        reconnect and retry until ``db_connect_timeout_s`` (:mod:`cabrain.store.reconnect`). Writes
        retried this way carry an idempotency key (routes/memories.py)."""
        brain = await self.get_brain()
        return await timing.timed("brain", brain.riding_out(lambda: op(brain)))

    # --- identity ---------------------------------------------------------------------------------
    async def authenticate(self, key: str | None) -> Principal:
        ttl = self.settings.api_key_cache_ttl_s
        digest = identity.hash_key(key) if key else b""
        cached = self._keys.get(digest)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        brain = await self.get_brain()  # not run(): the key check is its own stage (cabrain.serve.timing)
        principal = await brain.riding_out(lambda: brain.authenticate(key))
        if ttl > 0:
            if len(self._keys) > 10_000:
                self._keys.clear()
            self._keys[digest] = (principal, now + ttl)
        return principal

    def forget_keys(self) -> None:
        """After a revocation or a disabled agent: this replica re-checks every key."""
        self._keys.clear()

    async def ready(self) -> ReadyOut:
        """Whether requests can be answered: the models loaded and the database reachable."""
        out: ReadyOut = {"ready": False, "version": __version__, "models": self.models}
        if self.brain is None:
            out["reason"] = self.start_error or "loading models"
            return out
        try:
            await asyncio.wait_for(self._embedder_handle.info.remote(), 5)
            await self.brain.ping()
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            out["reason"] = f"{type(exc).__name__}: {exc}"
            return out
        out["ready"] = True
        return out

    async def __del__(self) -> None:
        for loop in self._loops:
            loop.cancel()
        for task in list(self._syncs.values()):
            task.cancel()
        if self.brain is not None:
            await self.brain.close()
