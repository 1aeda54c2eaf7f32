"""SQL of a person's changes to entities (:mod:`cabrain.entity_care`): a rename (the display name,
and the key it is matched on with it) and a merge (every memory link of one entity moves to another;
the merged one is kept, marked ``merged_into``, with its summary), and their undoing for
:mod:`cabrain.store.judgments`.

Each returns the entry its judgment records in ``entities``; undoing one returns the entry of the
undo, which undoes in turn (a revert of a revert). A rename's entry is ``{"change": "rename",
"entity_id", "name", "before": {"name", "key"}, "after": {"name", "key"}}``; a merge's ``{"change":
"merge", "entity_id", "name", "into", "into_name", "moved", "added"}`` (``moved``: every memory the
merged entity was linked to; ``added``: those of them the target was not linked to yet), with
``"unmerged": true`` once undone.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from cabrain.errors import ConflictError, NotFound
from cabrain.store.entities import MOVE_MENTIONS

# The entities of :namespace by id, locked (in id order: two merges never wait on each other).
LOCK = """
SELECT id, name, key, (metadata ->> 'merged_into')::uuid AS merged_into FROM entities
WHERE namespace = $1 AND id = ANY($2::uuid[]) ORDER BY id FOR UPDATE
"""
LOCK_ONE = """
SELECT id, namespace, name, key, (metadata ->> 'merged_into')::uuid AS merged_into FROM entities WHERE id = $1
FOR UPDATE
"""
# another entity of the namespace already called this (by key or by name)
TAKEN = "SELECT name FROM entities WHERE namespace = $1 AND (key = $2 OR name = $3) AND id <> $4 LIMIT 1"
SET_NAME = "UPDATE entities SET name = $2, key = $3, updated_at = now() WHERE id = $1"
MARK_MERGED = """
UPDATE entities SET metadata = metadata || jsonb_build_object('merged_into', $2::text), updated_at = now()
WHERE id = $1
"""
UNMARK_MERGED = "UPDATE entities SET metadata = metadata - 'merged_into', updated_at = now() WHERE id = $1"
UNLINK = "DELETE FROM memory_entities WHERE entity_id = $1 AND memory_id = ANY($2::uuid[])"
RELINK = """
INSERT INTO memory_entities (memory_id, entity_id) SELECT m, $1 FROM unnest($2::uuid[]) AS m ORDER BY m
ON CONFLICT DO NOTHING
"""


def _name(row: asyncpg.Record) -> dict[str, str]:
    return {"name": row["name"], "key": row["key"]}


async def _require_free(conn: asyncpg.Connection, namespace: str, entity_id: uuid.UUID, name: str, key: str) -> None:
    other = await conn.fetchval(TAKEN, namespace, key, name, entity_id)
    if other is not None:
        raise ConflictError(
            f"namespace {namespace!r} has an entity called {other!r} already",
            hint=f"merge this entity into {other!r} instead (entities merge), or choose another name",
        )


async def rename(conn: asyncpg.Connection, namespace: str, entity_id: uuid.UUID, name: str, key: str) -> dict[str, Any]:
    """Call the entity ``name`` (matched on ``key`` from now on). In the caller's transaction."""
    rows = await conn.fetch(LOCK, namespace, [entity_id])
    if not rows:
        raise NotFound(f"no entity {entity_id} in namespace {namespace!r}")
    before = _name(rows[0])
    if before == {"name": name, "key": key}:
        raise ConflictError(f"entity {name!r} is called that already")
    await _require_free(conn, namespace, entity_id, name, key)
    await conn.execute(SET_NAME, entity_id, name, key)
    return {
        "change": "rename",
        "entity_id": str(entity_id),
        "name": before["name"],
        "before": before,
        "after": {"name": name, "key": key},
    }


async def merge(conn: asyncpg.Connection, namespace: str, source: uuid.UUID, into: uuid.UUID) -> dict[str, Any]:
    """Move every memory link of entity ``source`` to ``into`` and mark ``source`` merged into it. In
    the caller's transaction."""
    if source == into:
        raise ConflictError("an entity cannot be merged into itself")
    rows = {r["id"]: r for r in await conn.fetch(LOCK, namespace, [source, into])}
    for entity_id in (source, into):
        if entity_id not in rows:
            raise NotFound(f"no entity {entity_id} in namespace {namespace!r}")
    if rows[source]["merged_into"] is not None:
        raise ConflictError(f"entity {rows[source]['name']!r} was merged already (into {rows[source]['merged_into']})")
    if rows[into]["merged_into"] is not None:
        raise ConflictError(
            f"entity {rows[into]['name']!r} was itself merged into another",
            hint=f"merge into {rows[into]['merged_into']} instead",
        )
    moved = await conn.fetchrow(MOVE_MENTIONS, source, into)
    await conn.execute(MARK_MERGED, source, str(into))
    return {
        "change": "merge",
        "entity_id": str(source),
        "name": rows[source]["name"],
        "into": str(into),
        "into_name": rows[into]["name"],
        "moved": sorted(str(m) for m in moved["moved"] or ()),
        "added": sorted(str(m) for m in moved["added"] or ()),
    }


async def undo(conn: asyncpg.Connection, entry: dict[str, Any]) -> dict[str, Any]:
    """Undo the change ``entry`` records, refused (:class:`ConflictError`) when the entity changed
    since in a way that undoing would overwrite; the undo's own entry."""
    entity_id = uuid.UUID(entry["entity_id"])
    row = await conn.fetchrow(LOCK_ONE, entity_id)
    if row is None:
        raise ConflictError(f"entity {entry['name']!r} no longer exists")
    if entry["change"] == "rename":
        if _name(row) != entry["after"]:
            raise ConflictError(
                f"entity {entry['name']!r} was renamed again since (now {row['name']!r})",
                hint="revert the later rename first",
            )
        before = entry["before"]
        await _require_free(conn, row["namespace"], entity_id, before["name"], before["key"])
        await conn.execute(SET_NAME, entity_id, before["name"], before["key"])
        return {**entry, "name": row["name"], "before": entry["after"], "after": before}
    into = uuid.UUID(entry["into"])
    if entry.get("unmerged"):  # merge again what an undo put back
        if row["merged_into"] is not None:
            raise ConflictError(f"entity {entry['name']!r} was merged again since")
        moved = await conn.fetchrow(MOVE_MENTIONS, entity_id, into)
        await conn.execute(MARK_MERGED, entity_id, str(into))
        return {
            **{k: v for k, v in entry.items() if k != "unmerged"},
            "moved": sorted(str(m) for m in moved["moved"] or ()),
            "added": sorted(str(m) for m in moved["added"] or ()),
        }
    if row["merged_into"] != into:
        raise ConflictError(f"entity {entry['name']!r} is no longer merged into {entry['into_name']!r}")
    await conn.execute(UNLINK, into, [uuid.UUID(m) for m in entry["added"]])
    await conn.execute(RELINK, entity_id, [uuid.UUID(m) for m in entry["moved"]])
    await conn.execute(UNMARK_MERGED, entity_id)
    return {**entry, "unmerged": True}


__all__ = ["merge", "rename", "undo"]
