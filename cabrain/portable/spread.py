"""An import's embedding spread over the nodes of a Ray cluster (``cabrain import --ray``).

An import that re-embeds its memories (an export without vectors, another tool's records) runs at
its embedder's pace. :class:`EmbedderPool` is an embedder of as many Ray actors as the cluster has
nodes, placed one a node (``SPREAD``, a CPU each), each with the configured model: every call's
texts are cut into one slice per actor and embedded on all of them at once, in input order. The
engine the import runs on takes the pool as its embedder; nothing else of the import changes (one
transaction, the same rows). Each actor says which node it ran on: :attr:`EmbedderPool.nodes`
counts the texts each node embedded.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from cabrain.errors import EmbedderError
from cabrain.providers.embedders import load_embedder
from cabrain.settings import Settings, load_settings

__all__ = ["EmbedderPool", "pool_settings"]


class _Actor:
    """One node's model (a Ray actor's body)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        import ray  # inside the actor: Ray is imported where it runs

        self._embedder = load_embedder(load_settings(**settings))
        self._node = ray.get_runtime_context().get_node_id()

    def info(self) -> tuple[str, int, str]:
        return self._embedder.name, int(self._embedder.dim), self._node

    async def embed(self, kind: str, texts: list[str]) -> tuple[np.ndarray, str]:
        if kind == "query":
            vectors = await self._embedder.embed_queries(texts)
        else:
            vectors = await self._embedder.embed_documents(texts)
        return np.asarray(vectors, dtype=np.float32), self._node


def pool_settings(settings: Settings) -> dict[str, Any]:
    """What an actor needs to load the same model as this process: its embedding settings."""
    names = {name for name in type(settings).model_fields if name.startswith("embedding_")}
    return settings.model_dump(include=names | {"home", "models_offline"})


class EmbedderPool:
    """:class:`cabrain.providers.embedders.Embedder` over one actor per node of the connected Ray."""

    def __init__(self, actors: list[Any], name: str, dim: int) -> None:
        self._actors, self.name, self.dim = actors, name, dim
        self.nodes: Counter[str] = Counter()  # texts embedded, per node id

    @classmethod
    async def start(cls, settings: Settings, *, actors: int | None = None) -> EmbedderPool:
        """One actor per alive node of the Ray this process is connected to (``actors``: that many),
        each loading the configured model; refused with a clear error when they do not agree."""
        import ray

        count = actors or sum(1 for node in ray.nodes() if node.get("Alive"))
        remote: Any = ray.remote(num_cpus=1, max_restarts=0, scheduling_strategy="SPREAD")(_Actor)
        made: list[Any] = [remote.remote(pool_settings(settings)) for _ in range(max(count, 1))]
        try:  # an actor waits for a free CPU on its node: not forever
            infos = await asyncio.wait_for(
                asyncio.gather(*(actor.info.remote() for actor in made)), settings.serve_ready_timeout_s
            )
        except TimeoutError:
            for actor in made:
                ray.kill(actor)
            raise EmbedderError(
                f"the Ray cluster did not start {len(made)} embedders (one a node) within "
                f"{settings.serve_ready_timeout_s:.0f} s",
                hint="check `ray status`: each needs a free CPU on its node",
            ) from None
        if len({(name, dim) for name, dim, _ in infos}) != 1:
            raise EmbedderError(f"the cluster's nodes loaded different models: {sorted(set(infos))}")
        name, dim, _ = infos[0]
        return cls(made, name, dim)

    async def _embed(self, kind: str, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        step = -(-len(texts) // len(self._actors))
        slices = [texts[i : i + step] for i in range(0, len(texts), step)]
        done = await asyncio.gather(
            *(actor.embed.remote(kind, part) for actor, part in zip(self._actors[: len(slices)], slices, strict=True))
        )
        out: list[list[float]] = []
        for (matrix, node), part in zip(done, slices, strict=True):
            if matrix.shape != (len(part), self.dim):
                raise EmbedderError(f"node {node} returned {matrix.shape[0]} vectors for {len(part)} texts")
            self.nodes[node] += len(part)
            out.extend(matrix.tolist())
        return out

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed("document", texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed("query", texts)

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed("query", [text]))[0]

    def close(self) -> None:
        import ray

        for actor in self._actors:
            ray.kill(actor)
