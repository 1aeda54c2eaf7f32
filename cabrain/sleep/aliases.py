"""Aliases merge: "Mel" is Melanie where the conversation says so, as a judgment that can be undone.

A short name is taken for a nickname of a longer one when, in one namespace:

- both are single words and the short one (at least 3 letters) begins the long one ("Mel" /
  "Melanie", "Caro" / "Caroline") and begins no other entity's name (an ambiguous nickname stays
  apart), and
- the conversation ties them: the short name is mentioned in a sitting (``metadata.thread``) where
  the long name speaks (``metadata.speaker``), as "Hey Mel!" is in a chat Melanie takes part in.

The merge moves the short entity's mentions to the long one (the short entity stays, marked
``alias_of``; the long one lists it among its ``aliases``), so recall's entity hop, the entity's
page and its summary gather both. Each merge is one ``alias`` judgment of the run, with the
mentions it moved: reverting it (or the run) puts them back and clears the marks. A nickname merged
once is merged again as new mentions come, night by night, until a revert: a reverted pair is not
merged again.
"""

from __future__ import annotations

import json
import uuid

import asyncpg

from cabrain.sleep.context import StepContext, StepResult
from cabrain.store import judgments
from cabrain.store.entities import ADD_ALIAS, MARK_ALIAS, MOVE_MENTIONS
from cabrain.write.entities import entity_key

# Who speaks in which sitting of the namespace (read once per step, only the speakers' turns).
SPEAKERS = """
SELECT metadata ->> 'thread' AS thread, array_agg(DISTINCT metadata ->> 'speaker') AS speakers
FROM memories
WHERE namespace = $1 AND tier = 'hot' AND metadata ? 'speaker' AND metadata ? 'thread'
GROUP BY 1
"""
# One-word entities whose key is one of $2 (beginnings of speakers' names) and that are mentioned,
# with the sittings that mention them (a nickname merged before: its new mentions, to move).
SHORTS = """
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
BEGINNING = "SELECT key FROM entities WHERE namespace = $1 AND left(key, length($2)) = $2 AND key <> $2"
UPSERT = """
INSERT INTO entities (namespace, name, key) VALUES ($1, $2, $3)
ON CONFLICT (namespace, key) DO UPDATE SET updated_at = now()
RETURNING id
"""


async def merge_aliases(ctx: StepContext, namespace: str, result: StepResult) -> set[uuid.UUID]:
    """Merge the namespace's nicknames into the names they stand for (module docstring); the long
    entities that gained mentions (their summaries to refresh)."""
    pool = await ctx.pool()
    touched: set[uuid.UUID] = set()
    async with pool.acquire() as conn, conn.transaction():
        for pair in await _pairs(conn, namespace):
            moved = await conn.fetchrow(MOVE_MENTIONS, pair["short_id"], pair["long_id"])
            await conn.execute(MARK_ALIAS, pair["short_id"], str(pair["long_id"]))
            await conn.execute(ADD_ALIAS, pair["long_id"], pair["short_name"])
            judgment = judgments.Judgment(
                namespace,
                "alias",
                "consolidate",
                f"{pair['short_name']!r} is {pair['long_name']!r}: named in a sitting where {pair['long_name']} speaks",
                run_id=ctx.run_id,
                inputs={"short": pair["short_name"], "long": pair["long_name"]},
                related=set(moved["moved"] or ()),  # the mentions it moved: it shows on them, read-checked
                entities=[
                    {
                        "entity_id": str(pair["short_id"]),
                        "name": pair["short_name"],
                        "alias_of": str(pair["long_id"]),
                        "long_name": pair["long_name"],
                        "long_key": entity_key(pair["long_name"]),
                        "moved": [str(m) for m in moved["moved"] or ()],
                        "added": [str(m) for m in moved["added"] or ()],
                    }
                ],
            )
            await judgments.record(conn, judgment)
            touched.add(pair["long_id"])
            result.add("aliases_merged")
            result.change(action="alias merged", entity=pair["short_name"], into=pair["long_name"])
    return touched


async def _pairs(conn: asyncpg.Connection, namespace: str) -> list[dict]:
    """(short, long) pairs to merge: a nickname that begins exactly one name - the one speaking in a
    sitting that mentions it - and no other entity's name, and was never refused for it."""
    speaking: dict[str, set[str]] = {}  # speaker's key -> the sittings they speak in
    names: dict[str, str] = {}
    for row in await conn.fetch(SPEAKERS, namespace):
        for speaker in row["speakers"]:
            key = entity_key(speaker or "")
            if key and " " not in key:
                speaking.setdefault(key, set()).add(row["thread"])
                names.setdefault(key, speaker.strip())
    beginnings = {key[:n] for key in speaking for n in range(3, len(key))}
    if not beginnings:
        return []
    out = []
    for row in await conn.fetch(SHORTS, namespace, sorted(beginnings)):
        if row["alias_of"] is not None:  # merged before: what mentions it since moves too
            if row["long_name"] is not None:
                out.append(
                    {
                        "short_id": row["id"],
                        "short_name": row["name"],
                        "long_id": uuid.UUID(row["alias_of"]),
                        "long_name": row["long_name"],
                    }
                )
            continue
        threads = set(row["threads"] or ())
        longs = {k for k in speaking if k.startswith(row["key"]) and k != row["key"] and speaking[k] & threads}
        if len(longs) != 1:
            continue
        [long_key] = longs
        others = {r["key"] for r in await conn.fetch(BEGINNING, namespace, row["key"])} - {long_key}
        if others or long_key in json.loads(row["refused"]):
            continue  # ambiguous ("Mel": Melanie and Melissa), or a person said no
        long_id = await conn.fetchval(UPSERT, namespace, names[long_key], long_key)
        out.append({"short_id": row["id"], "short_name": row["name"], "long_id": long_id, "long_name": names[long_key]})
    return out


__all__ = ["merge_aliases"]
