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

# One-word names (at least 3 letters, not merged yet), each with the speakers of the sittings that
# mention it: a nickname's candidates for the name it stands for.
SHORTS = """
WITH shorts AS (
    SELECT id, name, key, metadata FROM entities
    WHERE namespace = $1 AND key !~ '\\s' AND length(key) >= 3 AND metadata ->> 'alias_of' IS NULL
)
SELECT s.id, s.name, s.key, coalesce(s.metadata -> 'not_alias_of', '[]'::jsonb)::text AS refused,
       array_agg(DISTINCT t.metadata ->> 'speaker') AS speakers
FROM shorts s
JOIN memory_entities me ON me.entity_id = s.id
JOIN memory_ids i ON i.id = me.memory_id AND i.tier = 'hot'
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
JOIN memories t ON t.namespace = $1 AND t.metadata ->> 'thread' = m.metadata ->> 'thread'
WHERE m.metadata ? 'thread' AND t.metadata ? 'speaker'
GROUP BY s.id, s.name, s.key, s.metadata
ORDER BY s.key
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
    out = []
    for row in await conn.fetch(SHORTS, namespace):
        longs = {
            entity_key(sp): sp.strip()
            for sp in row["speakers"]
            if sp
            and entity_key(sp).startswith(row["key"])
            and entity_key(sp) != row["key"]
            and " " not in entity_key(sp)
        }
        if len(longs) != 1:
            continue
        [(long_key, long_name)] = longs.items()
        others = {r["key"] for r in await conn.fetch(BEGINNING, namespace, row["key"])} - {long_key}
        if others or long_key in json.loads(row["refused"]):
            continue  # ambiguous ("Mel": Melanie and Melissa), or a person said no
        long_id = await conn.fetchval(UPSERT, namespace, long_name, long_key)
        out.append({"short_id": row["id"], "short_name": row["name"], "long_id": long_id, "long_name": long_name})
    return out


__all__ = ["merge_aliases"]
