"""SQL of chat channels (``channels``, ``channel_receipts``) and the live agent's issues
(``live_issues``): :mod:`cabrain.channels`."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import asyncpg

COLUMNS = (
    "name, kind, namespace, visibility, agent_id, secret_env, verify_token_env, notifier, live_agent, tracker, "
    "options, created_by, created_at, removed_at"
)
INSERT = f"""
INSERT INTO channels ({COLUMNS})
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13, NULL)
ON CONFLICT (name) DO UPDATE SET
    kind = EXCLUDED.kind, namespace = EXCLUDED.namespace, visibility = EXCLUDED.visibility,
    agent_id = EXCLUDED.agent_id, secret_env = EXCLUDED.secret_env, verify_token_env = EXCLUDED.verify_token_env,
    notifier = EXCLUDED.notifier, live_agent = EXCLUDED.live_agent, tracker = EXCLUDED.tracker,
    options = EXCLUDED.options, created_by = EXCLUDED.created_by, created_at = EXCLUDED.created_at, removed_at = NULL
WHERE channels.removed_at IS NOT NULL
RETURNING name
"""
ONE = f"SELECT {COLUMNS} FROM channels WHERE name = $1 AND removed_at IS NULL"
ALL = f"SELECT {COLUMNS} FROM channels WHERE removed_at IS NULL ORDER BY name"
REMOVE = "UPDATE channels SET removed_at = $2 WHERE name = $1 AND removed_at IS NULL RETURNING name"
# what deciding a held action by chat needs of a channel (:mod:`cabrain.actions`)
FOR_APPROVAL = "SELECT kind, namespace, options FROM channels WHERE name = $1 AND removed_at IS NULL"
RECEIPT = """
INSERT INTO channel_receipts (channel, event_id, received_at, memory_ids) VALUES ($1, $2, $3, $4)
ON CONFLICT (channel, event_id) DO NOTHING RETURNING event_id
"""
SEEN = "SELECT event_id FROM channel_receipts WHERE channel = $1 AND event_id = ANY($2::text[])"

INSERT_ISSUE = """
INSERT INTO live_issues (id, channel, thread, reply_to, tracker, kind, project, ref, url, title, filed_by,
                         memory_ids, created_at)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (tracker, ref) DO UPDATE SET tracker = EXCLUDED.tracker
RETURNING id
"""
OPEN_ISSUES = """
SELECT * FROM live_issues WHERE linked_at IS NULL AND (checked_at IS NULL OR checked_at <= $1)
ORDER BY checked_at NULLS FIRST LIMIT $2 FOR UPDATE SKIP LOCKED
"""
CHECKED = "UPDATE live_issues SET checked_at = $2 WHERE id = $1"
LINKED = "UPDATE live_issues SET checked_at = $2, linked_at = $2, links = $3::jsonb WHERE id = $1"
ISSUES = "SELECT * FROM live_issues WHERE ($1::text IS NULL OR channel = $1) ORDER BY created_at DESC LIMIT $2"


def to_channel(row: asyncpg.Record) -> dict[str, Any]:
    out = dict(row)
    if isinstance(out["options"], str):
        out["options"] = json.loads(out["options"])
    return out


async def insert(conn: asyncpg.Connection, channel: dict[str, Any], created_by: str, now: datetime) -> bool:
    """Add a channel; False when one of that name exists (and was not removed)."""
    made = await conn.fetchval(
        INSERT,
        channel["name"],
        channel["kind"],
        channel["namespace"],
        channel["visibility"],
        channel["agent_id"],
        channel["secret_env"],
        channel.get("verify_token_env"),
        channel.get("notifier"),
        channel.get("live_agent"),
        channel.get("tracker"),
        json.dumps(channel.get("options") or {}),
        created_by,
        now,
    )
    return made is not None


async def one(conn: asyncpg.Connection, name: str) -> dict[str, Any] | None:
    row = await conn.fetchrow(ONE, name)
    return to_channel(row) if row is not None else None


async def every(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    return [to_channel(r) for r in await conn.fetch(ALL)]


async def remove(conn: asyncpg.Connection, name: str, now: datetime) -> bool:
    return await conn.fetchval(REMOVE, name, now) is not None


async def seen(conn: asyncpg.Connection, channel: str, event_ids: list[str]) -> set[str]:
    return {r["event_id"] for r in await conn.fetch(SEEN, channel, event_ids)}


async def receipt(
    conn: asyncpg.Connection, channel: str, event_id: str, now: datetime, memory_ids: list[uuid.UUID]
) -> bool:
    """Record an accepted event; False when it was recorded before (a replay or a retry)."""
    return await conn.fetchval(RECEIPT, channel, event_id, now, memory_ids) is not None


async def insert_issue(conn: asyncpg.Connection, issue: dict[str, Any]) -> uuid.UUID:
    return await conn.fetchval(
        INSERT_ISSUE,
        issue["id"],
        issue["channel"],
        issue["thread"],
        json.dumps(issue["reply_to"]),
        issue["tracker"],
        issue["kind"],
        issue["project"],
        issue["ref"],
        issue["url"],
        issue["title"],
        issue["filed_by"],
        issue["memory_ids"],
        issue["created_at"],
    )


async def issues(conn: asyncpg.Connection, channel: str | None, limit: int = 100) -> list[dict[str, Any]]:
    out = []
    for row in await conn.fetch(ISSUES, channel, limit):
        item = dict(row)
        for key in ("reply_to", "links"):
            if isinstance(item[key], str):
                item[key] = json.loads(item[key])
        out.append(item)
    return out
