"""SQL over ``entities`` as agents read them: the names memories mention, and the summaries sleep
writes of them (``summary``, ``summary_sources``, ``summarized_at``).

Scoping is that of the memories they come from (:mod:`cabrain.store.access`):

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
from typing import Any

import asyncpg

from cabrain.errors import InputError, NotFound
from cabrain.fixes import Fix
from cabrain.store.access import ACCESS_CTE, READABLE, RECALL_FILTER, readable_id
from cabrain.store.memories import COLUMNS
from cabrain.store.statement import Statement
from cabrain.types import Entity, EntitySummary, RelatedEntity

# Fragments over entities aliased ``e`` (they need ACCESS_CTE).
SUMMARY_READABLE = f"""
(e.summary IS NOT NULL AND cardinality(e.summary_sources) > 0
 AND NOT EXISTS (SELECT 1 FROM unnest(e.summary_sources) AS s(id) WHERE NOT {readable_id("s.id")}))
"""


# "Some memory the caller may read mentions it" (entities aliased ``e``): at once for an entity a
# current hot team or global memory mentions (the kept count, migration 0023: every reader of the
# namespace's entities reads those), else looked for among its links (mentioned only by the caller's
# own private memories, by superseded, forgotten or archived ones, or by no readable memory at all).
def mentioned(alias: str = "e") -> str:
    return f"""({alias}.mentions > 0 OR EXISTS (
    SELECT 1 FROM memory_entities me WHERE me.entity_id = {alias}.id AND {readable_id("me.memory_id")}))"""


# The same for a list, as a join that looks at one entity at a time (a LATERAL with a LIMIT is never
# flattened): a planner that hashes the readable memories of a whole namespace for an EXISTS would
# read every one of them; the list's condition is then ``seen.at IS NOT NULL``.
SEEN = f"""
LEFT JOIN LATERAL (
    SELECT 1 AS at WHERE e.mentions > 0
    UNION ALL
    (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id AND {readable_id("me.memory_id")} LIMIT 1)
    LIMIT 1
) seen ON true"""
ENTITY_COLUMNS = """e.id, e.namespace, e.name, e.kind, e.updated_at,
CASE WHEN v.summary_ok THEN e.summary END AS summary,
CASE WHEN v.summary_ok THEN e.summarized_at END AS summarized_at,
e.mentions, (SELECT p.n FROM entity_private_mentions p WHERE p.entity_id = e.id AND p.owner_agent_id = :agent) AS own,
(e.metadata ->> 'merged_into')::uuid AS merged_into"""

# A page of entities after the key :after (the last of the page before) whose key holds :part.
LIST = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT {ENTITY_COLUMNS}, e.key
FROM entities e
CROSS JOIN LATERAL (SELECT {SUMMARY_READABLE} AS summary_ok) v{SEEN}
WHERE e.namespace = :namespace
  AND (:after::text IS NULL OR e.key > :after)
  AND (:part::text IS NULL OR strpos(e.key, :part) > 0)
  AND seen.at IS NOT NULL
ORDER BY e.key
LIMIT :limit
"""
)
# The same, the most mentioned first (by the current team and global memories that mention them: the
# count every reader of the namespace shares, kept in ``entities.mentions``; migration 0023), after the
# entity (:after_n, :after) ending the page before.
BY_MENTIONS = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT {ENTITY_COLUMNS}, e.key
FROM entities e
CROSS JOIN LATERAL (SELECT {SUMMARY_READABLE} AS summary_ok) v{SEEN}
WHERE e.namespace = :namespace
  AND (:after::text IS NULL OR e.mentions < :after_n::int OR (e.mentions = :after_n::int AND e.key > :after))
  AND (:part::text IS NULL OR strpos(e.key, :part) > 0)
  AND seen.at IS NOT NULL
