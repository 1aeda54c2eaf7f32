"""Changing memories that exist: forget, reconsolidate, unarchive, revert a judgment, count a read.

Each needs the caller to be able to read the memory and write its namespace
(:mod:`cabrain.store.access`); nothing is ever hard-deleted, and every change is an event (and,
for what CaBrain decided on its own, a revertible judgment: :mod:`cabrain.store.judgments`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from cabrain.engine import Engine
from cabrain.errors import ColdStoreError, InputError, NotFound
from cabrain.fixes import Fix
from cabrain.redact import redact
from cabrain.search.archive import memory_of
from cabrain.search.lookup import not_found
from cabrain.store import access, judgments, requests
from cabrain.store import inbox as inbox_sql
from cabrain.store import memories as sql
from cabrain.store import namespaces as namespace_sql
from cabrain.store.keyword import IndexedDoc
from cabrain.types import Decision, Memory, MemoryInput, RetainResult
from cabrain.write.retain import retain
from cabrain.write.vectors import memory_vectors


async def writable(
    conn: asyncpg.Connection, agent: str, memory_id: uuid.UUID, *, archived_too: bool = False
) -> tuple[Memory | None, str]:
    """The memory ``agent`` may read and change, and its namespace; the memory is None for a
    demoted one, which only ``archived_too`` callers (forget) accept: the archive keeps memories
    as they were. Unknown and unreadable ids are both :class:`NotFound`."""
    memory = await sql.readable_memory(conn, agent, memory_id)
    if memory is not None:
        namespace = memory.namespace
    else:
        namespace = await conn.fetchval(sql.NAMESPACE_OF, memory_id)
        cold = namespace and await sql.cold_readable(conn, namespace, agent, memory_id)
        if not cold:
            raise not_found(memory_id, agent)
        if not archived_too:
            raise InputError(
                f"memory {memory_id} was moved to the cold tier on {cold['demoted_at'].isoformat()}; "
                "archived memories are kept as they were and cannot be changed",
                fix=Fix("read_archived", {"memory_id": str(memory_id)}),
            )
    await access.require_writer(conn, agent, namespace)
    return memory, namespace


async def forget(engine: Engine, agent: str, memory_id: uuid.UUID, *, reason: str | None) -> None:
    """Soft-forget (see :meth:`cabrain.brain.Brain.forget`), as a revertible judgment of kind
    ``forget``: its revert (or :func:`cabrain.write.corrections.restore`) brings the memory back. A
    memory forgotten already is left as it is (no second judgment)."""
    if reason and engine.settings.redact_secrets:
        reason = redact(reason)  # stored with the memory and its identity
    meta: dict[str, Any] = {"forgotten_by": agent, **({"forget_reason": reason} if reason else {})}
    async with engine.pool.acquire() as conn, conn.transaction():
        memory, namespace = await writable(conn, agent, memory_id, archived_too=True)
        if await conn.fetchval(judgments.FORGOTTEN_ONE, memory_id):
            return
        judgment = judgments.Judgment(
            namespace,
            "forget",
            "person",
            reason or "forgotten",
            agent_id=agent,
            inputs={"forgotten": [str(memory_id)], **({"tier": "cold"} if memory is None else {})},
            related={memory_id},
            decided_by="person",
        )
        if memory is None:
            meta["tier"] = "cold"  # kept in the cold tier as it was; its identity records the forget
        else:
            update: dict[str, Any] = {"metadata": {**meta, "judgment": str(judgment.id)}}
            if memory.metadata.get("restored_by"):  # restored once before: forgotten again now
                update["metadata"]["restored_by"] = None
            if memory.invalid_at is None:
                update["invalid_at"] = engine.clock().isoformat()
            await judgments.change(conn, judgment, memory_id, update)
        await conn.execute(sql.FORGET_IDENTITY, memory_id, agent, reason)
        await conn.execute(inbox_sql.FORGET, memory_id)  # the raw captured text it came from, if still kept
        await judgments.record(conn, judgment)
        await sql.insert_events(
            conn,
            [{"namespace": namespace, "op": "forget", "memory_id": memory_id, "agent_id": agent, "metadata": meta}],
        )


async def reconsolidate(
    engine: Engine,
    agent: str,
    old_id: uuid.UUID,
    corrected_content: str,
    *,
    reason: str | None,
    source_ref: str | None,
    idempotency_key: str | None = None,
    origin: str = "correction",
) -> RetainResult:
    """Replace a memory with a corrected version (see :meth:`cabrain.brain.Brain.reconsolidate`);
    ``origin`` "person": a person's correction (:meth:`cabrain.brain.Brain.correct`)."""
    request = requests.digest(
        "reconsolidate" if origin == "correction" else origin, old_id, corrected_content, reason, source_ref
    )
    async with engine.pool.acquire() as conn:
        old, _ = await writable(conn, agent, old_id)
        done = None
        if idempotency_key is not None:
            done = await requests.answered(conn, agent, idempotency_key, request)
    assert old is not None
    if done:  # answered before (its old memory is no longer current since)
        return _corrected(done[0], old_id, reason)
    if old.invalid_at is not None:
        raise InputError(
            f"memory {old_id} is no longer current (invalidated at {old.invalid_at.isoformat()})",
            fix=Fix("reconsolidate_current", {"memory_id": str(old.superseded_by)})
            if old.superseded_by
            else Fix("retain_instead"),
        )
    item = MemoryInput(
        content=corrected_content,
        namespace=old.namespace,
        visibility=old.visibility,
        network=old.network,
        memory_type=old.memory_type,
        source_kind=old.source_kind,
        source_ref=old.source_ref if source_ref is None else source_ref,
        metadata={**old.metadata, "reconsolidated_from": str(old_id), **({"reason": reason} if reason else {})},
    )
    [result] = await retain(
        engine,
        agent,
        [item],
        decide_writes=False,
        supersede=old_id,
        supersede_origin=origin,
        idempotency_key=idempotency_key,
        request=request,
    )
    return _corrected(result, old_id, reason)


