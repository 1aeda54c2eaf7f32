"""SQL over ``memories`` and its satellites (``memory_ids``, ``memory_chunks``, ``memory_sources``,
``memory_events``). Functions take a connection; callers own transactions."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
import numpy as np
from pgvector import Vector

from cabrain.store.access import ACCESS_CTE, NAMESPACE_OF, READABLE, readable_id
from cabrain.store.statement import Statement
from cabrain.types import Memory, MemoryType, Network, Visibility

COLUMNS = """m.id, m.namespace, m.owner_agent_id, m.visibility, m.network, m.memory_type, m.content,
m.source_kind, m.source_ref, m.importance, m.access_count, m.last_accessed_at, m.created_at,
m.valid_at, m.invalid_at, m.superseded_by, m.tier, m.metadata"""


def to_memory(row: Mapping[str, Any], *, tier: str | None = None) -> Memory:
    """A row as a :class:`Memory`: a hot row (``COLUMNS``) or a cold one (the cold tier's columns,
    ids as text: ``tier`` "cold"). The one place a row becomes a memory."""
    metadata = row["metadata"]
    superseded_by = row["superseded_by"]
    return Memory(
        id=_uuid(row["id"]),
        namespace=row["namespace"],
        owner_agent_id=row["owner_agent_id"],
        visibility=Visibility(row["visibility"]),
        network=Network(row["network"]),
        memory_type=MemoryType(row["memory_type"]),
        content=row["content"],
        source_kind=row["source_kind"],
        source_ref=row["source_ref"],
        importance=float(row["importance"]),
        access_count=int(row["access_count"]),
        last_accessed_at=row["last_accessed_at"],
        created_at=row["created_at"],
        valid_at=row["valid_at"],
        invalid_at=row["invalid_at"],
        superseded_by=_uuid(superseded_by) if superseded_by else None,
        tier=tier or row["tier"],
        metadata=json.loads(metadata) if isinstance(metadata, str) else dict(metadata or {}),
    )


def _uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


# The rows, and each namespace's counter, in one statement.
INSERT_MEMORIES = """
WITH added AS (
    INSERT INTO memories (id, namespace, owner_agent_id, visibility, network, memory_type, content,
                          source_kind, source_ref, embedding, importance, valid_at, metadata, content_hash,
                          pinned, thread_turn)
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                         $7::text[], $8::text[], $9::text[], $10::vector[], $11::real[],
                         $12::timestamptz[], $13::jsonb[], $14::bytea[], $15::boolean[], $16::int[])
    RETURNING namespace
)
UPDATE namespaces n SET memory_count = n.memory_count + c.added
FROM (SELECT namespace, count(*) AS added FROM added GROUP BY namespace) c
WHERE n.name = c.namespace
"""

# An archived memory back in the hot tier, as it was (the register trigger re-registers its identity).
RESTORE_ROW = """
WITH restored AS (
    INSERT INTO memories (id, namespace, owner_agent_id, visibility, network, memory_type, content, source_kind,
                          source_ref, embedding, importance, access_count, last_accessed_at, created_at, valid_at,
                          metadata, content_hash, pinned, invalid_at, superseded_by, consolidated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16::jsonb, $17, $18, $19, $20, $21)
    RETURNING namespace
)
UPDATE namespaces SET memory_count = memory_count + 1 WHERE name = (SELECT namespace FROM restored)
"""


def as_vector(values: Any) -> Vector:
    """A vector (a list or an array) as pgvector's type."""
    return Vector(np.asarray(values, dtype=np.float32))


