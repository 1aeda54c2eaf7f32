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
from cabrain.store import entities as entity_sql
from cabrain.store import judgments
from cabrain.store.entities import ADD_ALIAS, MARK_ALIAS, MOVE_MENTIONS
from cabrain.text.entities import entity_key


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
    for row in await conn.fetch(entity_sql.ALIAS_SPEAKERS, namespace):
        for speaker in row["speakers"]:
            key = entity_key(speaker or "")
            if key and " " not in key:
                speaking.setdefault(key, set()).add(row["thread"])
                names.setdefault(key, speaker.strip())
    beginnings = {key[:n] for key in speaking for n in range(3, len(key))}
    if not beginnings:
        return []
    out = []
    for row in await conn.fetch(entity_sql.ALIAS_SHORTS, namespace, sorted(beginnings)):
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
        others = {r["key"] for r in await conn.fetch(entity_sql.KEYS_BEGINNING, namespace, row["key"])} - {long_key}
        if others or long_key in json.loads(row["refused"]):
            continue  # ambiguous ("Mel": Melanie and Melissa), or a person said no
        long_id = await conn.fetchval(entity_sql.UPSERT_ENTITY, namespace, names[long_key], long_key)
        out.append({"short_id": row["id"], "short_name": row["name"], "long_id": long_id, "long_name": names[long_key]})
    return out


__all__ = ["merge_aliases"]
