"""The capture inbox (schema 0004): hook events the service accepted but has not retained yet.

``enqueue`` is one INSERT (the hook's answer waits for nothing else); ``drain`` claims pending
rows with ``FOR UPDATE SKIP LOCKED`` (so every ingress replica can work the queue), retains their
memories, and removes them: the raw captured text is not kept once it is a memory (or, with
``CABRAIN_CAPTURE_INBOX_RETENTION_S``, kept that long, marked processed, with the ids of the
memories it became, so that forgetting one of them removes it too). A row whose retain fails is
retried later; after ``MAX_ATTEMPTS`` (:mod:`cabrain.store.inbox`, with the statements) it stays,
with its error, for an operator to look at, for ``CABRAIN_CAPTURE_INBOX_FAILED_RETENTION_S``.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from cabrain.engine import Engine
from cabrain.redact import redact_deep
from cabrain.store import access
from cabrain.store import inbox as sql
from cabrain.types import MemoryInput, MemoryType, Network, Visibility
from cabrain.write.retain import retain

log = logging.getLogger(__name__)


def item_from_json(d: dict[str, Any], namespace: str) -> MemoryInput:
    return MemoryInput(
        content=d["content"],
        namespace=namespace,
        visibility=Visibility(d.get("visibility", "private")),
        network=Network(d.get("network", "experience")),
        memory_type=MemoryType(d.get("memory_type", "episodic")),
        source_kind=d.get("source_kind"),
        source_ref=d.get("source_ref"),
        valid_at=datetime.fromisoformat(d["valid_at"]) if d.get("valid_at") else None,
        important=bool(d.get("important", False)),
        metadata=d.get("metadata") or {},
    )


async def enqueue(
    engine: Engine, agent: str, namespace: str, items: list[dict[str, Any]], *, decide: bool = True
) -> int:
    """Store captured items (JSON objects of :func:`item_from_json`'s shape) for the background
    retain, once ``agent`` may write ``namespace``; secrets are redacted before the inbox holds them.
    Returns the inbox row's id."""
    async with engine.pool.acquire() as conn:
        await access.require_writer(conn, agent, namespace)
        cleaned = redact_deep(items)
        return await conn.fetchval(sql.ENQUEUE, agent, namespace, json.dumps(cleaned, ensure_ascii=False), decide)


async def drain(engine: Engine, *, batch: int = 16) -> int:
    """Retain what is pending (one claimed batch); how many rows were handled. Also removes rows
    past their retention."""
    settings, pool = engine.settings, engine.pool
    async with pool.acquire() as conn:
        rows = await conn.fetch(sql.CLAIM, batch)
        await conn.execute(
            sql.PURGE, settings.capture_inbox_retention_s, settings.capture_inbox_failed_retention_s, engine.clock()
        )
    for row in rows:
        try:
            items = [item_from_json(d, row["namespace"]) for d in json.loads(row["items"])]
            with engine.governor.acting_for(row["agent_id"], row["namespace"]):  # its embed cap: checked at capture
                results = await retain(engine, row["agent_id"], items, decide_writes=row["decide"]) if items else []
        except Exception as exc:  # noqa: BLE001 - kept on the row; retried until MAX_ATTEMPTS
            log.warning("capture inbox row failed", extra={"id": row["id"], "error": type(exc).__name__})
            async with pool.acquire() as conn:
                await conn.execute(sql.FAILED, row["id"], f"{type(exc).__name__}: {exc}"[:2000])
            continue
        async with pool.acquire() as conn:
            if settings.capture_inbox_retention_s > 0:
                await conn.execute(sql.DONE, row["id"], [r.memory_id for r in results if r.memory_id is not None])
            else:
                await conn.execute(sql.REMOVE, row["id"])
    return len(rows)


async def pending(engine: Engine) -> int:
    """Rows waiting to be retained (not failed for good)."""
    async with engine.pool.acquire() as conn:
        return await conn.fetchval(sql.PENDING)