def _corrected(result: RetainResult, old_id: uuid.UUID, reason: str | None) -> RetainResult:
    return RetainResult(
        Decision.UPDATE, result.memory_id, result.importance, (old_id,), result.entities, reason or "reconsolidated"
    )


async def unarchive(engine: Engine, agent: str, memory_id: uuid.UUID) -> Memory:
    """Bring an archived current memory back to the hot tier (see :meth:`cabrain.brain.Brain.unarchive`)."""
    async with engine.pool.acquire() as conn:
        namespace = await conn.fetchval(sql.NAMESPACE_OF, memory_id)
        where = namespace and await sql.cold_readable(conn, namespace, agent, memory_id)
        if not where:
            if namespace and await sql.readable_memory(conn, agent, memory_id) is not None:
                raise InputError(f"memory {memory_id} is not archived")
            raise not_found(memory_id, agent)
        await access.require_writer(conn, agent, namespace)
    if where["forgotten_at"] is not None:
        raise InputError(f"memory {memory_id} was forgotten; a forgotten memory is not brought back")
    cold = await asyncio.to_thread(engine.cold_tier)
    rows = await asyncio.to_thread(cold.newest, namespace, [str(memory_id)])
    if str(memory_id) not in rows:
        raise ColdStoreError(f"memory {memory_id} is archived but its row is not in the cold tier")
    row = rows[str(memory_id)]
    if row["invalid_at"] is not None:
        raise InputError(
            f"memory {memory_id} was superseded or forgotten before it was archived; "
            "only current memories come back (see its history with get)"
        )
    memory = memory_of(row)
    ready = await prepare_restore(engine, [memory])
    async with engine.pool.acquire() as conn, conn.transaction():
        await namespace_sql.lock(conn, namespace)
        if not await sql.cold_readable(conn, namespace, agent, memory_id):
            raise InputError(f"memory {memory_id} is no longer archived")
        await restore_rows(engine, conn, ready, agent=agent, op="unarchive")
        restored = await sql.readable_memory(conn, agent, memory.id)
    assert restored is not None
    return restored


Restorable = tuple[Memory, list[str], list[list[float]]]  # the memory, its passages, their vectors (its own first)


async def prepare_restore(engine: Engine, memories: Sequence[Memory]) -> list[Restorable]:
    """What bringing archived memories back needs before the transaction: their passages and vectors."""
    out: list[Restorable] = []
    for memory in memories:
        [(vector, passages, theirs)] = await memory_vectors(engine, [memory.content])
        out.append((memory, passages, [vector, *theirs]))
    return out


