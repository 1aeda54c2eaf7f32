"""Connectors, the items each has seen, and their sync runs (schema 0014); the reads of ``memories``
a sync makes to find what it wrote.

A sync holds the connector's advisory lock (:data:`LOCK`) for as long as it runs, on a connection of
its own: two syncs of one connector never interleave, and a run left ``running`` by a process that
died is marked ``interrupted`` by the next sync to take the lock.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

__all__ = ["LOCK", "UNLOCK", "Connector", "ItemState"]

COLUMNS = (
    "id, name, kind, namespace, visibility, agent_id, config, every_s, status, last_error, cursor, "
    "last_sync_at, next_sync_at, created_at, removed_at"
)
INSERT = f"""
INSERT INTO connectors (id, name, kind, namespace, visibility, agent_id, config, every_s, next_sync_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10)
RETURNING {COLUMNS}
"""
BY_NAME = f"SELECT {COLUMNS} FROM connectors WHERE name = $1 AND removed_at IS NULL"
ALL = f"SELECT {COLUMNS} FROM connectors WHERE removed_at IS NULL ORDER BY name"
DUE = f"""
SELECT {COLUMNS} FROM connectors
WHERE removed_at IS NULL AND every_s IS NOT NULL AND next_sync_at <= $1 AND status <> 'stopped'
ORDER BY next_sync_at
"""
REMOVE = "UPDATE connectors SET removed_at = $2 WHERE id = $1 AND removed_at IS NULL RETURNING id"
SET_STATUS = """
UPDATE connectors SET status = $2, last_error = $3,
       last_sync_at = COALESCE($4, last_sync_at), next_sync_at = COALESCE($5, next_sync_at),
       cursor = COALESCE($6::jsonb, cursor)
WHERE id = $1
"""

# advisory locks: (class, key); the class keeps connectors' locks apart from every other lock
LOCK_CLASS = 0x0C0E
LOCK = "SELECT pg_try_advisory_lock($1, hashtext($2::text))"
UNLOCK = "SELECT pg_advisory_unlock($1, hashtext($2::text))"

ITEMS = "SELECT key, version, stage, url, parts FROM connector_items WHERE connector_id = $1"
SOME_ITEMS = f"{ITEMS} AND key = ANY($2::text[])"
STAGE = """
INSERT INTO connector_items (connector_id, key, url, stage, staged, updated_at)
VALUES ($1, $2, $3, 'staged', $4::jsonb, $5)
ON CONFLICT (connector_id, key) DO UPDATE
SET url = EXCLUDED.url, stage = 'staged', staged = EXCLUDED.staged, updated_at = EXCLUDED.updated_at
"""
STAGED = """
SELECT key, version, url, parts, staged FROM connector_items
WHERE connector_id = $1 AND stage = 'staged' AND key > $2
ORDER BY key LIMIT $3
"""
INDEXED = """
UPDATE connector_items SET version = $3, url = $4, stage = 'indexed', parts = $5::jsonb, staged = NULL, updated_at = $6
WHERE connector_id = $1 AND key = $2
"""
DELETED = """
UPDATE connector_items SET stage = 'deleted', parts = $3::jsonb, staged = NULL, updated_at = $4
WHERE connector_id = $1 AND key = $2
"""

START_RUN = """
INSERT INTO connector_runs (id, connector_id, started_at, status, host) VALUES ($1, $2, $3, 'running', $4)
"""
FINISH_RUN = "UPDATE connector_runs SET finished_at = $2, status = $3, counts = $4::jsonb, error = $5 WHERE id = $1"
PROGRESS = "UPDATE connector_runs SET counts = $2::jsonb WHERE id = $1"
INTERRUPT_STALE = """
UPDATE connector_runs SET status = 'interrupted', finished_at = $2
WHERE connector_id = $1 AND status = 'running' RETURNING id
"""
RUNS = """
SELECT id, started_at, finished_at, status, host, counts, error FROM connector_runs
WHERE connector_id = $1 ORDER BY started_at DESC, id LIMIT $2
"""
RUN = "SELECT id, connector_id, started_at, finished_at, status, host, counts, error FROM connector_runs WHERE id = $1"

# the memories a sync wrote (:mod:`cabrain.connectors.sync`): which are still current, and which a
# connector's write left, found by their provenance (``source_ref``, ``metadata.anchor``)
CURRENT = "SELECT id FROM memories WHERE id = ANY($1::uuid[]) AND invalid_at IS NULL AND tier = 'hot'"
WRITTEN = """
SELECT id, source_ref, metadata->>'anchor' AS anchor FROM memories
WHERE namespace = $1 AND source_kind = $2 AND source_ref = ANY($3::text[]) AND owner_agent_id = $4
  AND metadata->>'connector' = $5 AND invalid_at IS NULL
