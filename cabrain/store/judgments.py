"""The judgment journal (schema 0010): every supersession, invalidation and merge, made on write, in
dedup or in reconsolidation, and every correction and revert, with its reason, its inputs and the
exact state of each memory it changed, before and after.

:func:`supersede` is the one way a memory is superseded or invalidated; :func:`record` writes a
judgment made of several changes (a dedup merge); :func:`revert` applies a judgment's ``before``
states - only to memories still as the judgment left them - and records that as a judgment of its
own, so a revert is itself revertible and the previous state always comes back exactly: the same
id, content, validity, metadata and links.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from cabrain.errors import ConflictError
from cabrain.store import entities as entity_sql
from cabrain.store import entity_changes, workflow_clusters

# The state a judgment changes, per memory.
STATE = ("invalid_at", "superseded_by", "metadata", "importance", "access_count", "pinned")

CURRENT_STATE = """
SELECT m.id, m.valid_at, m.namespace, m.invalid_at, m.superseded_by, m.metadata, m.importance, m.access_count, m.pinned
FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.id = ANY($1::uuid[])
ORDER BY m.id
FOR UPDATE OF m
"""
SET_STATE = """
UPDATE memories m SET invalid_at = $3::timestamptz, superseded_by = $4::uuid, metadata = $5::jsonb,
                      importance = $6::real, access_count = $7::int, pinned = $8::boolean
WHERE m.id = $1 AND m.valid_at = $2
"""
INSERT = """
INSERT INTO judgments (id, namespace, kind, origin, agent_id, run_id, reason, inputs, changes, links, memory_ids, reverts,
                       entities, decided_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11::uuid[], $12, $13::jsonb,
        coalesce($14::text, judgment_decided_by($4, $6, $7)))
"""
ENTITY_STATE = """
SELECT id, name, summary, summary_sources, summarized_at FROM entities WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
"""
SET_ENTITY_STATE = """
UPDATE entities SET summary = $2, summary_sources = $3::uuid[], summarized_at = $4::timestamptz, updated_at = now()
WHERE id = $1
"""
# a run's judgments in one namespace not reverted yet, the latest first (a run is undone backwards)
OF_RUN = """
SELECT * FROM judgments WHERE run_id = $1 AND namespace = $2 AND reverted_by IS NULL
ORDER BY created_at DESC, id DESC
"""
GET = "SELECT * FROM judgments WHERE id = $1"
OF_MEMORY = """
SELECT * FROM judgments WHERE memory_ids @> ARRAY[$1::uuid] ORDER BY created_at DESC, id LIMIT $2
"""
FORGOTTEN_ONE = "SELECT forgotten_at IS NOT NULL FROM memory_ids WHERE id = $1"
FORGOTTEN = "SELECT id FROM memory_ids WHERE id = ANY($1::uuid[]) AND forgotten_at IS NOT NULL"
# A forget undone (a forget judgment reverted, a memory restored): its identity no longer says
# forgotten, so recall and archive recall find it again. Not once the cold tier purged it.
UNFORGET = """
UPDATE memory_ids SET forgotten_at = NULL, forgotten_by = NULL, forget_reason = NULL
WHERE id = ANY($1::uuid[]) AND purged_at IS NULL RETURNING id
"""
# A forget done again (a restore reverted): $1 ids, $2 agent, $3 reason.
REFORGET = """
UPDATE memory_ids SET forgotten_at = coalesce(forgotten_at, now()), forgotten_by = coalesce(forgotten_by, $2),
                      forget_reason = coalesce(forget_reason, $3)
