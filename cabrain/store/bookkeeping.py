"""Recall's bookkeeping, written off the response path by one background flusher.

Each recall queues its hit ids and its ``memory_events`` row. A single task drains the queue
every ``flush_s`` seconds (or at once when ``batch`` items wait) and writes everything queued in
one transaction: access counts added up per memory and applied in id order, events inserted in
one statement. One writer, in one order, cannot deadlock with itself (concurrent per-recall
updates of overlapping rows did); a deadlock with a concurrent retain is retried once. When the
queue is full (``max_queued``), the oldest bookkeeping waits: recall never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter

import asyncpg

from cabrain.store import memories as sql

log = logging.getLogger(__name__)

TOUCH = """
WITH counts AS (
    SELECT t.id, t.n FROM unnest($1::uuid[], $2::int[]) AS t(id, n)
),
locked AS (
    SELECT m.id, m.valid_at, c.n FROM counts c
    JOIN memory_ids i ON i.id = c.id
    JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
    ORDER BY m.id
    FOR UPDATE OF m
)
UPDATE memories m SET access_count = m.access_count + l.n, last_accessed_at = now()
FROM locked l WHERE m.id = l.id AND m.valid_at = l.valid_at
"""


class Bookkeeper:
    def __init__(self, pool: asyncpg.Pool, *, flush_s: float = 0.5, batch: int = 500, max_queued: int = 10_000) -> None:
        self._pool = pool
        self._flush_s, self._batch = flush_s, batch
        self._queue: asyncio.Queue[tuple[list[uuid.UUID], dict]] = asyncio.Queue(maxsize=max_queued)
        self._task: asyncio.Task | None = None
        self._closing = asyncio.Event()  # set by close(): what is queued is written now, not after flush_s

    def record(self, ids: list[uuid.UUID], event: dict) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            self._queue.put_nowait((ids, event))
        except asyncio.QueueFull:
            log.warning("bookkeeping.queue_full", extra={"dropped_event": event.get("op")})

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            if not self._closing.is_set():  # gather what comes in the next flush_s into one write
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), self._flush_s)
            items = [first]
            while not self._queue.empty() and len(items) < self._batch:
                items.append(self._queue.get_nowait())
            await self._write(items)
            for _ in items:
                self._queue.task_done()

    async def _write(self, items: list[tuple[list[uuid.UUID], dict]]) -> None:
        counts: Counter[uuid.UUID] = Counter(i for ids, _ in items for i in ids)
        ordered = sorted(counts)
        for attempt in (1, 2):
            try:
                async with self._pool.acquire() as conn, conn.transaction():
                    if ordered:
                        await conn.execute(TOUCH, ordered, [counts[i] for i in ordered])
                    await sql.insert_events(conn, [event for _, event in items])
                return
            except asyncpg.DeadlockDetectedError:
                if attempt == 2:
                    log.exception("bookkeeping.failed", extra={"items": len(items)})
            except Exception:  # bookkeeping must never break recall
                log.exception("bookkeeping.failed", extra={"items": len(items)})
                return

    async def close(self) -> None:
        """Write everything still queued, now, then stop."""
        if self._task is None:
            return
        self._closing.set()
        await self._queue.join()
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        self._closing.clear()
