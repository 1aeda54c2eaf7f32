"""SQL of pushes: notifiers, subscriptions, events and the outbox (:mod:`cabrain.notify`); and what
the pattern finder reads (``memories``, ``memory_vectors``, its ``sleep_watermarks`` row)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import asyncpg

from cabrain.store.access import ACCESS_CTE, READABLE
from cabrain.store.statement import Statement

# --- notifiers ------------------------------------------------------------------------------------
INSERT_NOTIFIER = """
INSERT INTO notifiers (name, kind, config, secret_env, created_by, created_at) VALUES ($1, $2, $3::jsonb, $4, $5, $6)
ON CONFLICT (name) DO UPDATE SET kind = EXCLUDED.kind, config = EXCLUDED.config, secret_env = EXCLUDED.secret_env,
    created_by = EXCLUDED.created_by, created_at = EXCLUDED.created_at, removed_at = NULL
WHERE notifiers.removed_at IS NOT NULL
RETURNING name
"""
NOTIFIER = "SELECT * FROM notifiers WHERE name = $1 AND removed_at IS NULL"
NOTIFIER_EXISTS = "SELECT 1 FROM notifiers WHERE name = $1 AND removed_at IS NULL"
NOTIFIERS = "SELECT * FROM notifiers WHERE removed_at IS NULL ORDER BY name"
REMOVE_NOTIFIER = "UPDATE notifiers SET removed_at = $2 WHERE name = $1 AND removed_at IS NULL RETURNING name"

# --- subscriptions --------------------------------------------------------------------------------
SUB_COLUMNS = (
    "id, agent_id, subscriber, namespace, kinds, notifier, target, min_importance, max_per_hour, quiet_start, "
    "quiet_end, timezone, created_at"
)
INSERT_SUB = f"""
INSERT INTO subscriptions ({SUB_COLUMNS})
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $13)
"""
SUBS = """
SELECT * FROM subscriptions WHERE ($1::text IS NULL OR agent_id = $1) AND ($2 OR disabled_at IS NULL)
ORDER BY created_at
"""
SUB = "SELECT * FROM subscriptions WHERE id = $1"
DISABLE_SUB = """
UPDATE subscriptions SET disabled_at = $2, disabled_reason = $3 WHERE id = $1 AND disabled_at IS NULL RETURNING id
"""
MATCHING = """
SELECT * FROM subscriptions
WHERE disabled_at IS NULL AND $1 = ANY(kinds) AND (namespace IS NULL OR namespace = $2)
ORDER BY created_at
"""

# --- events ---------------------------------------------------------------------------------------
INSERT_EVENT = """
INSERT INTO notify_events (kind, namespace, finding, importance, title, body, memory_ids, data, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9)
RETURNING id
"""
FINDING_SINCE = "SELECT EXISTS (SELECT 1 FROM notify_events WHERE finding = $1 AND created_at > $2)"
CLAIM_EVENTS = """
SELECT * FROM notify_events WHERE fanned_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED
"""
LATEST = "SELECT coalesce(max(seq), 0) FROM notify_events"
EVENT = "SELECT * FROM notify_events WHERE id = $1"
FANNED = "UPDATE notify_events SET fanned_at = $2, importance = $3 WHERE id = $1"
# The memories behind an event that an agent may read (hot ones; a demoted one is left out).
READABLE_MEMORIES = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT m.id, m.content, m.importance, m.valid_at, m.invalid_at, m.superseded_by, m.metadata
FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.id = ANY(:ids::uuid[]) AND m.namespace = :namespace AND {READABLE}
ORDER BY m.valid_at DESC, m.created_at DESC
"""
)
IMPORTANCE = """
SELECT max(m.importance) FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.id = ANY($1::uuid[])
"""
EVENTS_FOR = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT e.seq, e.id, e.kind, e.namespace, e.finding, e.importance, e.title, e.memory_ids, e.data, e.created_at
FROM notify_events e
WHERE e.seq > :after AND e.namespace = :namespace AND (SELECT team_ok FROM access)
ORDER BY e.seq LIMIT :limit
"""
)
EVENTS_OF_AGENT = """
SELECT e.seq, e.id, e.kind, e.namespace, e.finding, e.importance, e.title, e.memory_ids, e.data, e.created_at
FROM notify_events e
WHERE e.seq > $1
  AND (EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.is_admin AND a.disabled_at IS NULL)
       OR e.namespace IN (SELECT name FROM namespaces WHERE owner_agent_id = $2)
       OR e.namespace IN (SELECT namespace FROM namespace_grants WHERE agent_id = $2 AND can_read))
  AND EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.disabled_at IS NULL)
ORDER BY e.seq LIMIT $3
"""

# --- outbox ---------------------------------------------------------------------------------------
PUSH_OWNER = """
SELECT s.agent_id FROM outbox o LEFT JOIN subscriptions s ON s.id = o.subscription_id WHERE o.id = $1
"""
INSERT_OUTBOX = """
INSERT INTO outbox (event_id, destination, subscription_id, notifier, target, status, reason, next_attempt_at,
                    created_at)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9)