WHERE id = ANY($1::uuid[])
"""
MARK_REVERTED = "UPDATE judgments SET reverted_by = $2 WHERE id = $1 AND reverted_by IS NULL RETURNING id"
ADD_LINK = """
INSERT INTO memory_sources (memory_id, source_id, relation, run_id) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
"""
REMOVE_LINK = "DELETE FROM memory_sources WHERE memory_id = $1 AND source_id = $2 AND relation = $3"


def _state(row: asyncpg.Record) -> dict[str, Any]:
    metadata = row["metadata"]
    return {
        "invalid_at": row["invalid_at"].isoformat() if row["invalid_at"] else None,
        "superseded_by": str(row["superseded_by"]) if row["superseded_by"] else None,
        "metadata": json.loads(metadata) if isinstance(metadata, str) else dict(metadata or {}),
        "importance": float(row["importance"]),
        "access_count": int(row["access_count"]),
        "pinned": bool(row["pinned"]),
    }


async def _set(conn: asyncpg.Connection, memory_id: uuid.UUID, valid_at: datetime, state: dict[str, Any]) -> None:
    await conn.execute(
        SET_STATE,
        memory_id,
        valid_at,
        datetime.fromisoformat(state["invalid_at"]) if state["invalid_at"] else None,
        uuid.UUID(state["superseded_by"]) if state["superseded_by"] else None,
        json.dumps(state["metadata"], ensure_ascii=False),
        state["importance"],
        state["access_count"],
        state["pinned"],
    )


def entity_state(row: asyncpg.Record) -> dict[str, Any]:
    """An entity's summary as a judgment records it."""
    return {
        "summary": row["summary"],
        "summary_sources": [str(x) for x in row["summary_sources"] or ()],
        "summarized_at": row["summarized_at"].isoformat() if row["summarized_at"] else None,
    }


async def _set_entity(conn: asyncpg.Connection, entity_id: uuid.UUID, state: dict[str, Any]) -> None:
    await conn.execute(
        SET_ENTITY_STATE,
        entity_id,
        state["summary"],
        [uuid.UUID(x) for x in state["summary_sources"]],
        datetime.fromisoformat(state["summarized_at"]) if state["summarized_at"] else None,
    )


@dataclass
class Change:
    """One memory's state before a judgment and what the judgment makes of it."""

    memory_id: uuid.UUID
    valid_at: datetime
    before: dict[str, Any]
    after: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "memory_id": str(self.memory_id),
            "valid_at": self.valid_at.isoformat(),
            "before": self.before,
            "after": self.after,
        }


@dataclass
class Judgment:
    namespace: str
    kind: str  # supersede | invalidate | merge | revert | correction | forget | restore | a sleep step's
    origin: str  # write | correction | dedup | reconsolidate | revert | person | a sleep step's
    reason: str
    agent_id: str | None = None
    run_id: uuid.UUID | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)  # {memory_id, source_id, relation, run_id, op}
    reverts: uuid.UUID | None = None
    related: set[uuid.UUID] = field(default_factory=set)  # memories it is about but did not change (the new version)
    # entity summaries it changed: {entity_id, name, before, after} (states as entity_state gives them)
    entities: list[dict[str, Any]] = field(default_factory=list)
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    # write | sleep | person | import (None: derived from origin, run and reason: judgment_decided_by)
    decided_by: str | None = None


async def record(conn: asyncpg.Connection, judgment: Judgment) -> uuid.UUID:
    await conn.execute(
        INSERT,
        judgment.id,
        judgment.namespace,
        judgment.kind,
        judgment.origin,
        judgment.agent_id,
        judgment.run_id,
        judgment.reason,
        json.dumps(judgment.inputs, ensure_ascii=False, default=str),
        json.dumps([c.to_json() for c in judgment.changes], ensure_ascii=False),
        json.dumps(judgment.links, default=str),
        sorted({c.memory_id for c in judgment.changes} | judgment.related),
        judgment.reverts,
        json.dumps(judgment.entities, ensure_ascii=False, default=str),
        judgment.decided_by,
    )
    return judgment.id