async def insert_memories(conn: asyncpg.Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert many memories in one statement (``rows`` hold the INSERT_MEMORIES columns; ``pinned``
    may be left out: not pinned; ``thread_turn`` too: not a numbered turn of a thread)."""
    cols = [
        "id",
        "namespace",
        "owner_agent_id",
        "visibility",
        "network",
        "memory_type",
        "content",
        "source_kind",
        "source_ref",
        "embedding",
        "importance",
        "valid_at",
        "metadata",
        "content_hash",
    ]
    args = [[r[c] for r in rows] for c in cols]
    args += [[bool(r.get("pinned", False)) for r in rows], [r.get("thread_turn") for r in rows]]
    args[9] = [Vector(np.asarray(v, dtype=np.float32)) if v is not None else None for v in args[9]]
    args[12] = [json.dumps(m, ensure_ascii=False) for m in args[12]]
    await conn.execute(INSERT_MEMORIES, *args)


INSERT_CHUNKS = """
INSERT INTO memory_chunks (memory_id, chunk_no, namespace, valid_at, content, embedding)
SELECT * FROM unnest($1::uuid[], $2::smallint[], $3::text[], $4::timestamptz[], $5::text[], $6::vector[])
"""
COUNT_CHUNKS = """
UPDATE namespaces n SET chunk_count = n.chunk_count + c.added
FROM unnest($1::text[], $2::bigint[]) AS c(name, added)
WHERE n.name = c.name
"""


async def insert_chunks(conn: asyncpg.Connection, rows: Sequence[tuple]) -> None:
    """Insert passages: ``rows`` of (memory_id, chunk_no, namespace, valid_at, content, embedding)."""
    if not rows:
        return
    cols = list(zip(*rows, strict=True))
    vectors = [Vector(np.asarray(v, dtype=np.float32)) for v in cols[5]]
    await conn.execute(
        INSERT_CHUNKS, list(cols[0]), list(cols[1]), list(cols[2]), list(cols[3]), list(cols[4]), vectors
    )
    await _count(conn, COUNT_CHUNKS, cols[2])


async def _count(conn: asyncpg.Connection, statement: str, namespaces: Sequence[str]) -> None:
    """Add one per occurrence of each namespace to its counter (``statement``: COUNT_*)."""
    counts: dict[str, int] = {}
    for namespace in namespaces:
        counts[namespace] = counts.get(namespace, 0) + 1
    names = sorted(counts)
    await conn.execute(statement, names, [counts[n] for n in names])


NAMESPACE_SIZE = "SELECT memory_count FROM namespaces WHERE name = $1"


# One memory the agent may read, in any state.
GET_READABLE = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT {COLUMNS}
FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.id = :id AND i.namespace = :namespace AND {READABLE}
"""
)
# The record of a forget, on the memory's identity (hot or demoted): archive recall leaves it out, and
# the cold tier's purge (CABRAIN_COLD_FORGOTTEN_RETENTION_DAYS) finds it there. $1 id, $2 agent, $3 reason.
FORGET_IDENTITY = """
UPDATE memory_ids SET forgotten_at = coalesce(forgotten_at, now()), forgotten_by = coalesce(forgotten_by, $2),
                      forget_reason = coalesce(forget_reason, $3)
WHERE id = $1
"""
# A demoted memory the agent may read (owner and visibility are kept on its identity row when it
# leaves the hot tier).
COLD_READABLE = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT i.valid_at, i.cold_batch, i.demoted_at, i.forgotten_at, i.forgotten_by, i.forget_reason, i.purged_at,
       i.owner_agent_id, i.visibility
FROM memory_ids i
WHERE i.id = :id AND i.namespace = :namespace AND i.tier = 'cold' AND (SELECT agent_ok FROM access)
  AND (i.visibility = 'global' OR i.owner_agent_id = :agent
       OR (i.visibility = 'team' AND (SELECT team_ok FROM access)))
"""
)
# Current memories of a namespace by provenance (NULL kind or prefix: any).
LIST_CURRENT = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT {COLUMNS}
FROM memories m
WHERE m.namespace = :namespace AND m.tier = 'hot' AND m.invalid_at IS NULL
  AND (:source_kind::text IS NULL OR m.source_kind = :source_kind)
  AND (:prefix::text IS NULL OR starts_with(m.source_ref, :prefix))
  AND {READABLE}
ORDER BY m.source_ref NULLS LAST, m.created_at
LIMIT :limit
"""
)

# The version chain around a memory: what it replaced (recursively) and what replaced it.
PREVIOUS_VERSIONS = Statement(
    f"""
WITH RECURSIVE {ACCESS_CTE},
chain(id, depth) AS (
    SELECT m.id, 1 FROM memories m WHERE m.superseded_by = :id AND m.namespace = :namespace
    UNION ALL
    SELECT m.id, c.depth + 1 FROM memories m JOIN chain c ON m.superseded_by = c.id
    WHERE c.depth < 100
)
SELECT {COLUMNS} FROM chain c
JOIN memory_ids i ON i.id = c.id
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE {READABLE}
ORDER BY m.valid_at, m.created_at
"""
)
NEXT_VERSIONS = Statement(
    f"""
WITH RECURSIVE {ACCESS_CTE},
chain(id, depth) AS (
    SELECT m.superseded_by, 1 FROM memory_ids i
    JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
    WHERE i.id = :id AND m.superseded_by IS NOT NULL
    UNION ALL
    SELECT m.superseded_by, c.depth + 1 FROM chain c
    JOIN memory_ids i ON i.id = c.id
    JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
    WHERE m.superseded_by IS NOT NULL AND c.depth < 100
)
SELECT {COLUMNS} FROM chain c
JOIN memory_ids i ON i.id = c.id
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE {READABLE}
ORDER BY c.depth
"""
)
ENTITIES_OF = """
SELECT e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id
WHERE me.memory_id = $1 ORDER BY e.name
"""

