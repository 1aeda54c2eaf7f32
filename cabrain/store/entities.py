"""SQL over ``entities`` as agents read them: the names memories mention, and the summaries sleep
writes of them (``summary``, ``summary_sources``, ``summarized_at``).

Scoping is that of the memories they come from (:mod:`cabrain.store.scope`):

- listing or opening a namespace's entities needs read access to the namespace (its owner, a read
  grant, an admin), as team recall does; anyone else is told the namespace is not there;
- an entity is shown only while the caller may read at least one memory that mentions it (a name
  only a private memory mentions stays private);
- its summary only when the caller may read *every* memory it was made from, hot or demoted;
  otherwise the entity comes without it (``summary`` and ``summarized_at`` null);
- the memories listed with it are those recall would show the caller.
"""

from __future__ import annotations

import uuid

import asyncpg

from cabrain.errors import AccessDenied, NotFound
from cabrain.fixes import Fix
from cabrain.store.memories import COLUMNS
from cabrain.store.scope import ACCESS_CTE, READABLE, readable_id
from cabrain.types import Entity, EntitySummary

# Fragments over entities aliased ``e`` (they need ACCESS_CTE: $1 namespace, $2 agent).
SUMMARY_READABLE = f"""
(e.summary IS NOT NULL AND cardinality(e.summary_sources) > 0
 AND NOT EXISTS (SELECT 1 FROM unnest(e.summary_sources) AS s(id) WHERE NOT {readable_id("s.id")}))
"""
MENTIONED = f"EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id AND {readable_id('me.memory_id')})"
ENTITY_COLUMNS = """e.id, e.namespace, e.name, e.kind, e.updated_at,
CASE WHEN v.summary_ok THEN e.summary END AS summary,
CASE WHEN v.summary_ok THEN e.summarized_at END AS summarized_at"""

CALLER = f"""
WITH {ACCESS_CTE}
SELECT EXISTS (SELECT 1 FROM namespaces WHERE name = $1) AS namespace_exists,
       (SELECT agent_ok FROM access) AS agent_ok, (SELECT team_ok FROM access) AS team_ok
"""
# $3 cursor (the last key of the page before), $4 key substring, $5 limit.
LIST = f"""
WITH {ACCESS_CTE}
SELECT {ENTITY_COLUMNS}, e.key
FROM entities e
CROSS JOIN LATERAL (SELECT {SUMMARY_READABLE} AS summary_ok) v
WHERE e.namespace = $1
  AND ($3::text IS NULL OR e.key > $3)
  AND ($4::text IS NULL OR strpos(e.key, $4) > 0)
  AND {MENTIONED}
ORDER BY e.key
LIMIT $5
"""
# $3 id or $4 key.
ONE = f"""
WITH {ACCESS_CTE}
SELECT {ENTITY_COLUMNS}
FROM entities e
CROSS JOIN LATERAL (SELECT {SUMMARY_READABLE} AS summary_ok) v
WHERE e.namespace = $1 AND (e.id = $3::uuid OR e.key = $4::text) AND {MENTIONED}
ORDER BY e.id = $3::uuid DESC NULLS LAST
LIMIT 1
"""
# The hot memories that mention entity $3 and the caller may read, newest first: $4 with history
# (superseded and forgotten ones too), $5 limit.
MEMORIES = f"""
WITH {ACCESS_CTE}
SELECT {COLUMNS}
FROM memory_entities me
JOIN memory_ids i ON i.id = me.memory_id AND i.namespace = $1
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE me.entity_id = $3 AND m.tier = 'hot' AND ($4::boolean OR m.invalid_at IS NULL) AND {READABLE}
ORDER BY m.valid_at DESC, m.created_at DESC, m.id
LIMIT $5
"""
# The summaries of the entities recall's hits ($3, best first) mention: the most mentioned first, $4 at most.
RECALL_SUMMARIES = f"""
WITH {ACCESS_CTE},
mentions AS (
    SELECT me.entity_id, count(*) AS hits, min(array_position($3::uuid[], me.memory_id)) AS best,
           array_agg(me.memory_id ORDER BY array_position($3::uuid[], me.memory_id)) AS memory_ids
    FROM memory_entities me
    WHERE me.memory_id = ANY($3::uuid[])
    GROUP BY me.entity_id
)
SELECT e.name, e.summary, e.summarized_at, mn.memory_ids
FROM mentions mn
JOIN entities e ON e.id = mn.entity_id
WHERE e.namespace = $1 AND {SUMMARY_READABLE}
ORDER BY mn.hits DESC, mn.best, e.key
LIMIT $4
"""


def to_entity(row: asyncpg.Record) -> Entity:
    return Entity(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        kind=row["kind"],
        summary=row["summary"],
        summarized_at=row["summarized_at"],
        updated_at=row["updated_at"],
    )


async def require_readable(conn: asyncpg.Connection, namespace: str, agent: str) -> None:
    """:class:`NotFound` unless ``agent`` may read ``namespace`` (a missing namespace and one the agent
    may not read are told apart to nobody)."""
    row = await conn.fetchrow(CALLER, namespace, agent)
    if not row["agent_ok"]:
        raise AccessDenied(f"agent {agent!r} is unknown or disabled")
    if not (row["namespace_exists"] and row["team_ok"]):
        raise NotFound(f"namespace {namespace!r} does not exist or is not visible to {agent!r}")


async def page(
    conn: asyncpg.Connection, namespace: str, agent: str, *, key_part: str | None, after: str | None, limit: int
) -> tuple[list[Entity], str | None]:
    """Up to ``limit`` entities after key ``after`` whose key holds ``key_part``, and the cursor of the
    next page (None on the last)."""
    rows = await conn.fetch(LIST, namespace, agent, after, key_part, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return [to_entity(r) for r in rows], rows[-1]["key"] if more else None


async def one(
    conn: asyncpg.Connection, namespace: str, agent: str, *, entity_id: uuid.UUID | None, key: str, name: str
) -> Entity:
    row = await conn.fetchrow(ONE, namespace, agent, entity_id, key)
    if row is None:
        raise NotFound(
            f"no entity {name!r} in namespace {namespace!r} that {agent!r} can see",
            fix=Fix("list_entities", {"namespace": namespace}),
        )
    return to_entity(row)


async def memories(
    conn: asyncpg.Connection, namespace: str, agent: str, entity_id: uuid.UUID, *, history: bool, limit: int
) -> list[asyncpg.Record]:
    return list(await conn.fetch(MEMORIES, namespace, agent, entity_id, history, limit))


async def recall_summaries(
    conn: asyncpg.Connection, namespace: str, agent: str, hit_ids: list[uuid.UUID], limit: int
) -> list[EntitySummary]:
    rows = await conn.fetch(RECALL_SUMMARIES, namespace, agent, hit_ids, limit)
    return [EntitySummary(r["name"], r["summary"], r["summarized_at"], list(r["memory_ids"])) for r in rows]
