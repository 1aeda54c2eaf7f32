"""Model deployments (the embedder and the reranker) and the adapters the ingress calls them through.

A replica loads its model once, on the device its settings name (``auto``: the GPU when Ray gave
it one). Embedding calls from every ingress replica are merged by ``@serve.batch`` into one model
call; the batch size and wait are live-tunable through ``user_config`` without a restart.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from ray import serve

from cabrain.errors import CabrainError, EmbedderError
from cabrain.settings import load_settings
from serve_apps.metrics import EmbedderMetrics

KINDS = ("query", "document")


def _node_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - only informational
        return None


@serve.deployment(name="Embedder", health_check_period_s=5, health_check_timeout_s=30)
class EmbedderDeployment:
    def __init__(self, settings: dict[str, Any]) -> None:
        from cabrain.providers.embedders import load_embedder

        self._settings = load_settings(**settings)
        self._embedder = load_embedder(self._settings)
        self._metrics = EmbedderMetrics()
        self._waiting = 0

    def reconfigure(self, config: dict[str, Any]) -> None:
        """``user_config``: ``max_batch_size`` and ``batch_wait_timeout_s``."""
        unknown = set(config) - {"max_batch_size", "batch_wait_timeout_s"}
        if unknown:
            raise ValueError(f"unknown embedder user_config keys: {sorted(unknown)}")
        if "max_batch_size" in config:
            self._batched.set_max_batch_size(int(config["max_batch_size"]))
        if "batch_wait_timeout_s" in config:
            self._batched.set_batch_wait_timeout_s(float(config["batch_wait_timeout_s"]))

    async def info(self) -> dict[str, Any]:
        return {
            "name": self._embedder.name,
            "dim": self._embedder.dim,
            "device": self._settings.embedding_device,
            "pid": os.getpid(),
            "node_id": _node_id(),
            "max_batch_size": self._batched._get_max_batch_size(),
        }

    async def embed(self, kind: str, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` as float32 rows; ``kind`` is ``query`` or ``document``."""
        if kind not in KINDS:
            raise EmbedderError(f"unknown embedding kind {kind!r}; use one of {KINDS}")
        if not texts:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        self._waiting += 1
        self._metrics.queue.set(self._waiting)
        try:
            return await self._batched((kind, texts))
        finally:
            self._waiting -= 1
            self._metrics.queue.set(self._waiting)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.001)
    async def _batched(self, requests: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        started = time.perf_counter()
        self._metrics.batch_calls.observe(len(requests))
        out: list[np.ndarray | None] = [None] * len(requests)
        for kind in KINDS:
            picked = [i for i, (k, _) in enumerate(requests) if k == kind]
            if not picked:
                continue
            texts = [t for i in picked for t in requests[i][1]]
            self._metrics.batch_texts.observe(len(texts), tags={"kind": kind})
            if kind == "document":
                vectors = await self._embedder.embed_documents(texts)
            else:
                vectors = await self._embedder.embed_queries(texts)
            matrix = np.asarray(vectors, dtype=np.float32)
            offset = 0
            for i in picked:
                n = len(requests[i][1])
                out[i] = matrix[offset : offset + n]
                offset += n
        self._metrics.latency.observe((time.perf_counter() - started) * 1000)
        return out  # type: ignore[return-value]


@serve.deployment(name="Reranker", health_check_period_s=5, health_check_timeout_s=30)
class RerankerDeployment:
    def __init__(self, settings: dict[str, Any]) -> None:
        from cabrain.providers.rerankers import load_reranker

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


# --- adapters: the ingress's Brain sees ordinary providers ---------------------------------------
RETRYABLE = ()  # filled lazily: ray's actor-death exceptions


def _retryable() -> tuple[type[BaseException], ...]:
    global RETRYABLE
    if not RETRYABLE:
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError
        from ray.serve.exceptions import BackPressureError

        RETRYABLE = (
            ActorDiedError,
            ActorUnavailableError,
            RayActorError,
            BackPressureError,
        )
    return RETRYABLE


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
        except _retryable() as exc:
            if time.monotonic() + delay > deadline:
                raise EmbedderError(
                    f"the {what} deployment has no live replica (retried for {timeout_s:.0f} s): {exc}",
                    hint="check `ray status` and the Serve logs; replicas are replaced automatically",
                ) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


class RemoteEmbedder:
    """:class:`cabrain.providers.embedders.Embedder` over the Embedder deployment.

    Query vectors are kept in a small per-replica LRU: the same questions come back often (every
    Claude Code session starts with its project's context query), and a hit skips two hops and
    the model."""

    def __init__(self, handle, info: dict[str, Any], *, timeout_s: float, query_cache: int = 2048) -> None:
        self._handle = handle
        self.name = info["name"]
        self.dim = int(info["dim"])
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
        return await self._embed("query", texts) if texts else []

    async def embed_query(self, text: str) -> list[float]:
        cached = self._queries.get(text)
        if cached is not None:
            self._queries.move_to_end(text)
            return cached
        vector = (await self._embed("query", [text]))[0]
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
