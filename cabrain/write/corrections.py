"""A person's corrections: correct a memory (a new version through the write path, the old one
superseded), restore a forgotten one, the audit of a namespace's judgments and their bulk revert.

Each is a revertible judgment (:mod:`cabrain.store.judgments`), decided by a ``person``:

- **correct**: :func:`cabrain.write.changes.reconsolidate` with origin ``person``, so the new
  version is embedded, indexed and linked as any write is; the judgment (kind ``correction``) holds
  both versions, and its revert makes the old one current again and takes the new one out of recall.
- **restore**: the latest forget of the memory not reverted yet is reverted; a memory forgotten
  before forgets were judgments (none recorded) is brought back directly - its identity no longer
  says forgotten and, if the forget took it out of recall (it was current then, not superseded), it
  is current again - as a judgment of kind ``restore``, revertible in turn. A memory in the cold
  tier has only its identity's forget undone: archive recall finds it again, as it was archived.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cabrain.engine import Engine
from cabrain.errors import CabrainError, InputError
from cabrain.redact import redact
from cabrain.store import access, judgments
from cabrain.store import audit as audit_sql
from cabrain.store import memories as sql
from cabrain.store import namespaces as namespace_sql
from cabrain.types import RetainResult
from cabrain.write import changes

KINDS = (
    "supersede",
    "invalidate",
    "merge",
    "revert",
    "distill",
    "summarize",
    "decay",
    "archive",
    "alias",
    "correction",
    "forget",
    "restore",
    "entity_merge",
    "entity_rename",
    "workflow_demote",
)
DECIDERS = ("write", "sleep", "person", "import")
MAX_REVERTS = 100


async def correct(
    engine: Engine, agent: str, memory_id: uuid.UUID, content: str, *, reason: str | None
) -> RetainResult:
    """A person's correction (see :meth:`cabrain.brain.Brain.correct`)."""
    content = _text(content, "content", engine.settings.max_content_chars)
    if reason is not None:
        reason = _text(reason, "reason", engine.settings.max_query_chars)
    async with engine.pool.acquire() as conn:
        memory = await sql.readable_memory(conn, agent, memory_id)
    if memory is not None and isinstance(content, str) and memory.content == content:
        raise InputError("the correction is the memory's text as it is: change something to correct it")
    return await changes.reconsolidate(
        engine, agent, memory_id, content, reason=reason, source_ref=None, origin="person"
    )


async def restore(engine: Engine, agent: str, memory_id: uuid.UUID, *, reason: str | None) -> dict[str, Any]:
    """Bring a forgotten memory back (see :meth:`cabrain.brain.Brain.restore`); the judgment that did."""
    if reason is not None:
        reason = _text(reason, "reason", engine.settings.max_query_chars)
        reason = redact(reason) if engine.settings.redact_secrets else reason
    async with engine.pool.acquire() as conn, conn.transaction():
        memory, namespace = await changes.writable(conn, agent, memory_id, archived_too=True)
        await namespace_sql.lock(conn, namespace)
        if not await conn.fetchval(judgments.FORGOTTEN_ONE, memory_id):
            raise InputError(f"memory {memory_id} is not forgotten; there is nothing to restore")
        forgets = [  # a forget, or the revert of a restore: what forgot it and stands
            r
            for r in await judgments.of_memory(conn, memory_id, 500)
            if r["reverted_by"] is None and str(memory_id) in json.loads(r["inputs"]).get("forgotten", [])
        ]
        if forgets:
            done = await judgments.revert(conn, forgets[0], agent=agent, reason=reason or "restored")
        else:
            done = judgments.Judgment(
                namespace,
                "restore",
                "person",
                reason or "restored (forgotten before forgets were judgments)",
                agent_id=agent,
                related={memory_id},
                decided_by="person",
            )
            await judgments.unforget(conn, [str(memory_id)], done)
            if memory is not None and _taken_out_by_forget(memory.invalid_at, memory.superseded_by, memory.metadata):
                await judgments.change(conn, done, memory_id, {"invalid_at": None, "metadata": {"restored_by": agent}})
            await judgments.record(conn, done)
        await sql.insert_events(
            conn,
            [
                {
                    "namespace": namespace,
                    "op": "restore",
                    "memory_id": memory_id,
                    "agent_id": agent,
                    "metadata": {"judgment": str(done.id)},
                }
            ],
        )
        row = await judgments.get(conn, done.id)
    assert row is not None
    return judgments.describe(row)


def _taken_out_by_forget(invalid_at: Any, superseded_by: Any, metadata: Mapping[str, Any]) -> bool:
    """An old forget made this memory not current (it was current then: neither superseded nor
    retracted by a write before it was forgotten)."""
    return (
        invalid_at is not None
        and superseded_by is None
        and not {"superseded_reason", "invalidated_reason"} & set(metadata)
    )


