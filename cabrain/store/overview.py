"""The overview's reads: counts kept as memories change (``memory_counts``, schema 0022), activity
per hour (``activity_hours``), the newest sleep runs, pending actions, and the size of the hot tier.

Nothing here scans memories: each read is over a table of groups (a namespace holds a few dozen
rows in ``memory_counts`` and at most 3 x 168 a week in ``activity_hours``, per writer and
visibility for what was retained), so its cost does not grow with the number of memories.

Scoping follows :mod:`cabrain.store.access`: a namespace is seen *whole* by its owner, an agent
with a read grant on it, and admins; the counts an agent is shown are those of the memories it may
read there (global ones, its own, team ones where it sees the namespace whole), never another
agent's private ones. Recalls and judgments are activity in a namespace as a whole, shown only
where the agent sees it whole. Who sees a namespace whole is also told how many private memories
of others it holds (a number, as the namespace list tells its owner and admins its size).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from cabrain.providers.cold_store import open_catalog
from cabrain.settings import Settings

# Namespaces the agent sees whole (owner, read grant, admin): $1 the agent.
_WHOLE = """
me AS (SELECT coalesce(bool_or(is_admin), false) AS admin FROM agents WHERE id = $1 AND disabled_at IS NULL),
whole AS (
    SELECT n.name FROM namespaces n, me
    WHERE me.admin OR n.owner_agent_id = $1
       OR EXISTS (SELECT 1 FROM namespace_grants g WHERE g.namespace = n.name AND g.agent_id = $1 AND g.can_read)
)
"""
# A counted row (alias c: visibility, owner_agent_id, namespace) the agent may read.
_READABLE = "(c.visibility = 'global' OR c.owner_agent_id = $1 OR (c.visibility = 'team' AND c.namespace IN (SELECT name FROM whole)))"

# $1 agent, $2 namespace (NULL: every one)
COUNTS = f"""
WITH {_WHOLE}
SELECT c.namespace, c.tier, c.memory_type, c.source_kind, c.state, sum(c.n)::bigint AS n
FROM memory_counts c
WHERE ($2::text IS NULL OR c.namespace = $2) AND {_READABLE}
GROUP BY 1, 2, 3, 4, 5 HAVING sum(c.n) > 0
ORDER BY 1, 2, 3, 4, 5
"""
# Others' private memories, per namespace the agent sees whole (never what they are).
HIDDEN = f"""
WITH {_WHOLE}
SELECT c.namespace, sum(c.n)::bigint AS n FROM memory_counts c
WHERE ($2::text IS NULL OR c.namespace = $2) AND c.namespace IN (SELECT name FROM whole)
  AND c.visibility = 'private' AND c.owner_agent_id <> $1
GROUP BY 1 HAVING sum(c.n) > 0
"""
WHOLE = f"WITH {_WHOLE} SELECT name FROM whole ORDER BY name"

# $1 agent, $2 namespace or NULL, $3 since, $4 until: per hour and kind.
ACTIVITY = f"""
WITH {_WHOLE}
SELECT c.hour, c.kind, sum(c.n)::bigint AS n FROM activity_hours c
WHERE c.hour >= $3 AND c.hour < $4 AND ($2::text IS NULL OR c.namespace = $2)
  AND CASE WHEN c.kind = 'retained' THEN {_READABLE} ELSE c.namespace IN (SELECT name FROM whole) END