async def change(
    conn: asyncpg.Connection,
    judgment: Judgment,
    memory_id: uuid.UUID,
    update: dict[str, Any],
    *,
    only_current: bool = False,
) -> Change | None:
    """Apply ``update`` (some of STATE; ``metadata`` is merged in) to one memory, locked, and add the
    change to ``judgment``; None when the memory is not hot (or, with ``only_current``, not current)."""
    rows = await conn.fetch(CURRENT_STATE, [memory_id])
    if not rows or (only_current and rows[0]["invalid_at"] is not None):
        return None
    row = rows[0]
    before = _state(row)
    after = {**before, **{k: v for k, v in update.items() if k != "metadata"}}
    after["metadata"] = {**before["metadata"], **update.get("metadata", {})}
    await _set(conn, memory_id, row["valid_at"], after)
    c = Change(memory_id, row["valid_at"], before, after)
    judgment.changes.append(c)
    return c


async def supersede(
    conn: asyncpg.Connection,
    judgment: Judgment,
    target: uuid.UUID,
    *,
    by: uuid.UUID | None,
    metadata: dict[str, Any],
    now: datetime,
) -> bool:
    """Supersede (``by`` the replacement) or invalidate (``by`` None) ``target`` if it is current,
    as part of ``judgment``; its metadata gains ``metadata`` and the judgment's id. A pinned target
    passes its pin on to its replacement (a new version of a memory-tool file stays pinned)."""
    meta = {**metadata, "judgment": str(judgment.id)}
    done = await change(
        conn,
        judgment,
        target,
        {"invalid_at": now.isoformat(), "superseded_by": str(by) if by else None, "metadata": meta},
        only_current=True,
    )
    if done is not None and by is not None:
        judgment.related.add(by)
    if done is not None and by is not None and done.before["pinned"]:
        await conn.execute(
            "UPDATE memories m SET pinned = true FROM memory_ids i "
            "WHERE i.id = $1 AND m.id = i.id AND m.valid_at = i.valid_at",
            by,
        )
    return done is not None


async def with_new_version(conn: asyncpg.Connection, judgment: Judgment, new_id: uuid.UUID, now: datetime) -> None:
    """Make a correction's new version part of it: its state before the correction is recorded as
    out of recall since it was written, so reverting the correction takes it out of recall again
    (and the old version, current again, is the only one that ever held)."""
    [row] = await conn.fetch(CURRENT_STATE, [new_id])
    after = _state(row)
    before = {
        **after,
        "invalid_at": now.isoformat(),
        "metadata": {**after["metadata"], "withdrawn_by": str(judgment.id)},
    }
    judgment.changes.append(Change(new_id, row["valid_at"], before, after))


async def of_memory(conn: asyncpg.Connection, memory_id: uuid.UUID, limit: int = 50) -> list[asyncpg.Record]:
    return await conn.fetch(OF_MEMORY, memory_id, limit)