ORDER BY e.mentions DESC, e.key
LIMIT :limit
"""
)
# One entity, by :id or :key (one merged into another is shown while that one is).
ONE = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT {ENTITY_COLUMNS}
FROM entities e
CROSS JOIN LATERAL (SELECT {SUMMARY_READABLE} AS summary_ok) v
WHERE e.namespace = :namespace AND (e.id = :id::uuid OR e.key = :key::text)
  AND ({mentioned("e")} OR EXISTS (SELECT 1 FROM entities t WHERE t.id = (e.metadata ->> 'merged_into')::uuid
                                   AND {mentioned("t")}))
ORDER BY e.id = :id::uuid DESC NULLS LAST
LIMIT 1
"""
)
# A window of an entity's links, newest first, after the link (:after_at, :after_id) ending the window
# before, each with the hot memory it names when the caller may read it and it is current (or :history);
# otherwise its columns are null: the walk goes on past it and it is never shown. The links are read by
# their own time (memory_entities.valid_at, migration 0025), so a page reads about as many rows as it
# shows, however often the entity is mentioned.
LINKED = Statement(
    f"""
WITH {ACCESS_CTE},
links AS MATERIALIZED (
    SELECT me.memory_id, me.valid_at FROM memory_entities me
    WHERE me.entity_id = :entity
      AND (:after_at::timestamptz IS NULL OR (me.valid_at, me.memory_id) < (:after_at::timestamptz, :after_id::uuid))
    ORDER BY me.valid_at DESC, me.memory_id DESC
    LIMIT :window
)
SELECT l.valid_at AS link_at, l.memory_id AS link_id, {COLUMNS}
FROM links l
LEFT JOIN memories m ON m.id = l.memory_id AND m.valid_at = l.valid_at AND m.namespace = :namespace
     AND m.tier = 'hot' AND (:history::boolean OR m.invalid_at IS NULL) AND {READABLE}
ORDER BY l.valid_at DESC, l.memory_id DESC
"""
)
LINK_WINDOW = 100  # links read in a first window (then four times as many each time, up to LINK_WINDOW_MAX)
LINK_WINDOW_MAX = 20_000
# The entities of the namespace that the memories :ids mention (the graph's other nodes).
MENTIONED_BY = Statement(
    """
SELECT me.memory_id, e.id AS entity_id, e.name, e.kind
FROM memory_entities me
JOIN entities e ON e.id = me.entity_id AND e.namespace = :namespace
WHERE me.memory_id = ANY(:ids::uuid[])
ORDER BY e.key
"""
)
# The entities :entity shares facts with (current hot facts the caller may read that mention both),
# among its newest RELATED_MENTIONS mentions (bounded, whatever the namespace's size or how few of them
# are facts): the graph's entity-to-entity edges, the most shared first.
RELATED_MENTIONS = 5000
RELATED = Statement(
    f"""
WITH {ACCESS_CTE},
newest AS (
    SELECT a.memory_id, a.valid_at FROM memory_entities a
    WHERE a.entity_id = :entity
    ORDER BY a.valid_at DESC
    LIMIT {RELATED_MENTIONS}
),
facts AS (
    SELECT m.id
    FROM newest a
    JOIN memories m ON m.id = a.memory_id AND m.valid_at = a.valid_at
    WHERE m.namespace = :namespace AND m.network = 'fact' AND m.tier = 'hot' AND m.invalid_at IS NULL AND {READABLE}
)
SELECT e.id, e.name, e.kind, count(*) AS shared
FROM facts f
JOIN memory_entities b ON b.memory_id = f.id AND b.entity_id <> :entity
JOIN entities e ON e.id = b.entity_id AND e.namespace = :namespace
GROUP BY e.id, e.name, e.kind
ORDER BY shared DESC, e.name
LIMIT :limit
"""
)
# The summaries of the entities recall's :hits (best first) mention: the most mentioned first.
RECALL_SUMMARIES = Statement(
    f"""
WITH {ACCESS_CTE},
mentions AS (
    SELECT me.entity_id, count(*) AS hits, min(array_position(:hits::uuid[], me.memory_id)) AS best,
           array_agg(me.memory_id ORDER BY array_position(:hits::uuid[], me.memory_id)) AS memory_ids
    FROM memory_entities me
    WHERE me.memory_id = ANY(:hits::uuid[])
    GROUP BY me.entity_id
)
SELECT e.name, e.summary, e.summarized_at, mn.memory_ids
FROM mentions mn
JOIN entities e ON e.id = mn.entity_id
WHERE e.namespace = :namespace AND {SUMMARY_READABLE}
ORDER BY mn.hits DESC, mn.best, e.key
LIMIT :limit
"""
)


def to_entity(row: asyncpg.Record) -> Entity:
    return Entity(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        kind=row["kind"],
        summary=row["summary"],
        summarized_at=row["summarized_at"],
        updated_at=row["updated_at"],
        mentions=int(row["mentions"]),
        own_private_mentions=int(row["own"] or 0),
        merged_into=row["merged_into"],
    )


