"""Reading memories by id and by provenance: a memory with its version chain and entities (hot or
demoted), and a namespace's current memories of one source (the memory-tool backend's files).

Scoping is the SQL of :mod:`cabrain.store.access`; an unknown id and an unreadable one are both
:class:`NotFound`, so existence does not leak.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import datetime

import asyncpg

from cabrain.engine import Engine
from cabrain.errors import ColdStoreError, InputError, NotFound
from cabrain.search.archive import memory_of
from cabrain.store import access
from cabrain.store import browse as browse_sql
from cabrain.store import memories as sql
from cabrain.store import namespaces as namespace_sql
from cabrain.store.browse import BrowseFilters
from cabrain.types import Memory, MemoryPage, MemoryType, MemoryWithHistory, Network, Visibility


def not_found(memory_id: uuid.UUID, agent: str) -> NotFound:
    return NotFound(f"memory {memory_id} does not exist or is not visible to {agent!r}")


async def get(
    engine: Engine, namespace: str, agent: str, memory_id: uuid.UUID, *, as_of: datetime | None = None
) -> MemoryWithHistory:
    """``memory_id`` of ``namespace`` as ``agent`` may see it, with its versions before and after and
    its entities. A demoted memory is read from the cold tier with no database connection held.

    ``as_of`` (aware): instead, the version of it that was current then - valid at or before it, not
    yet superseded or forgotten then -, with its own versions before and after; :class:`NotFound`
    when none of the versions the agent may read was (the memory was not yet true, or no longer)."""
    found = await _get(engine, namespace, agent, memory_id)
    if as_of is None:
        return found
    chain = [*found.previous, found.memory, *found.next]
    current = [m for m in chain if m.valid_at <= as_of and (m.invalid_at is None or m.invalid_at > as_of)]
    if not current:
        raise NotFound(
            f"no version of memory {memory_id} was current at {as_of.isoformat()}",
            hint="get it without as_of for its whole history",
        )
    chosen = max(current, key=lambda m: (m.valid_at, m.created_at))  # the latest word on it then
    return found if chosen.id == found.memory.id else await _get(engine, namespace, agent, chosen.id)


async def _get(engine: Engine, namespace: str, agent: str, memory_id: uuid.UUID) -> MemoryWithHistory:
    async with engine.read_pool().acquire() as conn:
        row = await sql.get_readable(conn, namespace, agent, memory_id)
        if row is not None:
            memory = sql.to_memory(row)
            following, previous, entities = await history(conn, namespace, agent, memory_id, memory_id)
        else:
            cold = await sql.cold_readable(conn, namespace, agent, memory_id)
            if cold is None:
                raise not_found(memory_id, agent)
    if row is None:
        memory = await read_cold(engine, namespace, memory_id, cold)
        async with engine.read_pool().acquire() as other:
            following, previous, entities = await history(
                other, namespace, agent, memory_id, memory.superseded_by, successor=True
            )
    return MemoryWithHistory(
        memory=memory,
        previous=[sql.to_memory(r) for r in previous],
        next=[sql.to_memory(r) for r in following],
        entities=[r["name"] for r in entities],
    )


async def history(
    conn: asyncpg.Connection,
    namespace: str,
    agent: str,
    memory_id: uuid.UUID,
    chain: uuid.UUID | None,
    *,
    successor: bool = False,
) -> tuple[list, list, list]:
    """(versions after, versions before, entity rows) of ``memory_id``; the versions after are
    read from ``chain`` on (itself included when ``successor``: a demoted memory's successor)."""
    following: list = []
    if chain is not None:
        first = await sql.get_readable(conn, namespace, agent, chain) if successor else None
        if first is not None or not successor:
            following = ([first] if first else []) + await sql.versions(conn, namespace, agent, chain, after=True)
    previous = await sql.versions(conn, namespace, agent, memory_id, after=False)
    entities = await conn.fetch(sql.ENTITIES_OF, memory_id)
    return following, previous, list(entities)


async def read_cold(engine: Engine, namespace: str, memory_id: uuid.UUID, where: asyncpg.Record) -> Memory:
    """A demoted memory's row from the cold tier (``where``: its ``COLD_READABLE`` row), shown
    as forgotten when it was forgotten after its demotion (its text, once purged, is gone)."""
    if where["purged_at"] is not None:  # forgotten, and its text removed from the cold tier since
        return purged(namespace, memory_id, where)

    # the cold tier's module loads pyarrow (half a second): loaded when the cold tier is first read
    from cabrain.store.cold import equal, month_of

    cold = await asyncio.to_thread(engine.cold_tier)
    rows = await asyncio.to_thread(
        cold.newest, namespace, [str(memory_id)], equal("valid_month", month_of(where["valid_at"]))
    )
    if str(memory_id) not in rows:
        raise ColdStoreError(
            f"memory {memory_id} was demoted to the cold tier (batch {where['cold_batch']}) "
            "but its row is not in the Iceberg table",
            hint="check CABRAIN_COLD_CATALOG_URI / CABRAIN_COLD_WAREHOUSE point at the cold tier the sleep cycle writes",
        )
    return with_forget(memory_of(rows[str(memory_id)]), where)


async def read_cold_page(
    engine: Engine, namespace: str, wheres: list[asyncpg.Record], *, history: bool
) -> list[Memory]:
    """A page of demoted memories (their ``ARCHIVED`` rows, in order) read from the cold tier in one
    scan; without ``history``, those superseded before their demotion are left out."""
    ids = [str(w["id"]) for w in wheres if w["purged_at"] is None]
    rows: dict = {}
    if ids:
        cold = await asyncio.to_thread(engine.cold_tier)
        rows = await asyncio.to_thread(cold.newest, namespace, ids)
    missing = [i for i in ids if i not in rows]
    if missing:
        raise ColdStoreError(
            f"{len(missing)} demoted memories of {namespace!r} are not in the Iceberg table (first: {missing[0]})",
            hint="check CABRAIN_COLD_CATALOG_URI / CABRAIN_COLD_WAREHOUSE point at the cold tier the sleep cycle writes",
        )
    out = []
    for where in wheres:
        memory = (
            purged(namespace, where["id"], where)
            if where["purged_at"] is not None
            else with_forget(memory_of(rows[str(where["id"])]), where)
        )
        if history or memory.invalid_at is None:
            out.append(memory)
    return out


def purged(namespace: str, memory_id: uuid.UUID, where: asyncpg.Record) -> Memory:
    """A demoted memory forgotten and purged since: its identity, without its text."""
    return Memory(
        id=memory_id,
        namespace=namespace,
        owner_agent_id=where["owner_agent_id"],
        visibility=Visibility(where["visibility"] or "private"),
        network=Network.EXPERIENCE,
        memory_type=MemoryType.EPISODIC,
        content=f"[forgotten; its text was purged from the cold tier on {where['purged_at']:%Y-%m-%d}]",
        source_kind=None,
        source_ref=None,
        importance=0.0,
        access_count=0,
        last_accessed_at=None,
        created_at=where["valid_at"],
        valid_at=where["valid_at"],
        invalid_at=where["forgotten_at"],
        superseded_by=None,
        tier="cold",
        metadata={"purged_at": where["purged_at"].isoformat()},
    )


def with_forget(memory: Memory, where: asyncpg.Record) -> Memory:
    """A cold row as shown: forgotten when it was forgotten after its demotion."""
    if where["forgotten_at"] is None:
        return memory
    return dataclasses.replace(
        memory,
        invalid_at=memory.invalid_at or where["forgotten_at"],
        metadata={
            **memory.metadata,
            "forgotten_by": where["forgotten_by"],
            **({"forget_reason": where["forget_reason"]} if where["forget_reason"] else {}),
        },
    )


async def browse(
    engine: Engine,
    agent: str,
    namespace: str,
    filters: BrowseFilters,
    *,
    limit: int,
    cursor: str | None,
    archived: bool,
) -> MemoryPage:
    """See :meth:`cabrain.brain.Brain.browse`. A missing namespace is :class:`NotFound`; in one the
    agent may not read as a whole it sees what it may read row by row, as recall does."""
    page = browse_sql.archived_page if archived else browse_sql.page
    async with engine.read_pool().acquire() as conn:
        (await access.caller(conn, agent, namespace)).require_namespace()
        rows, next_cursor = await page(conn, namespace, agent, filters, limit=limit, cursor=cursor)
    if archived:  # read from the cold tier with no connection held
        return MemoryPage(await read_cold_page(engine, namespace, rows, history=filters.history), next_cursor)
    return MemoryPage([sql.to_memory(r) for r in rows], next_cursor)


async def access_history(engine: Engine, agent: str, memory_id: uuid.UUID) -> list[dict[str, object]]:
    """A readable memory's recent events, newest first; other agents are named to admins only (an
    agent sees that a memory was used, not what another agent was doing)."""
    async with engine.pool.acquire() as conn:
        namespace = await access.require_readable_memory(conn, agent, memory_id)
        admin = await access.is_admin(conn, agent)
        rows = await browse_sql.access_history(conn, namespace, memory_id)
    return [
        {
            "ts": r["ts"],
            "op": r["op"],
            "agent": r["agent_id"] if admin or r["agent_id"] == agent else "another agent",
        }
        for r in rows
    ]


async def list_current(
    engine: Engine,
    agent: str,
    namespace: str,
    *,
    source_kind: str | None,
    source_ref_prefix: str | None,
    limit: int,
    include_archived: bool,
) -> list[Memory]:
    """Current memories of ``namespace`` that ``agent`` may read, by provenance, ordered by
    ``source_ref`` (see :meth:`cabrain.brain.Brain.list_memories`)."""
    if not 1 <= limit <= 10_000:
        raise InputError(f"limit must be between 1 and 10000, got {limit}")
    if include_archived and not source_kind:
        raise InputError("include_archived lists archived memories of one source_kind; give it")
    async with engine.pool.acquire() as conn:
        if not await namespace_sql.exists(conn, namespace):
            raise NotFound(f"namespace {namespace!r} does not exist")
        rows = await sql.list_current(
            conn, namespace, agent, source_kind=source_kind, prefix=source_ref_prefix, limit=limit
        )
        found = [sql.to_memory(r) for r in rows]
        if include_archived:
            assert source_kind is not None
            found += await archived_current(engine, conn, agent, namespace, source_kind, source_ref_prefix)
    found.sort(key=lambda m: (m.source_ref is None, m.source_ref or "", m.created_at))
    return found[:limit]


async def archived_current(
    engine: Engine, conn: asyncpg.Connection, agent: str, namespace: str, source_kind: str, prefix: str | None
) -> list[Memory]:
    """Current memories of ``source_kind`` in the cold tier that ``agent`` may read. Reads the
    Iceberg table only when memory_ids says there are some (or does not know yet: identities
    archived before schema 0010 learn their source_kind here, once)."""
    unknown = [r["id"] for r in await conn.fetch(sql.ARCHIVED_UNKNOWN_KIND, namespace)]
    if unknown:
        cold = await asyncio.to_thread(engine.cold_tier)
        for start in range(0, len(unknown), 1000):
            part = unknown[start : start + 1000]
            rows = await asyncio.to_thread(cold.newest, namespace, [str(i) for i in part])
            kinds = {i: (rows[str(i)]["source_kind"] or "") if str(i) in rows else "" for i in part}
            await conn.execute(sql.SET_ARCHIVED_KIND, list(kinds), list(kinds.values()))
    ids = [r["id"] for r in await conn.fetch(sql.ARCHIVED_OF_KIND, namespace, source_kind)]
    if not ids:
        return []
    cold = await asyncio.to_thread(engine.cold_tier)
    rows = await asyncio.to_thread(cold.newest, namespace, [str(i) for i in ids])
    out = []
    for memory_id in ids:
        row = rows.get(str(memory_id))
        if row is None or row["invalid_at"] is not None:
            continue
        if prefix and not (row["source_ref"] or "").startswith(prefix):
            continue
        if await sql.cold_readable(conn, namespace, agent, memory_id):
            out.append(memory_of(row))
    return out