# $1 id, $2 reason (jsonb metadata merge), $3 superseded_by (nullable). Identity goes through memory_ids.
INVALIDATE = """
UPDATE memories m SET invalid_at = COALESCE(m.invalid_at, now()),
                      superseded_by = COALESCE($3, m.superseded_by),
                      metadata = m.metadata || $2::jsonb
FROM memory_ids i
WHERE i.id = $1 AND m.id = i.id AND m.valid_at = i.valid_at
RETURNING m.invalid_at
"""

# Reinforce a memory that was written again (a NOOP write) or recalled.
REINFORCE = """
UPDATE memories m SET access_count = m.access_count + 1,
                      last_accessed_at = now(),
                      importance = LEAST(1.0, m.importance + $2)
FROM memory_ids i
WHERE i.id = $1 AND m.id = i.id AND m.valid_at = i.valid_at
"""

# --- the write path (cabrain.write.writer, cabrain.write.threads) ---------------------------------------
FIND_EXACT_MANY = """
SELECT m.id, m.content_hash, m.source_ref, m.valid_at, m.metadata FROM memories m
WHERE m.namespace = $1 AND m.content_hash = ANY($2::bytea[])
  AND m.invalid_at IS NULL AND m.tier = 'hot'
  AND (m.visibility <> 'private' OR m.owner_agent_id = $3)
"""
CURRENT_FOR_UPDATE = """
SELECT m.invalid_at IS NULL FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.id = $1 FOR UPDATE OF m
"""
IMPORTANCE = (
    "SELECT m.importance FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at WHERE i.id = $1"
)
# The thread's latest turns (current or not: the numbering counts every turn), newest first.
# A conversation's turns (cabrain.write.threads): one thread's ($2 the thread), or one writer's turns
# with a speaker and no thread ($2 the writer). Each statement in both forms, keyed by the form.
_CONVERSATION = {
    "thread": "namespace = $1 AND metadata ? 'thread' AND metadata ->> 'thread' = $2 AND thread_turn IS NOT NULL",
    "writer": "namespace = $1 AND owner_agent_id = $2 AND NOT metadata ? 'thread' AND thread_turn IS NOT NULL",
}
# its latest $3 turns in time ($4 NULL), or the latest at or before $4
LATEST_TURNS = {
    form: f"""
SELECT thread_turn, valid_at, metadata ->> 'sitting' AS sitting, metadata ->> 'thread' AS thread, content,
       owner_agent_id, visibility, invalid_at IS NULL AND tier = 'hot' AS usable
FROM memories
WHERE {where} AND ($4::timestamptz IS NULL OR valid_at <= $4::timestamptz)
ORDER BY valid_at DESC, thread_turn DESC
LIMIT $3
"""
    for form, where in _CONVERSATION.items()
}
# the number of its last turn
LAST_TURN = {
    form: f"SELECT thread_turn FROM memories WHERE {where} ORDER BY thread_turn DESC LIMIT 1"
    for form, where in _CONVERSATION.items()
}