async def page(
    conn: asyncpg.Connection,
    namespace: str,
    agent: str,
    *,
    key_part: str | None,
    after: str | None,
    limit: int,
    by_mentions: bool = False,
) -> tuple[list[Entity], str | None]:
    """Up to ``limit`` entities after cursor ``after`` whose key holds ``key_part``, in key order (or
    the most mentioned first), and the cursor of the next page (None on the last). A cursor by
    mentions is ``"<mentions>:<key>"``; a malformed one is :class:`InputError`."""
    if by_mentions:
        count, _, key = (after or "").partition(":")
        if after is not None and not count.isdigit():
            raise InputError(f"cursor {after!r} is not one this listing gave (by mentions)")
        args = BY_MENTIONS.args(
            namespace=namespace,
            agent=agent,
            after=key if after is not None else None,
            after_n=int(count) if after is not None else None,
            part=key_part,
            limit=limit + 1,
        )
        rows = await conn.fetch(BY_MENTIONS.sql, *args)
    else:
        args = LIST.args(namespace=namespace, agent=agent, after=after, part=key_part, limit=limit + 1)
        rows = await conn.fetch(LIST.sql, *args)
    more = len(rows) > limit
    rows = rows[:limit]
    if not more:
        return [to_entity(r) for r in rows], None
    last = rows[-1]
    return [to_entity(r) for r in rows], f"{last['mentions']}:{last['key']}" if by_mentions else last["key"]


async def one(
    conn: asyncpg.Connection, namespace: str, agent: str, *, entity_id: uuid.UUID | None, key: str, name: str
) -> Entity:
    row = await conn.fetchrow(ONE.sql, *ONE.args(namespace=namespace, agent=agent, id=entity_id, key=key))
    if row is None:
        raise NotFound(
            f"no entity {name!r} in namespace {namespace!r} that {agent!r} can see",
            fix=Fix("entities", {"namespace": namespace}),
        )
    return to_entity(row)


async def memories(
    conn: asyncpg.Connection, namespace: str, agent: str, entity_id: uuid.UUID, *, history: bool, limit: int
) -> list[asyncpg.Record]:
    """The newest ``limit`` hot memories mentioning the entity that ``agent`` may read (``history``:
    superseded and forgotten ones too), newest first: the entity's links walked a window at a time."""
    found: list[asyncpg.Record] = []
    after: tuple = (None, None)
    window = max(LINK_WINDOW, 2 * limit)
    while True:
        args = LINKED.args(
            namespace=namespace,
            agent=agent,
            entity=entity_id,
            history=history,
            after_at=after[0],
            after_id=after[1],
            window=window,
        )
        rows = await conn.fetch(LINKED.sql, *args)
        found.extend(r for r in rows if r["id"] is not None)
        if len(found) >= limit or len(rows) < window:
            return found[:limit]
        after = (rows[-1]["link_at"], rows[-1]["link_id"])
        window = min(window * 4, LINK_WINDOW_MAX)


async def related(
    conn: asyncpg.Connection, namespace: str, agent: str, entity_id: uuid.UUID, *, limit: int
) -> list[RelatedEntity]:
    args = RELATED.args(namespace=namespace, agent=agent, entity=entity_id, limit=limit)
    return [RelatedEntity(r["id"], r["name"], r["kind"], r["shared"]) for r in await conn.fetch(RELATED.sql, *args)]


async def neighbourhood(
    conn: asyncpg.Connection, namespace: str, agent: str, entity_id: uuid.UUID, *, limit: int
) -> list[dict[str, Any]]:
    """The entity's newest ``limit`` current hot memories ``agent`` may read, and every entity of the
    namespace each mentions: one row (``memory_id``, ``content``, ``entity_id``, ``name``, ``kind``) per
    memory and entity, the newest memory first."""
    shown = await memories(conn, namespace, agent, entity_id, history=False, limit=limit)
    args = MENTIONED_BY.args(namespace=namespace, ids=[m["id"] for m in shown])
    by_memory: dict[uuid.UUID, list[asyncpg.Record]] = {}
    for r in await conn.fetch(MENTIONED_BY.sql, *args):
        by_memory.setdefault(r["memory_id"], []).append(r)
    return [
        {
            "memory_id": m["id"],
            "content": m["content"][:200],
            "entity_id": e["entity_id"],
            "name": e["name"],
            "kind": e["kind"],
        }
        for m in shown
        for e in by_memory.get(m["id"], [])
    ]