async def get(conn: asyncpg.Connection, judgment_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow(GET, judgment_id)


async def revert(conn: asyncpg.Connection, row: asyncpg.Record, *, agent: str, reason: str | None) -> Judgment:
    """Undo judgment ``row``: every memory it changed goes back to its ``before`` state, the links it
    added are removed (those it removed come back), the entity summaries it wrote are put back;
    recorded as a judgment of kind ``revert``.

    Refused (:class:`ConflictError`) when it was reverted already, or when a memory it changed has
    changed its validity since (superseded again, forgotten, archived), or an entity summary it
    wrote was rewritten since: that later change is undone first. A memory's importance and use
    are restored only if nothing moved them since."""
    undo = Judgment(
        row["namespace"],
        "revert",
        "revert",
        reason or f"revert of {row['kind']} ({row['origin']})",
        agent_id=agent,
        reverts=row["id"],
        inputs={"reverted": str(row["id"]), "kind": row["kind"], "origin": row["origin"], "reason": row["reason"]},
    )
    await undo_into(conn, row, undo)
    await record(conn, undo)
    await mark_reverted(conn, row["id"], undo.id)
    return undo


async def mark_reverted(conn: asyncpg.Connection, judgment_id: uuid.UUID, by: uuid.UUID) -> None:
    if await conn.fetchval(MARK_REVERTED, judgment_id, by) is None:
        raise ConflictError(f"judgment {judgment_id} was reverted meanwhile")


async def undo_into(conn: asyncpg.Connection, row: asyncpg.Record, undo: Judgment) -> None:
    """Apply the undoing of judgment ``row`` and add what it changed to ``undo`` (which may gather
    several: a sleep run's). Changes are undone last first, so a judgment that changed one memory
    twice (a run's revert) comes back through each state in turn."""
    if row["reverted_by"] is not None:
        raise ConflictError(
            f"judgment {row['id']} was already reverted (by {row['reverted_by']})",
            hint="revert that revert to bring this judgment back",
        )
    undo.related |= set(row["memory_ids"])
    inputs = json.loads(row["inputs"])
    await unforget(conn, inputs.get("forgotten", []), undo)
    changes = [_as_change(c) for c in json.loads(row["changes"])]
    forgotten = {r["id"] for r in await conn.fetch(FORGOTTEN, [c.memory_id for c in changes])}
    for c in reversed(changes):
        rows = await conn.fetch(CURRENT_STATE, [c.memory_id])
        if not rows:
            raise ConflictError(
                f"memory {c.memory_id} is no longer in the hot tier (archived by sleep); this judgment cannot be "
                "reverted",
                hint="bring it back first (unarchive, or revert the sleep run that archived it)",
            )
        now = rows[0]
        state = _state(now)
        validity = [k for k in ("invalid_at", "superseded_by") if k in c.after]
        if any(state[k] != c.after[k] for k in validity):
            raise ConflictError(
                f"memory {c.memory_id} changed since this judgment (now {'invalid' if state['invalid_at'] else 'current'}"
                f"{', superseded by ' + state['superseded_by'] if state['superseded_by'] else ''})",
                hint="revert the later judgment that changed it first (list them with the memory's judgments)",
            )
        target = {**state, **c.before}
        if target["invalid_at"] is None and state["invalid_at"] is not None and c.memory_id in forgotten:
            raise ConflictError(
                f"memory {c.memory_id} was forgotten since this judgment; a forgotten memory is not made current again",
            )
        if any(state[k] != c.after[k] for k in ("importance", "access_count") if k in c.after):
            target["importance"], target["access_count"] = state["importance"], state["access_count"]  # moved since
        await _set(conn, c.memory_id, now["valid_at"], target)
        undo.changes.append(Change(c.memory_id, now["valid_at"], state, target))
    entities = list(json.loads(row["entities"])) if "entities" in row.keys() else []
    for e in reversed(entities):
        if e.get("change") in ("merge", "rename"):  # a person's (cabrain.entity_care)
            undo.entities.append(await entity_changes.undo(conn, e))
            continue
        if "alias_of" in e:  # an alias merge (cabrain.sleep.aliases), or the undoing of one
            undone = await (entity_sql.merge_alias_again if e.get("unmerged") else entity_sql.unmerge_alias)(conn, e)
            undo.entities.append(undone)
            continue
        entity_id = uuid.UUID(e["entity_id"])
        found = await conn.fetch(ENTITY_STATE, [entity_id])
        if not found:
            continue  # the entity is gone (merged away, or not restored with this namespace): nothing to put back
        state = entity_state(found[0])
        if state != e["after"]:
            raise ConflictError(
                f"the summary of entity {e.get('name') or entity_id} was rewritten since this judgment",
                hint="revert the later sleep run that rewrote it first",
            )
        await _set_entity(conn, entity_id, e["before"])
        undo.entities.append(
            {"entity_id": str(entity_id), "name": e.get("name"), "before": state, "after": e["before"]}
        )
    for link in json.loads(row["links"]):
        args = (uuid.UUID(link["memory_id"]), uuid.UUID(link["source_id"]), link["relation"])
        if link["op"] == "add":
            await conn.execute(REMOVE_LINK, *args)
        else:
            await conn.execute(ADD_LINK, *args, uuid.UUID(link["run_id"]) if link.get("run_id") else None)
        undo.links.append({**link, "op": "remove" if link["op"] == "add" else "add"})
    if decision := inputs.get("workflow"):  # a chain demoted on live accuracy (cabrain.workflows.audit), or restored
        await undo_workflow(conn, decision, undo)
    if inputs.get("unforgotten"):  # a restore (or a forget's revert) undone: forgotten again
        ids = [uuid.UUID(i) for i in inputs["unforgotten"]]
        await conn.execute(REFORGET, ids, undo.agent_id, undo.reason)
        undo.inputs["forgotten"] = [*undo.inputs.get("forgotten", []), *inputs["unforgotten"]]


async def unforget(conn: asyncpg.Connection, forgotten: list[str], undo: Judgment) -> None:
    """A forget undone: the identities of ``forgotten`` no longer say forgotten (first, so the
    memories may be made current again); refused for one the cold tier has purged since."""
    if not forgotten:
        return
    ids = [uuid.UUID(i) for i in forgotten]
    back = {r["id"] for r in await conn.fetch(UNFORGET, ids)}
    if gone := [str(i) for i in ids if i not in back]:
        raise ConflictError(
            f"memory {gone[0]} was purged from the cold tier after it was forgotten; it cannot come back"
        )
    undo.inputs["unforgotten"] = [*undo.inputs.get("unforgotten", []), *forgotten]


async def undo_workflow(conn: asyncpg.Connection, decision: dict[str, Any], undo: Judgment) -> None:
    """A chain's demotion undone (it counts again in its kind of task), or a restore undone (demoted
    again); refused when the chain is no longer as the judgment left it."""
    demote = decision.get("op") == "restore"
    if not await workflow_clusters.set_demoted(conn, decision, demote):
        raise ConflictError(
            f"chain {decision['chain']} of task cluster {decision['cluster']} is "
            f"{'already demoted' if demote else 'no longer demoted'}",
            hint="a later judgment changed it; revert that one instead",
        )
    undo.inputs["workflow"] = {**decision, "op": "demote" if demote else "restore"}


def _as_change(c: dict[str, Any]) -> Change:
    return Change(uuid.UUID(c["memory_id"]), datetime.fromisoformat(c["valid_at"]), c["before"], c["after"])


def describe(row: asyncpg.Record) -> dict[str, Any]:
    """A judgment as the API shows it."""
    return {
        "id": str(row["id"]),
        "namespace": row["namespace"],
        "kind": row["kind"],
        "origin": row["origin"],
        "decided_by": row["decided_by"],
        "agent": row["agent_id"],
        "run_id": str(row["run_id"]) if row["run_id"] else None,
        "reason": row["reason"],
        "inputs": json.loads(row["inputs"]),
        "changes": json.loads(row["changes"]),
        "links": json.loads(row["links"]),
        "memory_ids": [str(m) for m in row["memory_ids"]],
        "created_at": row["created_at"].isoformat(),
        "reverts": str(row["reverts"]) if row["reverts"] else None,
        "reverted_by": str(row["reverted_by"]) if row["reverted_by"] else None,
        "entities": [_shown(e) for e in json.loads(row["entities"])] if "entities" in row.keys() else [],
    }


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    """An entity entry as shown, without the ids of the memories a merge moved (kept in the row for
    its revert). A person's merge is shown to every reader of its namespace, and the mentions it
    moved may be other agents' private memories: not even their number is shown. A merge sleep
    found is shown only to those who may read every memory it moved: their number is."""
    person = entry.get("change") == "merge"
    shown = {k: v for k, v in entry.items() if not (person and k in ("moved", "added"))}
    for k in ("moved", "added"):
        if isinstance(shown.get(k), list):
            shown[k] = len(shown[k])
    return shown


async def of_run(conn: asyncpg.Connection, run_id: uuid.UUID, namespace: str) -> list[asyncpg.Record]:
    return await conn.fetch(OF_RUN, run_id, namespace)


__all__ = [
    "Change",
    "Judgment",
    "change",
    "describe",
    "entity_state",
    "get",
    "mark_reverted",
    "of_memory",
    "of_run",
    "record",
    "revert",
    "supersede",
    "undo_into",
    "undo_workflow",
    "unforget",
    "with_new_version",
]