async def restore_rows(
    engine: Engine,
    conn: asyncpg.Connection,
    ready: Sequence[Restorable],
    *,
    agent: str,
    op: str,
    consolidated_at: Any = None,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Archived memories back in the hot tier with their own ids, as they were (current or not):
    rows, postings, passages and one ``op`` event each. In the caller's transaction."""
    for memory, passages, vectors in ready:
        await conn.execute(
            sql.RESTORE_ROW,
            memory.id,
            memory.namespace,
            memory.owner_agent_id,
            memory.visibility.value,
            memory.network.value,
            memory.memory_type.value,
            memory.content,
            memory.source_kind,
            memory.source_ref,
            sql.as_vector(vectors[0]),
            memory.importance,
            memory.access_count,
            memory.last_accessed_at,
            memory.created_at,
            memory.valid_at,
            json.dumps(memory.metadata, ensure_ascii=False),
            hashlib.sha256(memory.content.encode("utf-8")).digest(),
            memory.source_kind == "memory_file",
            memory.invalid_at,
            memory.superseded_by,
            consolidated_at,
        )
        await engine.keyword.index(conn, [IndexedDoc(memory.id, memory.namespace, memory.valid_at, memory.content)])
        await sql.insert_chunks(
            conn,
            [
                (memory.id, n, memory.namespace, memory.valid_at, text, vec)
                for n, (text, vec) in enumerate(zip(passages, vectors[1:], strict=True))
            ],
        )
        await sql.insert_events(
            conn,
            [
                {
                    "namespace": memory.namespace,
                    "op": op,
                    "memory_id": memory.id,
                    "agent_id": agent,
                    "metadata": metadata or {},
                }
            ],
        )


async def may_see_judgment(conn: asyncpg.Connection, agent: str, row: asyncpg.Record) -> bool:
    """Every memory a judgment is about is readable by ``agent`` (it shows their states); one about no
    memory (a person's entity merge or rename) by whoever may read its namespace."""
    if not row["memory_ids"]:
        return (await access.caller(conn, agent, row["namespace"])).team_ok
    return await access.may_read_all(conn, agent, row["namespace"], list(row["memory_ids"]))


async def judgments_of(engine: Engine, agent: str, memory_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    async with engine.pool.acquire() as conn:
        await access.require_readable_memory(conn, agent, memory_id)
        rows = await judgments.of_memory(conn, memory_id, limit)
        return [judgments.describe(r) for r in rows if await may_see_judgment(conn, agent, r)]


async def revert(
    engine: Engine, agent: str, *, judgment_id: uuid.UUID | None, memory_id: uuid.UUID | None, reason: str | None
) -> dict[str, Any]:
    """Undo a judgment (see :meth:`cabrain.brain.Brain.revert`)."""
    reason = redact(reason) if reason and engine.settings.redact_secrets else reason
    async with engine.pool.acquire() as conn, conn.transaction():
        if judgment_id is not None:
            row = await judgments.get(conn, judgment_id)
            if row is None or not await may_see_judgment(conn, agent, row):
                raise NotFound(f"judgment {judgment_id} does not exist or is not visible to {agent!r}")
        else:
            assert memory_id is not None
            await access.require_readable_memory(conn, agent, memory_id)
            rows = [r for r in await judgments.of_memory(conn, memory_id, 500) if r["reverted_by"] is None]
            if not rows or not await may_see_judgment(conn, agent, rows[0]):
                raise NotFound(f"no judgment to revert changed memory {memory_id}")
            row = rows[0]
        await namespace_sql.lock(conn, row["namespace"])
        await access.require_writer(conn, agent, row["namespace"])
        row = await judgments.get(conn, row["id"])  # again, under the lock
        assert row is not None
        undo = await judgments.revert(conn, row, agent=agent, reason=reason)
        await sql.insert_events(
            conn,
            [
                {
                    "namespace": row["namespace"],
                    "op": "revert",
                    "memory_id": c.memory_id,
                    "agent_id": agent,
                    "metadata": {"judgment": str(row["id"]), "revert": str(undo.id)},
                }
                for c in undo.changes
            ],
        )
        described = await judgments.get(conn, undo.id)
        assert described is not None
        return judgments.describe(described)


async def touch(engine: Engine, agent: str, ids: Sequence[uuid.UUID]) -> int:
    """Count a read of these memories (see :meth:`cabrain.brain.Brain.touch`)."""
    seen = []
    async with engine.pool.acquire() as conn:
        for memory_id in dict.fromkeys(ids):
            memory = await sql.readable_memory(conn, agent, memory_id)
            if memory is not None and memory.invalid_at is None:
                seen.append(memory)
    for namespace in sorted({m.namespace for m in seen}):
        mine = [m.id for m in seen if m.namespace == namespace]
        engine.record_access(
            mine, {"namespace": namespace, "op": "read", "agent_id": agent, "metadata": {"ids": [str(i) for i in mine]}}
        )
    return len(seen)