async def recall_summaries(
    conn: asyncpg.Connection, namespace: str, agent: str, hit_ids: list[uuid.UUID], limit: int
) -> list[EntitySummary]:
    args = RECALL_SUMMARIES.args(namespace=namespace, agent=agent, hits=hit_ids, limit=limit)
    rows = await conn.fetch(RECALL_SUMMARIES.sql, *args)
    return [EntitySummary(r["name"], r["summary"], r["summarized_at"], list(r["memory_ids"])) for r in rows]


# --- naming and linking on write (cabrain.write.writer, cabrain.sleep.writing) ---------------------------
KNOWN_ENTITY_KEYS = "SELECT key FROM entities WHERE namespace = $1 AND key = ANY($2::text[])"
# The entities (by key) and the memories' links to them, in one statement (a name merged into another
# entity by a person links to that one).
UPSERT_AND_LINK = """
WITH up AS (
    INSERT INTO entities (namespace, name, key)
    SELECT $1, t.name, t.key FROM unnest($2::text[], $3::text[]) AS t(name, key) ORDER BY t.key
    ON CONFLICT (namespace, key) DO UPDATE SET updated_at = now()
    RETURNING id, key, (metadata ->> 'merged_into')::uuid AS merged_into
)
INSERT INTO memory_entities (memory_id, entity_id)
SELECT l.memory_id, coalesce(up.merged_into, up.id) FROM unnest($4::uuid[], $5::text[]) AS l(memory_id, key) JOIN up USING (key)
ORDER BY 1, 2
ON CONFLICT DO NOTHING
"""

# --- aliases (cabrain.sleep.aliases) and undoing them (cabrain.store.judgments) -------------------------
# Who speaks in which sitting of the namespace (read once per step, only the speakers' turns).
ALIAS_SPEAKERS = """
SELECT metadata ->> 'thread' AS thread, array_agg(DISTINCT metadata ->> 'speaker') AS speakers
FROM memories
WHERE namespace = $1 AND tier = 'hot' AND metadata ? 'speaker' AND metadata ? 'thread'
GROUP BY 1
"""
# One-word entities whose key is one of $2 (beginnings of speakers' names) and that are mentioned,
# with the sittings that mention them (a nickname merged before: its new mentions, to move).
ALIAS_SHORTS = """
SELECT e.id, e.name, e.key, coalesce(e.metadata -> 'not_alias_of', '[]'::jsonb)::text AS refused,
       e.metadata ->> 'alias_of' AS alias_of, (SELECT l.name FROM entities l WHERE l.id::text = e.metadata ->> 'alias_of') AS long_name,
       array_agg(DISTINCT m.metadata ->> 'thread') FILTER (WHERE m.metadata ? 'thread') AS threads
FROM entities e
JOIN memory_entities me ON me.entity_id = e.id
JOIN memory_ids i ON i.id = me.memory_id AND i.tier = 'hot'
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE e.namespace = $1 AND e.key = ANY($2::text[])
GROUP BY e.id, e.name, e.key, e.metadata
ORDER BY e.key
"""
# every entity key of the namespace that begins with $2 (is the nickname ambiguous?)
KEYS_BEGINNING = "SELECT key FROM entities WHERE namespace = $1 AND left(key, length($2)) = $2 AND key <> $2"
UPSERT_ENTITY = """
INSERT INTO entities (namespace, name, key) VALUES ($1, $2, $3)
ON CONFLICT (namespace, key) DO UPDATE SET updated_at = now()
RETURNING id
"""


# the ids of these keys' entities
ENTITY_IDS = "SELECT id FROM entities WHERE namespace = $1 AND key = ANY($2::text[])"
# the short entity's mentions the long one lacks move to it (those it has already are only unlinked)
MOVE_MENTIONS = """
WITH gone AS (DELETE FROM memory_entities WHERE entity_id = $1 RETURNING memory_id),
added AS (
    INSERT INTO memory_entities (memory_id, entity_id) SELECT memory_id, $2 FROM gone
    ON CONFLICT DO NOTHING RETURNING memory_id
)
SELECT (SELECT array_agg(memory_id) FROM gone) AS moved, (SELECT array_agg(memory_id) FROM added) AS added
"""
MARK_ALIAS = """
UPDATE entities SET metadata = metadata || jsonb_build_object('alias_of', $2::text), updated_at = now() WHERE id = $1
"""
ADD_ALIAS = """
UPDATE entities
SET metadata = jsonb_set(metadata, '{aliases}', coalesce(metadata -> 'aliases', '[]'::jsonb) || to_jsonb($2::text)),
    updated_at = now()
WHERE id = $1 AND NOT coalesce(metadata -> 'aliases', '[]'::jsonb) ? $2
"""