# --- archived identities (cabrain.search.lookup, cabrain.search.archive) --------------------------------
# Archived identities of a namespace whose source_kind is not known yet (demoted before schema 0010).
ARCHIVED_UNKNOWN_KIND = "SELECT id FROM memory_ids WHERE namespace = $1 AND tier = 'cold' AND source_kind IS NULL"
SET_ARCHIVED_KIND = """
UPDATE memory_ids i SET source_kind = k.kind FROM unnest($1::uuid[], $2::text[]) AS k(id, kind) WHERE i.id = k.id
"""
ARCHIVED_OF_KIND = """
SELECT id FROM memory_ids WHERE namespace = $1 AND tier = 'cold' AND source_kind = $2 AND forgotten_at IS NULL
ORDER BY id
"""
# Of these ids, the ones whose identity says they live in the cold tier (in this namespace).
COLD_IDS = """
SELECT id FROM memory_ids WHERE namespace = $1 AND id = ANY($2::uuid[]) AND tier = 'cold' AND forgotten_at IS NULL
"""
# Provenance around archive recall's hits, in both directions, limited to what the agent may read.
LINKS = Statement(
    f"""
WITH {ACCESS_CTE},
edges AS (
    SELECT s.source_id AS hit, s.memory_id AS other, s.relation, 'derived' AS direction
    FROM memory_sources s WHERE s.source_id = ANY(:hits::uuid[])
    UNION ALL
    SELECT s.memory_id, s.source_id, s.relation, 'source'
    FROM memory_sources s WHERE s.memory_id = ANY(:hits::uuid[])
)
SELECT e.hit, e.other, e.relation, e.direction
FROM edges e
WHERE {readable_id("e.other")}
ORDER BY e.hit, e.direction, e.other
"""
)

# Among a recall's candidates, each distilled fact with a turn it was distilled from: the two are
# one answer (cabrain.search.recall folds the lower-ranked into the other).
DISTILLED_PAIRS = """
SELECT memory_id, source_id FROM memory_sources
WHERE relation = 'distilled_from' AND memory_id = ANY($1::uuid[]) AND source_id = ANY($1::uuid[])
"""

INSERT_EVENTS = """
INSERT INTO memory_events (namespace, op, memory_id, agent_id, latency_ms, metadata)
SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::int[], $6::jsonb[])
"""


async def insert_events(conn: asyncpg.Connection, events: Sequence[dict[str, Any]]) -> None:
    if not events:
        return
    await conn.execute(
        INSERT_EVENTS,
        [e["namespace"] for e in events],
        [e["op"] for e in events],
        [e.get("memory_id") for e in events],
        [e.get("agent_id") for e in events],
        [e.get("latency_ms") for e in events],
        [json.dumps(e.get("metadata", {}), ensure_ascii=False, default=str) for e in events],
    )


async def readable_memory(conn: asyncpg.Connection, agent: str, memory_id: uuid.UUID) -> Memory | None:
    """The memory if it exists and ``agent`` may read it, else None (the two are not told apart)."""
    namespace = await conn.fetchval(NAMESPACE_OF, memory_id)
    if namespace is None:
        return None
    row = await get_readable(conn, namespace, agent, memory_id)
    return to_memory(row) if row else None


async def get_readable(
    conn: asyncpg.Connection, namespace: str, agent: str, memory_id: uuid.UUID
) -> asyncpg.Record | None:
    """The row of a hot memory of ``namespace`` that ``agent`` may read, in any state."""
    return await conn.fetchrow(GET_READABLE.sql, *GET_READABLE.args(namespace=namespace, agent=agent, id=memory_id))


async def cold_readable(
    conn: asyncpg.Connection, namespace: str, agent: str, memory_id: uuid.UUID
) -> asyncpg.Record | None:
    """The identity row of a demoted memory of ``namespace`` that ``agent`` may read."""
    return await conn.fetchrow(COLD_READABLE.sql, *COLD_READABLE.args(namespace=namespace, agent=agent, id=memory_id))


async def list_current(
    conn: asyncpg.Connection,
    namespace: str,
    agent: str,
    *,
    source_kind: str | None,
    prefix: str | None,
    limit: int,
) -> list[asyncpg.Record]:
    """Current hot memories of ``namespace`` that ``agent`` may read, by provenance."""
    args = LIST_CURRENT.args(namespace=namespace, agent=agent, source_kind=source_kind, prefix=prefix, limit=limit)
    return list(await conn.fetch(LIST_CURRENT.sql, *args))


async def versions(
    conn: asyncpg.Connection, namespace: str, agent: str, memory_id: uuid.UUID, *, after: bool
) -> list[asyncpg.Record]:
    """The readable versions that ``memory_id`` replaced (``after`` False, oldest first) or that
    replaced it (``after`` True, in order)."""
    statement = NEXT_VERSIONS if after else PREVIOUS_VERSIONS
    return list(await conn.fetch(statement.sql, *statement.args(namespace=namespace, agent=agent, id=memory_id)))
