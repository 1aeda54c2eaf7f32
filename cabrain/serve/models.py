"""Model deployments (the embedder and the reranker) and the adapters the ingress calls them through.

A replica loads its model once, on the device its settings name (``auto``: the GPU when Ray gave
it one). Embedding calls from every ingress replica are merged by ``@serve.batch`` into one model
call per kind; queries take the model before waiting documents (:class:`Turns`), and documents go
in chunks, so a recall never queues behind a backlog of retains. The batch size and wait and the
document chunk are live-tunable through ``user_config`` without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray
from ray import serve
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError
from ray.serve.exceptions import BackPressureError

from cabrain.errors import CabrainError, EmbedderError
from cabrain.providers.embedders import load_embedder
from cabrain.providers.rerankers import load_reranker
from cabrain.serve.metrics import EmbedderMetrics
from cabrain.settings import load_settings

KINDS = ("query", "document")


def _node_id() -> str | None:
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - only informational
        return None


class Turns:
    """One model call at a time, queries first: a query that arrives while documents are being
    embedded takes the next turn, ahead of the documents still waiting. Documents are embedded in
    chunks (one turn each), so a query waits for at most one chunk, never for a whole backlog."""

    def __init__(self) -> None:
        self._busy = False
        self._waiting: tuple[deque[asyncio.Future[None]], deque[asyncio.Future[None]]] = (deque(), deque())

    @contextlib.asynccontextmanager
    async def take(self, *, urgent: bool):
        if self._busy:
            waiter = asyncio.get_running_loop().create_future()
            line = self._waiting[0 if urgent else 1]
            line.append(waiter)
            try:
                await waiter  # handed over: the turn is ours (_busy stays True)
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._hand_over()  # the turn came as we were cancelled: pass it on
                else:
                    line.remove(waiter)
                raise
        else:
            self._busy = True
        try:
            yield
        finally:
            self._hand_over()

    def _hand_over(self) -> None:
        for line in self._waiting:
            while line:
                waiter = line.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._busy = False

    @property
    def waiting(self) -> int:
        return sum(len(line) for line in self._waiting)


class EmbedderReplica:
    """One replica of the Embedder deployment: the embedding model, batched calls in turns."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._settings = load_settings(**settings)
        self._embedder = load_embedder(self._settings)
        self._metrics = EmbedderMetrics()
        self._waiting = 0
        self._turns = Turns()
        self._document_chunk = 4

    def reconfigure(self, config: dict[str, Any]) -> None:
        """``user_config``: ``max_batch_size``, ``batch_wait_timeout_s``, ``document_chunk``."""
        unknown = set(config) - {"max_batch_size", "batch_wait_timeout_s", "document_chunk"}
        if unknown:
            raise ValueError(f"unknown embedder user_config keys: {sorted(unknown)}")
        for batched in (self._queries, self._documents):
            # serve.batch adds these setters to the method; Ray's annotation of it omits them
            if "max_batch_size" in config:
                batched.set_max_batch_size(int(config["max_batch_size"]))  # type: ignore[attr-defined]
            if "batch_wait_timeout_s" in config:
                batched.set_batch_wait_timeout_s(float(config["batch_wait_timeout_s"]))  # type: ignore[attr-defined]
        if "document_chunk" in config:
            self._document_chunk = max(1, int(config["document_chunk"]))

    async def info(self) -> dict[str, Any]:
        return {
            "name": self._embedder.name,
            "dim": self._embedder.dim,
            "device": self._settings.embedding_device,
            "pid": os.getpid(),
            "node_id": _node_id(),
            "max_batch_size": self._queries._get_max_batch_size(),  # type: ignore[attr-defined]  # as above
            "document_chunk": self._document_chunk,
        }

    async def embed(self, kind: str, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` as float32 rows; ``kind`` is ``query`` or ``document``."""
        if kind not in KINDS:
            raise EmbedderError(f"unknown embedding kind {kind!r}; use one of {KINDS}")
        if not texts:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        self._waiting += 1
        self._metrics.queue_depth(self._waiting)
        try:
            return await (self._queries if kind == "query" else self._documents)(texts)
        finally:
            self._waiting -= 1
            self._metrics.queue_depth(self._waiting)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.001)
    async def _queries(self, requests: list[list[str]]) -> list[np.ndarray]:
        return await self._run("query", requests, chunk=None)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.001)
    async def _documents(self, requests: list[list[str]]) -> list[np.ndarray]:
        return await self._run("document", requests, chunk=self._document_chunk)

    async def _run(self, kind: str, requests: list[list[str]], *, chunk: int | None) -> list[np.ndarray]:
        """One merged batch: the model in turns of ``chunk`` texts (all at once when None)."""
        self._metrics.batch_calls.observe(len(requests), tags={"kind": kind})
        texts = [t for r in requests for t in r]
        step = chunk or len(texts)
        parts = []
        for i in range(0, len(texts), step):
            async with self._turns.take(urgent=kind == "query"):
                started = time.perf_counter()
                part = texts[i : i + step]
                if kind == "document":
                    vectors = await self._embedder.embed_documents(part)
                else:
                    vectors = await self._embedder.embed_queries(part)
                self._metrics.batch_texts.observe(len(part), tags={"kind": kind})
                self._metrics.latency.observe((time.perf_counter() - started) * 1000, tags={"kind": kind})
            parts.append(np.asarray(vectors, dtype=np.float32))
        matrix = np.concatenate(parts) if len(parts) > 1 else parts[0]
        out, offset = [], 0
        for r in requests:
            out.append(matrix[offset : offset + len(r)])
            offset += len(r)
        return out


class RerankerReplica:
    """One replica of the Reranker deployment."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._settings = load_settings(**settings)
        reranker = load_reranker(self._settings)
        if reranker is None:
            raise EmbedderError(
                "the reranker deployment is enabled but CABRAIN_RERANKER_PROVIDER is 'none'",
                hint="set reranker_provider (and reranker_model) in the app's settings, or reranker.enabled: false",
            )
        self._reranker = reranker

    async def info(self) -> dict[str, Any]:
        return {"name": self._reranker.name, "pid": os.getpid(), "node_id": _node_id()}

    async def rank(self, query: str, passages: list[str]) -> list[float]:
        return await self._reranker.rank(query, passages)


# (Applied as calls, not as class decorators: type checkers keep a decorated class's own type.)
EmbedderDeployment = serve.deployment(name="Embedder", health_check_period_s=5, health_check_timeout_s=30)(
    EmbedderReplica
)
RerankerDeployment = serve.deployment(name="Reranker", health_check_period_s=5, health_check_timeout_s=30)(
    RerankerReplica
)


# --- adapters: the ingress's Brain sees ordinary providers ---------------------------------------
# A replica died under the call, or refused it for load: another one (or its replacement) takes it.
RETRYABLE = (ActorDiedError, ActorUnavailableError, RayActorError, BackPressureError)


async def call_with_retry(what: str, make_call, timeout_s: float):
    """Await ``make_call()``; when the replica died under it, retry on another (or its
    replacement) until ``timeout_s``. Errors the model itself raised are not retried."""
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        try:
            return await make_call()
        except CabrainError:
            raise
        except RETRYABLE as exc:
            if time.monotonic() + delay > deadline:
                raise EmbedderError(
                    f"the {what} deployment has no live replica (retried for {timeout_s:.0f} s): {exc}",
                    hint="check `ray status` and the Serve logs; replicas are replaced automatically",
                ) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


class LocalQueries:
    """Query embedding inside the ingress process (``ingress.query_embedding: local``).

    On CPUs a lone query's model time is smaller than the two hops to an embedder replica and
    back. Calls that arrive while the model is busy are merged into its next call, and only one
    call runs at a time, so concurrent recalls neither oversubscribe the cores nor queue one by one.
    """

    def __init__(self, embedder: Any, *, max_batch_size: int = 32) -> None:
        self._embedder = embedder
        self.name, self.dim = embedder.name, int(embedder.dim)
        self._max_batch_size = max_batch_size
        self._pending: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        waiter: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), waiter))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work())
        return await waiter

    async def _work(self) -> None:
        while self._pending:
            batch: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
            size = 0
            while self._pending and (not batch or size + len(self._pending[0][0]) <= self._max_batch_size):
                texts, waiter = self._pending.pop(0)
                batch.append((texts, waiter))
                size += len(texts)
            try:
                vectors = await self._embedder.embed_queries([t for texts, _ in batch for t in texts])
            except Exception as exc:  # noqa: BLE001 - every caller of the batch gets the error
                for _, waiter in batch:
                    if not waiter.done():
                        waiter.set_exception(exc)
                continue
            offset = 0
            for texts, waiter in batch:
                if not waiter.done():
                    waiter.set_result(vectors[offset : offset + len(texts)])
                offset += len(texts)


class RemoteEmbedder:
    """:class:`cabrain.providers.embedders.Embedder` over the Embedder deployment.

    Query vectors are kept in a small per-replica LRU: the same questions come back often (every
    Claude Code session starts with its project's context query), and a hit skips the model. With
    ``local`` (a :class:`LocalQueries` on the same model), queries are embedded in this process."""

    def __init__(
        self,
        handle,
        info: dict[str, Any],
        *,
        timeout_s: float,
        query_cache: int = 2048,
        local: LocalQueries | None = None,
    ) -> None:
        self._handle = handle
        self.name = info["name"]
        self.dim = int(info["dim"])
        if local is not None and (local.name, local.dim) != (self.name, self.dim):
            raise EmbedderError(
                f"the ingress loaded {local.name} ({local.dim} dims) for queries but the embedder deployment "
                f"runs {self.name} ({self.dim} dims)",
                hint="give the ingress and the embedder the same embedding settings",
            )
        self._local = local
        self._timeout_s = timeout_s
        self._queries: OrderedDict[str, list[float]] = OrderedDict()
        self._query_cache = query_cache

    async def _embed(self, kind: str, texts: Sequence[str]) -> list[list[float]]:
        matrix = await call_with_retry(
            "embedder",
            lambda: self._handle.embed.remote(kind, list(texts)),
            self._timeout_s,
        )
        return matrix.tolist()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed("document", texts) if texts else []

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if self._local is not None:
            return await self._local.embed_queries(texts)
        return await self._embed("query", texts)

    async def embed_query(self, text: str) -> list[float]:
        cached = self._queries.get(text)
        if cached is not None:
            self._queries.move_to_end(text)
            return cached
        vector = (await self.embed_queries([text]))[0]
        if self._query_cache:
            self._queries[text] = vector
            if len(self._queries) > self._query_cache:
                self._queries.popitem(last=False)
        return vector


class RemoteReranker:
    """:class:`cabrain.providers.rerankers.Reranker` over the Reranker deployment."""

    def __init__(self, handle, info: dict[str, Any], *, timeout_s: float) -> None:
        self._handle = handle
        self.name = info["name"]
        self._timeout_s = timeout_s

    async def rank(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await call_with_retry(
            "reranker",
            lambda: self._handle.rank.remote(query, list(passages)),
            self._timeout_s,
        )