async def unmerge_alias(conn: asyncpg.Connection, entry: dict) -> dict:
    """Put an alias merge (:mod:`cabrain.sleep.aliases`) back: the short entity's mentions return,
    the marks go, and the pair is not merged again. The undo's own entry (reverting it merges them
    again)."""
    short, long = uuid.UUID(entry["entity_id"]), uuid.UUID(entry["alias_of"])
    await conn.execute(
        "DELETE FROM memory_entities WHERE entity_id = $1 AND memory_id = ANY($2::uuid[])",
        long,
        [uuid.UUID(m) for m in entry["added"]],
    )
    await conn.execute(
        "INSERT INTO memory_entities (memory_id, entity_id) SELECT m, $1 FROM unnest($2::uuid[]) AS m "
        "ON CONFLICT DO NOTHING",
        short,
        [uuid.UUID(m) for m in entry["moved"]],
    )
    await conn.execute(
        "UPDATE entities SET metadata = (metadata - 'alias_of') || jsonb_build_object('not_alias_of', "
        "coalesce(metadata -> 'not_alias_of', '[]'::jsonb) || to_jsonb($2::text)), updated_at = now() WHERE id = $1",
        short,
        entry["long_key"],  # refused by a person: not merged again
    )
    await conn.execute(
        "UPDATE entities SET metadata = jsonb_set(metadata, '{aliases}', "
        "coalesce((SELECT jsonb_agg(a) FROM jsonb_array_elements(metadata -> 'aliases') a WHERE a <> to_jsonb($2::text)),"
        " '[]'::jsonb)), updated_at = now() WHERE id = $1",
        long,
        entry["name"],
    )
    return {**entry, "unmerged": True}


async def merge_alias_again(conn: asyncpg.Connection, entry: dict) -> dict:
    """Merge again what :func:`unmerge_alias` put back (a revert of the revert)."""
    short, long = uuid.UUID(entry["entity_id"]), uuid.UUID(entry["alias_of"])
    moved = await conn.fetchrow(MOVE_MENTIONS, short, long)
    await conn.execute(
        "UPDATE entities SET metadata = jsonb_set(metadata, '{not_alias_of}', coalesce((SELECT jsonb_agg(x) FROM "
        "jsonb_array_elements(metadata -> 'not_alias_of') x WHERE x <> to_jsonb($2::text)), '[]'::jsonb)) "
        "|| jsonb_build_object('alias_of', $3::text), updated_at = now() WHERE id = $1",
        short,
        entry["long_key"],
        str(long),
    )
    await conn.execute(ADD_ALIAS, long, entry["name"])
    return {
        **{k: v for k, v in entry.items() if k != "unmerged"},
        "moved": [str(m) for m in moved["moved"] or ()],
        "added": [str(m) for m in moved["added"] or ()],
    }


# --- recall's one hop: the memories that share an entity with the hits (cabrain.search.recall) ---
ONE_HOP = Statement(
    f"""
WITH {ACCESS_CTE},
hit_entities AS (
    SELECT DISTINCT entity_id FROM memory_entities WHERE memory_id = ANY(:hits::uuid[])
),
linked AS (
    SELECT l.memory_id, count(*) AS shared
    FROM hit_entities h
    CROSS JOIN LATERAL (
        SELECT me.memory_id FROM memory_entities me WHERE me.entity_id = h.entity_id LIMIT 200
    ) l
    WHERE l.memory_id <> ALL(:hits::uuid[])
    GROUP BY l.memory_id
)
SELECT {COLUMNS}, l.shared
FROM linked l
JOIN memory_ids i ON i.id = l.memory_id
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE {RECALL_FILTER}
ORDER BY l.shared DESC, m.importance DESC, m.valid_at DESC
LIMIT :limit
"""
)