async def audit(
    engine: Engine,
    agent: str,
    namespace: str,
    *,
    kind: str | None,
    origin: str | None,
    since: datetime | None,
    until: datetime | None,
    cursor: str | None,
    limit: int,
) -> dict[str, Any]:
    """A page of the audit (see :meth:`cabrain.brain.Brain.audit`)."""
    if kind is not None and kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if origin is not None and origin not in DECIDERS:
        raise InputError(f"origin must be one of {', '.join(DECIDERS)}, got {origin!r}")
    if not 1 <= limit <= 200:
        raise InputError(f"limit must be between 1 and 200, got {limit}")
    if since is not None and until is not None and since >= until:
        raise InputError("the window's start (from) must be before its end (to)")
    after = _parse_cursor(cursor) if cursor else None
    async with engine.pool.acquire() as conn:
        (await access.caller(conn, agent, namespace)).require_team_read()
        rows = await audit_sql.page(
            conn,
            namespace,
            agent,
            kind=kind,
            decided_by=origin,
            since=since,
            until=until,
            after=after,
            limit=limit + 1,
        )
        more, rows = len(rows) > limit, rows[:limit]
        found = await audit_sql.texts(conn, sorted({m for r in rows for m in r["memory_ids"]}))
        counts, capped = await audit_sql.counts(conn, namespace, agent, since=since, until=until)
    items = [{**judgments.describe(r), **_sides(r, found)} for r in rows]
    last = rows[-1] if rows else None
    return {
        "namespace": namespace,
        "judgments": items,
        "counts": counts,
        "counts_capped": capped,
        "next_cursor": _cursor(last["created_at"], last["id"]) if more and last is not None else None,
    }


def _sides(row: Any, found: dict[uuid.UUID, Any]) -> dict[str, list[dict[str, Any]]]:
    """What a judgment took out of recall (``before``), brought in (``after``) and changed otherwise
    (``touched``: importance, metadata), each memory with its text (None: archived)."""
    inputs = json.loads(row["inputs"])
    out: list[str] = []
    into: list[str] = []
    touched: list[str] = []
    for c in json.loads(row["changes"]):
        was, now = c["before"].get("invalid_at", ...), c["after"].get("invalid_at", ...)
        if was is None and now not in (None, ...):
            out.append(c["memory_id"])
        elif now is None and was not in (None, ...):
            into.append(c["memory_id"])
        elif c["memory_id"] not in touched:
            touched.append(c["memory_id"])
    new = inputs.get("new_memory_id")
    if new and new not in into and new not in out:
        into.append(new)
    out += [m for m in inputs.get("forgotten", []) if m not in out and m not in into]
    into += [m for m in inputs.get("unforgotten", []) if m not in into and m not in out]

    def text(memory_id: str) -> dict[str, Any]:
        hit = found.get(uuid.UUID(memory_id))
        return {"memory_id": memory_id, "content": hit["content"] if hit else None}

    after = [text(m) for m in into]
    if row["kind"] == "invalidate" and inputs.get("text"):
        after.append({"memory_id": None, "content": inputs["text"]})  # the retraction that invalidated it
    return {
        "before": [text(m) for m in out],
        "after": after,
        "touched": [text(m) for m in touched if m not in out + into],
    }


async def revert_many(engine: Engine, agent: str, ids: list[uuid.UUID], *, reason: str | None) -> list[dict[str, Any]]:
    """Revert each judgment of ``ids`` in its own transaction, the newest first (a later judgment on
    the same memory is undone before an earlier one); per id, the revert or why it failed."""
    if not ids:
        raise InputError("give at least one judgment id to revert")
    if len(ids) > MAX_REVERTS:
        raise InputError(f"at most {MAX_REVERTS} judgments at a time, got {len(ids)}")
    if reason is not None:
        reason = _text(reason, "reason", engine.settings.max_query_chars)
    unique = list(dict.fromkeys(ids))
    async with engine.pool.acquire() as conn:
        ordered = await audit_sql.newest_first(conn, unique)
    ordered += [i for i in unique if i not in ordered]
    results: list[dict[str, Any]] = []
    for judgment_id in ordered:
        try:
            undo = await changes.revert(engine, agent, judgment_id=judgment_id, memory_id=None, reason=reason)
        except CabrainError as exc:
            if exc.status >= 500:
                raise
            results.append({"id": str(judgment_id), "ok": False, "status": exc.status, "error": str(exc)})
            continue
        results.append({"id": str(judgment_id), "ok": True, "revert": undo["id"]})
    return results


def _text(value: str, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise InputError(f"{name} must be text")
    if "\x00" in value:
        raise InputError(f"{name} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{name} is not valid UTF-8 text (a lone surrogate)") from exc
    if len(value) > limit:
        raise InputError(f"{name} is {len(value)} characters; at most {limit}")
    return value


def _cursor(created_at: datetime, judgment_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{judgment_id}".encode()).decode().rstrip("=")


def _parse_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, judgment_id = text.split("|")
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None:
            raise ValueError("naive")
        return moment, uuid.UUID(judgment_id)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError("cursor is not one this audit gave (use a page's next_cursor)") from exc


__all__ = ["DECIDERS", "KINDS", "audit", "correct", "restore", "revert_many"]
