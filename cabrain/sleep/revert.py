"""Reverting a whole sleep run: in each namespace, one judgment that undoes everything the run did.

A run journals every change it makes (:mod:`cabrain.store.judgments`, schema 0018): the facts it
distilled, the entity summaries it wrote, its merges and supersessions, the importance it decayed
and the memories it archived. Reverting it, per namespace the caller may write and whose every
changed memory it may read, gathers the run's judgments there not yet reverted and, the latest
first, in one transaction:

- the facts it wrote are invalidated (never deleted: their history and links stay);
- the summaries it wrote go back to what they were;
- what it merged or superseded is current again, as a single judgment's revert does;
- decayed importance comes back (where nothing moved it since);
- the memories it archived come back to the hot tier with their own ids (a forgotten one stays
  out), counted as used at the revert, so the next sleep does not archive them again at once.

That is recorded as one judgment of kind ``revert`` (``inputs.run`` names the run); each of the
run's judgments is marked reverted by it. Reverting that revert puts the run's facts, summaries,
merges and decay back; memories it brought back from the archive stay hot (a later sleep archives
them again if they still qualify). A later judgment that changed the same memories (the next
night's run) must be reverted first: the revert says which memory is in the way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from typing import Any

from cabrain.engine import Engine
from cabrain.errors import ConflictError, NotFound
from cabrain.redact import redact
from cabrain.search.archive import memory_of
from cabrain.store import access, judgments
from cabrain.store import memories as sql
from cabrain.store import namespaces as namespace_sql
from cabrain.store import sleep as sleep_sql
from cabrain.types import Memory
from cabrain.write.changes import may_see_judgment, prepare_restore, restore_rows

log = logging.getLogger(__name__)


async def revert_run(engine: Engine, agent: str, run_id: uuid.UUID, reason: str | None) -> list[dict[str, Any]]:
    """Revert run ``run_id`` in every namespace ``agent`` may write that it changed: one judgment
    each (described), in namespace order. :class:`NotFound` when the run is unknown or none of its
    namespaces is visible; :class:`ConflictError` when there is nothing left to revert."""
    reason = redact(reason) if reason and engine.settings.redact_secrets else reason
    async with engine.pool.acquire() as conn:
        run = await conn.fetchrow(sleep_sql.RUN_NAMESPACES, run_id)
        admin = await access.is_admin(conn, agent)
        readable = {r["name"]: r for r in await namespace_sql.of_agent(conn, agent)}
        if run is None or not (admin or set(run["namespaces"]) & {n for n, r in readable.items() if r["can_read"]}):
            raise NotFound(f"sleep run {run_id} does not exist or is not visible to {agent!r}")
        if run["status"] == "running":
            raise ConflictError(f"sleep run {run_id} is still running", hint="wait for it to end, or cancel it")
        changed = list(await conn.fetch(sleep_sql.RUN_JOURNALED, run_id))
    targets = [r["namespace"] for r in changed if admin or (readable.get(r["namespace"]) or {}).get("can_write")]
    if not targets:
        raise ConflictError(
            f"sleep run {run_id} left nothing to revert in a namespace {agent!r} may write",
            hint="its changes were reverted already, or it changed nothing",
        )
    out = []
    for namespace in sorted(targets):
        out.append(await _revert_in(engine, agent, run_id, namespace, reason))
    return out


async def _revert_in(
    engine: Engine, agent: str, run_id: uuid.UUID, namespace: str, reason: str | None
) -> dict[str, Any]:
    async with engine.pool.acquire() as conn:
        rows = await judgments.of_run(conn, run_id, namespace)
        for row in rows:
            if not await may_see_judgment(conn, agent, row):
                raise NotFound(
                    f"sleep run {run_id} changed memories in {namespace!r} that {agent!r} may not read",
                    hint="an admin, or the agents that own them, can revert it",
                )
        archived = sorted({m for r in rows if r["kind"] == "archive" for m in r["memory_ids"]})
        cold_ids = [r["id"] for r in await conn.fetch(sleep_sql.STILL_ARCHIVED, archived)] if archived else []
    back = await _archived(engine, namespace, cold_ids)
    ready = await prepare_restore(engine, back)
    async with engine.pool.acquire() as conn, conn.transaction():
        await namespace_sql.lock(conn, namespace)
        await access.require_writer(conn, agent, namespace)
        rows = await judgments.of_run(conn, run_id, namespace)  # again, under the lock
        if not rows:
            raise ConflictError(f"sleep run {run_id} was reverted in {namespace!r} meanwhile")
        still = {r["id"] for r in await conn.fetch(sleep_sql.STILL_ARCHIVED, [m.id for m, _, _ in ready])}
        ready = [x for x in ready if x[0].id in still]
        await restore_rows(
            engine,
            conn,
            ready,
            agent=agent,
            op="unarchive",
            consolidated_at=engine.clock(),  # back as it was: not distilled again
            metadata={"run_reverted": str(run_id)},
        )
        undo = judgments.Judgment(
            namespace,
            "revert",
            "revert",
            reason or f"revert of sleep run {run_id}",
            agent_id=agent,
            inputs={
                "run": str(run_id),
                "reverted": [str(r["id"]) for r in rows],
                "kinds": sorted({r["kind"] for r in rows}),
                "unarchived": [str(m.id) for m, _, _ in ready],
            },
        )
        for row in rows:  # the latest first
            await judgments.undo_into(conn, row, undo)
        await judgments.record(conn, undo)
        for row in rows:
            await judgments.mark_reverted(conn, row["id"], undo.id)
        await sql.insert_events(
            conn,
            [
                {
                    "namespace": namespace,
                    "op": "revert",
                    "memory_id": c.memory_id,
                    "agent_id": agent,
                    "metadata": {"run": str(run_id), "revert": str(undo.id)},
                }
                for c in undo.changes
            ],
        )
        described = await judgments.get(conn, undo.id)
    assert described is not None
    log.info(
        "sleep run reverted",
        extra={"agent": agent, "run_id": str(run_id), "namespace": namespace, "judgments": len(rows)},
    )
    return judgments.describe(described)


async def _archived(engine: Engine, namespace: str, ids: list[uuid.UUID]) -> list[Memory]:
    """The archived memories to bring back, as the cold tier holds them, counted as used now."""
    if not ids:
        return []
    cold = await asyncio.to_thread(engine.cold_tier)
    rows = await asyncio.to_thread(cold.newest, namespace, [str(i) for i in ids])
    now = engine.clock()
    return [dataclasses.replace(memory_of(rows[str(i)]), last_accessed_at=now) for i in ids if str(i) in rows]


__all__ = ["revert_run"]