ON CONFLICT (event_id, destination) DO NOTHING
RETURNING id
"""
# The gate's memory of a subscriber: pushes sent or waiting in the last hour, and the same finding lately.
RECENT_PUSHES = """
SELECT count(*) FROM outbox
WHERE subscription_id = $1 AND status IN ('pending', 'delivered') AND created_at > $2
"""
SAME_FINDING = """
SELECT EXISTS (
    SELECT 1 FROM outbox o JOIN notify_events e ON e.id = o.event_id
    WHERE o.subscription_id = $1 AND e.finding = $2 AND o.status IN ('pending', 'delivered') AND o.created_at > $3
)
"""
# Claim due pushes: each claimed row's next attempt moves past the lease, so another replica (or
# this one, after a crash) only takes it again once the lease ran out.
CLAIM_DUE = """
UPDATE outbox o SET attempts = o.attempts + 1, next_attempt_at = $2
FROM (SELECT id FROM outbox WHERE status = 'pending' AND next_attempt_at <= $1
      ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED) due
WHERE o.id = due.id
RETURNING o.*
"""
DELIVERED = """
UPDATE outbox SET status = 'delivered', delivered_at = $2, message_ref = $3, last_error = NULL, reason = NULL
WHERE id = $1
"""
RETRY = "UPDATE outbox SET next_attempt_at = $2, last_error = $3 WHERE id = $1"
FAILED = "UPDATE outbox SET status = 'failed', last_error = $2 WHERE id = $1"
RELEASE = """
UPDATE outbox SET status = 'pending', next_attempt_at = $2, reason = 'released by ' || $3, attempts = 0
WHERE id = $1 AND status IN ('suppressed', 'failed') RETURNING id
"""
OUTBOX = """
SELECT o.*, e.kind, e.namespace, e.title, e.finding, s.subscriber FROM outbox o
JOIN notify_events e ON e.id = o.event_id LEFT JOIN subscriptions s ON s.id = o.subscription_id
WHERE ($1::text IS NULL OR o.status = $1)
  AND ($2::text IS NULL OR s.agent_id = $2)
ORDER BY o.created_at DESC LIMIT $3
"""

# --- patterns (:mod:`cabrain.notify.patterns`): memories since the last look, and their neighbours -----
PATTERN_NAMESPACES = """
SELECT DISTINCT coalesce(s.namespace, n.name) AS namespace
FROM subscriptions s JOIN namespaces n ON s.namespace IS NULL OR n.name = s.namespace
WHERE s.disabled_at IS NULL AND 'pattern' = ANY(s.kinds)
"""
WATERMARK = "SELECT upto FROM sleep_watermarks WHERE namespace = $1 AND step = $2"
SET_WATERMARK = """
INSERT INTO sleep_watermarks (namespace, step, upto) VALUES ($1, $2, $3)
ON CONFLICT (namespace, step) DO UPDATE SET upto = greatest(sleep_watermarks.upto, EXCLUDED.upto)
"""
# a memory's session: its chat thread, else its source, else itself
SESSION_OF = "coalesce(m.metadata->>'thread', m.source_ref, m.id::text)"
FRESH = f"""
SELECT m.id, m.embedding, m.importance, m.created_at, {SESSION_OF} AS session
FROM memories m
WHERE m.namespace = $1 AND m.created_at > $2 AND m.tier = 'hot' AND m.invalid_at IS NULL AND m.embedding IS NOT NULL
ORDER BY m.created_at, m.id LIMIT $3
"""
NEIGHBOURS = f"""
SELECT m.id, m.importance, m.created_at, {SESSION_OF} AS session, 1 - (v.embedding <=> $2) AS similarity
FROM memory_vectors v JOIN memories m ON m.id = v.id AND m.valid_at = v.valid_at
WHERE v.namespace = $1 AND m.invalid_at IS NULL AND m.id <> $3
ORDER BY v.embedding <=> $2 LIMIT 20
"""


def decoded(row: asyncpg.Record | dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in ("config", "target", "data", "metadata"):
        if isinstance(out.get(key), str):
            out[key] = json.loads(out[key])
    return out


async def insert_event(
    conn: asyncpg.Connection,
    kind: str,
    namespace: str | None,
    finding: str,
    *,
    now: datetime,
    importance: float | None = None,
    title: str | None = None,
    body: str | None = None,
    memory_ids: list[uuid.UUID] | None = None,
    data: dict[str, Any] | None = None,
) -> uuid.UUID:
    return await conn.fetchval(
        INSERT_EVENT,
        kind,
        namespace,
        finding,
        importance,
        title,
        body,
        memory_ids or [],
        json.dumps(data or {}, default=str, ensure_ascii=False),
        now,
    )


async def readable_memories(
    conn: asyncpg.Connection, agent: str, namespace: str, ids: list[uuid.UUID]
) -> list[dict[str, Any]]:
    args = READABLE_MEMORIES.args(agent=agent, namespace=namespace, ids=ids)
    return [decoded(r) for r in await conn.fetch(READABLE_MEMORIES.sql, *args)]


async def events_for(
    conn: asyncpg.Connection, agent: str, *, after: int, namespace: str | None, limit: int
) -> list[dict[str, Any]]:
    """Events of namespaces ``agent`` may read team memories of (one, or all), after ``seq``."""
    if namespace is not None:
        args = EVENTS_FOR.args(agent=agent, namespace=namespace, after=after, limit=limit)
        rows = await conn.fetch(EVENTS_FOR.sql, *args)
    else:
        rows = await conn.fetch(EVENTS_OF_AGENT, after, agent, limit)
    return [decoded(r) for r in rows]
