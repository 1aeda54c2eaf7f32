"""Entities looked after by people: the entity reads (a namespace's entities with their mention counts,
one entity with its memories, its neighbourhood as a graph), and merge and rename as revertible
judgments: operations of :class:`cabrain.brain.Brain`."""

from __future__ import annotations

import uuid
from typing import Any

from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.gate import Read, operation
from cabrain.policy import Op
from cabrain.redact import redact
from cabrain.search import graph
from cabrain.store import access, entity_changes, judgments
from cabrain.store import entities as entity_sql
from cabrain.store import memories as sql
from cabrain.store import namespaces as namespace_sql
from cabrain.text.entities import entity_key
from cabrain.types import Entity, EntityPage, EntityWithMemories

MAX_NAME = 200


def _entity_ref(name_or_id: str) -> tuple[uuid.UUID | None, str]:
    if not isinstance(name_or_id, str) or not name_or_id.strip():
        raise InputError("give an entity's name or id")
    try:
        return uuid.UUID(name_or_id), entity_key(name_or_id)
    except ValueError:
        return None, entity_key(name_or_id)


class EntityCare:
    """A part of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine

    # --- entities --------------------------------------------------------------------------------
    @operation(
        Op.READ,
        namespace="namespace",
        reads=Read.NAMESPACE,
        http="GET /v1/entities",
        client="entities",
        backend="entities",
        mcp="memory_entities",
        cli=("entities", "entities list"),
    )
    async def entities(
        self,
        agent: str,
        namespace: str,
        *,
        query: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        sort: str = "name",
    ) -> EntityPage:
        """Entities of ``namespace`` in name order (``sort="mentions"``: the most mentioned first), with
        their summaries and how many current memories the caller may read mention them (``mentions``,
        the team and global ones every reader shares, which the order follows, and
        ``own_private_mentions``: nobody else's private memory is counted), as
        :mod:`cabrain.store.entities` scopes them (an agent that may not read the namespace gets
        :class:`NotFound`). ``query`` keeps names that contain it (any case); ``cursor`` is a page's
        ``next_cursor``."""
        if not 1 <= limit <= 200:
            raise InputError(f"limit must be between 1 and 200, got {limit}")
        if sort not in ("name", "mentions"):
            raise InputError(f"sort must be 'name' or 'mentions', got {sort!r}")
        key_part = entity_key(query) if query is not None and query.strip() else None
        async with self.engine.pool.acquire() as conn:
            (await access.caller(conn, agent, namespace)).require_team_read()
            found, next_cursor = await entity_sql.page(
                conn,
                namespace,
                agent,
                key_part=key_part,
                after=cursor or None,
                limit=limit,
                by_mentions=sort == "mentions",
            )
        return EntityPage(found, next_cursor)

    @operation(
        Op.READ,
        namespace="namespace",
        reads=Read.MEMORIES,
        http="GET /v1/entities/{name_or_id:path}",
        client="entity",
        backend="entity",
        mcp="memory_entity",
        cli="entity",
    )
    async def entity(
        self, agent: str, namespace: str, name_or_id: str, *, history: bool = False, limit: int = 20
    ) -> EntityWithMemories:
        """One entity of ``namespace`` (by name, in any case, or by id) with its summary when the caller
        may read every memory it was made from, and the hot memories that mention it the caller may
        read, newest first (``history``: superseded and forgotten ones too), at most ``limit``; how
        many current ones mention it (kept counts: no scan), and the entities it shares readable facts with
        (among its newest 5,000 mentions; at most ``limit``).
        Unknown, unreadable and never-mentioned-to-the-caller entities are all :class:`NotFound`."""
        if not 1 <= limit <= 200:
            raise InputError(f"limit must be between 1 and 200, got {limit}")
        entity_id, key = _entity_ref(name_or_id)
        async with self.engine.pool.acquire() as conn:
            (await access.caller(conn, agent, namespace)).require_team_read()
            entity = await entity_sql.one(conn, namespace, agent, entity_id=entity_id, key=key, name=name_or_id)
            rows = await entity_sql.memories(conn, namespace, agent, entity.id, history=history, limit=limit)
            related = await entity_sql.related(conn, namespace, agent, entity.id, limit=limit)
        mentions = entity.mentions + entity.own_private_mentions  # kept counts (migration 0023): no scan
        return EntityWithMemories(entity, [sql.to_memory(r) for r in rows], mentions, related)

    @operation(Op.READ, namespace="namespace", reads=Read.MEMORIES)
    async def entity_graph(self, agent: str, namespace: str, name_or_id: str, *, limit: int = 300) -> dict[str, Any]:
        """An entity's neighbourhood as a graph (``{"center", "nodes", "edges"}``): the entities and
        the memories the caller may read that mention them (:func:`cabrain.search.graph.neighbourhood`)."""
        return await graph.neighbourhood(self.engine, agent, namespace, name_or_id, limit=limit)

    # --- a person's changes ----------------------------------------------------------------------
    @operation(
        Op.CORRECT,
        namespace="namespace",
        reads=Read.NAMESPACE,
        held=True,
        http="POST /v1/entities/{name_or_id:path}/rename",
        client="rename_entity",
        backend="rename_entity",
        mcp="memory_entity_rename",
        cli="entities rename",
    )
    async def rename_entity(
        self, agent: str, namespace: str, name_or_id: str, new_name: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        """Rename an entity of ``namespace`` (by name or id): its display name becomes ``new_name`` and
        memories are matched to it by that name from now on. A name another entity of the namespace has
        is a :class:`ConflictError` (merge the two instead). Recorded as a judgment (kind
        ``entity_rename``, origin ``person``) that ``revert`` undoes; the judgment is returned. Only a
        writer of the namespace may."""
        if not isinstance(new_name, str) or not new_name.strip() or len(new_name) > MAX_NAME:
            raise InputError(f"a new name must be 1 to {MAX_NAME} characters, not blank")
        new_name = " ".join(new_name.split())
        if any(ord(c) < 32 or ord(c) == 127 for c in new_name) or not entity_key(new_name):
            raise InputError("a new name may not hold control characters, and needs a letter or digit")
        entity_id, key = _entity_ref(name_or_id)

        async def change(conn: Any, entity: Entity) -> dict[str, Any]:
            return await entity_changes.rename(conn, namespace, entity.id, new_name, entity_key(new_name))

        return await self._entity_judgment(
            agent, namespace, name_or_id, entity_id, key, "entity_rename", reason, change, f"renamed to {new_name!r}"
        )

    @operation(
        Op.CORRECT,
        namespace="namespace",
        reads=Read.NAMESPACE,
        held=True,
        http="POST /v1/entities/{name_or_id:path}/merge",
        client="merge_entity",
        backend="merge_entity",
        mcp="memory_entity_merge",
        cli="entities merge",
    )
    async def merge_entity(
        self, agent: str, namespace: str, name_or_id: str, into: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        """Merge an entity of ``namespace`` (by name or id) into entity ``into`` (by name or id): every
        memory that mentions it mentions ``into`` instead, and it is kept, marked merged into ``into``,
        with its summary (new mentions of its name link to ``into``). Recorded as a judgment (kind
        ``entity_merge``, origin ``person``) that ``revert`` undoes exactly (the links come back as they
        were); the judgment is returned. Only a writer of the namespace may."""
        entity_id, key = _entity_ref(name_or_id)
        into_id, into_key = _entity_ref(into)

        async def change(conn: Any, entity: Entity) -> dict[str, Any]:
            target = await entity_sql.one(conn, namespace, agent, entity_id=into_id, key=into_key, name=into)
            return await entity_changes.merge(conn, namespace, entity.id, target.id)

        return await self._entity_judgment(
            agent, namespace, name_or_id, entity_id, key, "entity_merge", reason, change, f"merged into {into!r}"
        )

    async def _entity_judgment(
        self,
        agent: str,
        namespace: str,
        name: str,
        entity_id: uuid.UUID | None,
        key: str,
        kind: str,
        reason: str | None,
        change: Any,
        what: str,
    ) -> dict[str, Any]:
        if reason is not None and len(reason) > 2000:
            raise InputError("a reason is at most 2000 characters")
        if reason and self.engine.settings.redact_secrets:
            reason = redact(reason)
        async with self.engine.pool.acquire() as conn, conn.transaction():
            (await access.caller(conn, agent, namespace)).require_team_read().require_write()
            await namespace_sql.lock(conn, namespace)
            entity = await entity_sql.one(conn, namespace, agent, entity_id=entity_id, key=key, name=name)
            entry = await change(conn, entity)
            judgment = judgments.Judgment(
                namespace, kind, "person", reason or f"{entity.name!r} {what}", agent_id=agent, entities=[entry]
            )
            await judgments.record(conn, judgment)
            row = await judgments.get(conn, judgment.id)
            assert row is not None
            return judgments.describe(row)


__all__ = ["EntityCare"]