GROUP BY 1, 2 ORDER BY 1, 2
"""
# The namespace the agent may read that was written to last ($1 agent).
LAST_WRITTEN = f"""
WITH {_WHOLE}
SELECT c.namespace FROM activity_hours c
WHERE c.kind = 'retained' AND c.hour > $2 AND {_READABLE}
ORDER BY c.hour DESC, c.last_at DESC NULLS LAST, c.n DESC LIMIT 1
"""

# Sleep runs started in a window, touching a namespace in $2 (every run: $1 admin).
RUN_STARTS = """
SELECT started_at FROM sleep_runs
WHERE started_at >= $3 AND started_at < $4 AND ($1::boolean OR namespaces && $2::text[])
"""
LAST_RUNS = """
SELECT id, started_at, finished_at, status, namespaces FROM sleep_runs
WHERE $1::boolean OR namespaces && $2::text[]
ORDER BY started_at DESC LIMIT $3
"""
# Actions pending that the agent may see (as cabrain.store.actions.LIST does): $1 admin, $2 agent, $3 now.
PENDING = """
SELECT count(*) FROM pending_actions a
WHERE a.status = 'pending' AND a.expires_at > $3
  AND ($1::boolean OR a.agent_id = $2 OR a.namespace IN (SELECT name FROM namespaces WHERE owner_agent_id = $2))
"""
IS_ADMIN = "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND disabled_at IS NULL AND is_admin)"

# The hot tier on disk: memories (every partition), their identities, passages, postings, entities
# and events, with their indexes and TOAST (catalog sizes: no table is read).
HOT_SIZE = """
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
WHERE c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'public.memories'::regclass)
   OR c.oid IN (SELECT to_regclass('public.' || t) FROM unnest(ARRAY['memory_ids', 'memory_chunks', 'memory_terms',
        'bm25_terms', 'memory_vectors', 'entities', 'memory_entities', 'memory_sources', 'memory_events',
        'judgments']) AS t)
"""


async def counts(conn: asyncpg.Connection, agent: str, namespace: str | None) -> list[asyncpg.Record]:
    return list(await conn.fetch(COUNTS, agent, namespace))


async def hidden(conn: asyncpg.Connection, agent: str, namespace: str | None) -> dict[str, int]:
    return {r["namespace"]: r["n"] for r in await conn.fetch(HIDDEN, agent, namespace)}


async def whole(conn: asyncpg.Connection, agent: str) -> list[str]:
    return [r["name"] for r in await conn.fetch(WHOLE, agent)]


async def activity(
    conn: asyncpg.Connection, agent: str, namespace: str | None, since: datetime, until: datetime
) -> list[asyncpg.Record]:
    return list(await conn.fetch(ACTIVITY, agent, namespace, since, until))


async def last_written(conn: asyncpg.Connection, agent: str, since: datetime) -> str | None:
    return await conn.fetchval(LAST_WRITTEN, agent, since)


async def run_starts(
    conn: asyncpg.Connection, admin: bool, namespaces: list[str], since: datetime, until: datetime
) -> list[datetime]:
    return [r["started_at"] for r in await conn.fetch(RUN_STARTS, admin, namespaces, since, until)]


async def last_runs(conn: asyncpg.Connection, admin: bool, namespaces: list[str], limit: int) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch(LAST_RUNS, admin, namespaces, limit)]


async def pending(conn: asyncpg.Connection, admin: bool, agent: str, now: datetime) -> int:
    return int(await conn.fetchval(PENDING, admin, agent, now))


async def is_admin(conn: asyncpg.Connection, agent: str) -> bool:
    return bool(await conn.fetchval(IS_ADMIN, agent))


async def hot_size(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(HOT_SIZE))


def cold_size(settings: Settings) -> tuple[int, int]:
    """The cold tier's bytes and records, from its current snapshot's summary (the catalog is read,
    no data file is listed); (0, 0) before the first demotion made its table."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError  # heavy: with the cold tier

    from cabrain.store.cold import TABLE  # pyiceberg loads with the cold tier, not with the brain

    catalog = open_catalog(settings)
    try:
        table = catalog.load_table(TABLE)
    except (NoSuchTableError, NoSuchNamespaceError):
        return 0, 0
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return 0, 0
    props = getattr(snapshot.summary, "additional_properties", None) or {}
    return int(props.get("total-files-size", 0)), int(props.get("total-records", 0))
