"""Idempotent retains (schema 0011): the answer to each keyed retain, stored in the transaction
that wrote its memories.

A retry with the same key - after a dropped connection, a timeout, a client's own retry - finds
the stored answer and writes nothing; had the first attempt not committed, there is no answer and
the retry writes, once. The same key for a different request is refused (:class:`ConflictError`),
never answered with the other request's results. Keys are kept ``CABRAIN_IDEMPOTENCY_TTL_S``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from cabrain.errors import ConflictError, InputError
from cabrain.types import MemoryInput, RetainResult, retain_from_dict, to_json

MAX_KEY_CHARS = 200
LOOKUP = "SELECT request, results FROM retain_requests WHERE agent_id = $1 AND key = $2"
SAVE = """
INSERT INTO retain_requests (agent_id, key, request, results, created_at) VALUES ($1, $2, $3, $4::jsonb, $5)
"""
PURGE = "DELETE FROM retain_requests WHERE agent_id = $1 AND created_at < $2"


def check_key(key: str) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS or not key.isprintable():
        raise InputError(f"an idempotency key is 1 to {MAX_KEY_CHARS} printable characters")
    return key


def new_key() -> str:
    """A key for one request that came without one (made before its first attempt)."""
    return f"auto:{uuid.uuid4()}"


def digest(*parts: Any) -> bytes:
    """A request's parts (JSON-like) as one digest."""
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str).encode()).digest()


def fingerprint(items: Sequence[MemoryInput], *, decide: bool, supersede: uuid.UUID | None) -> bytes:
    """What a retain asks, as a digest: a key names one request, not whatever comes with it."""
    parts: list[Any] = [decide, str(supersede) if supersede else None]
    for item in items:
        parts.append(
            [
                item.content,
                item.namespace,
                str(item.visibility),
                str(item.network),
                str(item.memory_type),
                item.source_kind,
                item.source_ref,
                item.valid_at.isoformat() if item.valid_at else None,
                item.metadata,
                item.importance,
                item.important,
            ]
        )
    return digest(*parts)


async def answered(conn: asyncpg.Connection, agent: str, key: str, request: bytes) -> list[RetainResult] | None:
    """The stored answer to ``key``, or None if it has none (yet)."""
    row = await conn.fetchrow(LOOKUP, agent, key)
    if row is None:
        return None
    if bytes(row["request"]) != request:
        raise ConflictError(
            f"idempotency key {key!r} was used for another retain",
            hint="use a fresh key for each new request, and the same key only to retry it",
        )
    results = row["results"]
    if isinstance(results, str):
        results = json.loads(results)
    return [retain_from_dict(r) for r in results]


async def save(
    conn: asyncpg.Connection,
    agent: str,
    key: str,
    request: bytes,
    results: Sequence[RetainResult],
    *,
    now: datetime,
    ttl_s: float,
) -> None:
    """Store the answer (in the caller's write transaction) and drop this agent's expired keys."""
    await conn.execute(PURGE, agent, now - timedelta(seconds=ttl_s))
    payload = json.dumps([to_json(r) for r in results], ensure_ascii=False)
    await conn.execute(SAVE, agent, key, request, payload, now)