"""


@dataclass(frozen=True)
class Connector:
    id: uuid.UUID
    name: str
    kind: str
    namespace: str
    visibility: str
    agent_id: str
    config: dict[str, Any]
    every_s: int | None
    status: str
    last_error: str | None
    cursor: dict[str, Any]
    last_sync_at: datetime | None
    next_sync_at: datetime | None
    created_at: datetime
    removed_at: datetime | None

    @classmethod
    def of(cls, row: asyncpg.Record) -> Connector:
        data = dict(row)
        for key in ("config", "cursor"):
            if isinstance(data[key], str):
                data[key] = json.loads(data[key])
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = value.isoformat() if isinstance(value, datetime) else value
        out["id"] = str(self.id)
        return out


@dataclass(frozen=True)
class ItemState:
    """What the connector last did with one item."""

    key: str
    version: str | None
    stage: str
    url: str
    parts: list[dict[str, Any]]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _parts(value: Any) -> list[dict[str, Any]]:
    return list(json.loads(value) if isinstance(value, str) else value or [])


async def insert(conn: asyncpg.Connection, values: dict[str, Any]) -> Connector:
    row = await conn.fetchrow(
        INSERT,
        values["id"],
        values["name"],
        values["kind"],
        values["namespace"],
        values["visibility"],
        values["agent_id"],
        _json(values["config"]),
        values["every_s"],
        values["next_sync_at"],
        values["created_at"],
    )
    return Connector.of(row)


async def by_name(conn: asyncpg.Connection, name: str) -> Connector | None:
    row = await conn.fetchrow(BY_NAME, name)
    return Connector.of(row) if row else None


async def every(conn: asyncpg.Connection) -> list[Connector]:
    return [Connector.of(r) for r in await conn.fetch(ALL)]


async def due(conn: asyncpg.Connection, now: datetime) -> list[Connector]:
    return [Connector.of(r) for r in await conn.fetch(DUE, now)]


async def remove(conn: asyncpg.Connection, connector_id: uuid.UUID, at: datetime) -> bool:
    return await conn.fetchval(REMOVE, connector_id, at) is not None


async def set_status(
    conn: asyncpg.Connection,
    connector_id: uuid.UUID,
    status: str,
    error: str | None,
    *,
    synced_at: datetime | None = None,
    next_at: datetime | None = None,
    cursor: dict[str, Any] | None = None,
) -> None:
    await conn.execute(
        SET_STATUS, connector_id, status, error, synced_at, next_at, _json(cursor) if cursor is not None else None
    )


async def items(conn: asyncpg.Connection, connector_id: uuid.UUID) -> dict[str, ItemState]:
    rows = await conn.fetch(ITEMS, connector_id)
    return {r["key"]: ItemState(r["key"], r["version"], r["stage"], r["url"], _parts(r["parts"])) for r in rows}


async def some_items(conn: asyncpg.Connection, connector_id: uuid.UUID, keys: Sequence[str]) -> dict[str, ItemState]:
    rows = await conn.fetch(SOME_ITEMS, connector_id, list(keys))
    return {r["key"]: ItemState(r["key"], r["version"], r["stage"], r["url"], _parts(r["parts"])) for r in rows}


async def stage(
    conn: asyncpg.Connection, connector_id: uuid.UUID, key: str, url: str, staged: dict[str, Any], at: datetime
) -> None:
    await conn.execute(STAGE, connector_id, key, url, _json(staged), at)


async def staged(
    conn: asyncpg.Connection, connector_id: uuid.UUID, after: str, limit: int
) -> list[tuple[ItemState, dict[str, Any]]]:
    rows = await conn.fetch(STAGED, connector_id, after, limit)
    out = []
    for r in rows:
        pending = json.loads(r["staged"]) if isinstance(r["staged"], str) else dict(r["staged"])
        out.append((ItemState(r["key"], r["version"], "staged", r["url"], _parts(r["parts"])), pending))
    return out


async def indexed(
    conn: asyncpg.Connection,
    connector_id: uuid.UUID,
    key: str,
    version: str,
    url: str,
    parts: Sequence[dict[str, Any]],
    at: datetime,
) -> None:
    await conn.execute(INDEXED, connector_id, key, version, url, _json(list(parts)), at)


async def deleted(
    conn: asyncpg.Connection, connector_id: uuid.UUID, key: str, parts: Sequence[dict[str, Any]], at: datetime
) -> None:
    await conn.execute(DELETED, connector_id, key, _json(list(parts)), at)


async def start_run(
    conn: asyncpg.Connection, run_id: uuid.UUID, connector_id: uuid.UUID, at: datetime, host: str
) -> list[uuid.UUID]:
    """Open a run; returns the runs a dead process had left ``running``, now ``interrupted``."""
    stale = [r["id"] for r in await conn.fetch(INTERRUPT_STALE, connector_id, at)]
    await conn.execute(START_RUN, run_id, connector_id, at, host)
    return stale


async def progress(conn: asyncpg.Connection, run_id: uuid.UUID, counts: dict[str, Any]) -> None:
    await conn.execute(PROGRESS, run_id, _json(counts))


async def finish_run(
    conn: asyncpg.Connection, run_id: uuid.UUID, at: datetime, status: str, counts: dict[str, Any], error: str | None
) -> None:
    await conn.execute(FINISH_RUN, run_id, at, status, _json(counts), error)


def run_json(row: asyncpg.Record) -> dict[str, Any]:
    data = dict(row)
    counts = data["counts"]
    data["counts"] = json.loads(counts) if isinstance(counts, str) else dict(counts or {})
    for key, value in list(data.items()):
        if isinstance(value, datetime):
            data[key] = value.isoformat()
        elif isinstance(value, uuid.UUID):
            data[key] = str(value)
    return data


async def runs(conn: asyncpg.Connection, connector_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    return [run_json(r) for r in await conn.fetch(RUNS, connector_id, limit)]


async def run(conn: asyncpg.Connection, run_id: uuid.UUID) -> dict[str, Any] | None:
    row = await conn.fetchrow(RUN, run_id)
    return run_json(row) if row else None
