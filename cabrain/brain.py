"""The ``Brain`` facade: the one core every face (HTTP, MCP, memory tool, capture, CLI) calls.

Every call acts as an agent. A method validates its input, answers from the L1 cache when it
may, and runs a pipeline over the :class:`cabrain.engine.Engine`; who may do what is answered in
one place, :mod:`cabrain.store.access`, and enforced in SQL::

    async with await Brain.open(settings) as brain:
        await brain.create_agent("claude")
        await brain.create_namespace("claude", "cabrain")
        [result] = await brain.retain("claude", [MemoryInput("We chose pgvector.", "cabrain")])
        answer = await brain.recall("claude", RecallQuery("which vector store?", "cabrain"))
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from cabrain import edge
from cabrain.clock import Clock, utc_now
from cabrain.corrections import Corrections
from cabrain.engine import Engine
from cabrain.entity_care import EntityCare
from cabrain.errors import InputError
from cabrain.explain import Explaining
from cabrain.gate import Read, field, first_namespace, operation, system
from cabrain.judging import Judging
from cabrain.membership import Membership, as_uuid
from cabrain.overview import Overview
from cabrain.policy import Op
from cabrain.providers.embedders import Embedder
from cabrain.providers.rerankers import Reranker
from cabrain.search import archive, lookup
from cabrain.search import recall as recall_pipeline
from cabrain.settings import Settings
from cabrain.store import db as db_sql
from cabrain.store import generations, reconnect
from cabrain.store.browse import BrowseFilters
from cabrain.types import (
    ArchiveQuery,
    ArchiveResult,
    Memory,
    MemoryInput,
    MemoryPage,
    MemoryWithHistory,
    RecallQuery,
    RecallResult,
    RetainResult,
    history_from_dict,
    recall_from_dict,
    to_json,
)
from cabrain.workflows.facade import Workflows
from cabrain.write import changes, inbox
from cabrain.write import retain as retain_pipeline

log = logging.getLogger(__name__)
T = TypeVar("T")


class Brain(Judging, Corrections, Explaining, Overview, EntityCare, Membership):
    """Every method is one operation of the memory organ, on behalf of one agent."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def settings(self) -> Settings:
        """The configuration the brain runs with (read-only for faces: limits, defaults)."""
        return self.engine.settings

    # --- lifecycle -----------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        dsn: str | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        clock: Clock = utc_now,
    ) -> Brain:
        """Open an :class:`Engine` (connect, check the schema, load providers: see
        :meth:`Engine.open`) and the facade over it. ``clock`` is "now" for what the brain decides
        by the time (:mod:`cabrain.clock`)."""
        return cls(await Engine.open(settings, dsn=dsn, embedder=embedder, reranker=reranker, clock=clock))

    async def close(self) -> None:
        await self.engine.close()

    @property
    def workflows(self) -> Workflows:
        """The workflow-learning facade over the same engine (its operations pass the same gate)."""
        return Workflows(self.engine)

    @property
    def caches(self) -> bool:
        """Whether answers go through the L1 cache (``CABRAIN_REDIS_URL``)."""
        return self.engine.cache is not None

    async def ping(self) -> None:
        """Return once the database answers (readiness); a lost connection leaves the pool."""
        try:
            async with self.engine.pool.acquire() as conn:
                await conn.fetchval(db_sql.PING)
        except reconnect.CONNECTION_LOST:
            await self.engine.pool.expire_connections()
            raise

    @system("the hot tier's read replicas and their lag, for /v1/health and the console's health page")
    async def read_replicas(self) -> list[dict[str, Any]]:
        """Each replica of CABRAIN_DATABASE_REPLICA_URLS: up, behind or down, its lag and the reads it served."""
        return [] if self.engine.replicas is None else await self.engine.replicas.status()

    @system("the WAL position a write answers with (CaBrain-LSN), so the caller's next read can see it")
    async def wal_position(self) -> str:
        """The primary's WAL position now (:meth:`Engine.wal_position`)."""
        return await self.engine.wal_position()

    async def riding_out(self, op: Callable[[], Awaitable[T]]) -> T:
        """``await op()``, run again on fresh connections when the database connection is lost
        (a restart, a failover), until ``db_connect_timeout_s`` (:mod:`cabrain.store.reconnect`).
        Only for reads and keyed writes: a retried write must carry an idempotency key."""
        return await reconnect.retrying(op, pool=self.engine.pool, timeout_s=self.settings.db_connect_timeout_s)

    async def __aenter__(self) -> Brain:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- memory operations ---------------------------------------------------------------------
    @operation(
        Op.RETAIN,
        namespace=first_namespace("items"),
        http=("POST /v1/memories", "POST /v1/memories/batch"),
        client=("retain", "retain_batch"),
        backend="retain",
        mcp="memory_retain",
        cli="remember",
    )
    async def retain(
        self,
        agent: str,
        items: MemoryInput | Sequence[MemoryInput],
        *,
        decide: bool = True,
        idempotency_key: str | None = None,
    ) -> list[RetainResult]:
        """Write one memory or a batch (SPEC §4.1). ``decide=False`` stores every item as ADD
        without comparing it with its neighbours (bulk imports of independent documents).

        ``idempotency_key``: the same call again with the same key (a retry after the connection
        dropped, whether or not the first one committed) writes nothing and answers what the first
        answered (:mod:`cabrain.store.requests`)."""
        batch = [items] if isinstance(items, MemoryInput) else list(items)
        started = time.perf_counter()
        results = await retain_pipeline.retain(
            self.engine, agent, batch, decide_writes=decide, idempotency_key=idempotency_key
        )
        log.info("retain", extra={"agent": agent, "count": len(batch), "ms": (time.perf_counter() - started) * 1000})
        return results

    @operation(Op.RETAIN, namespace="namespace", http="POST /v1/capture", cli="capture")
    async def capture(self, agent: str, namespace: str, items: list[dict[str, Any]], *, decide: bool = True) -> int:
        """Hand over captured memories (JSON objects with ``content`` and optional classification,
        provenance and ``valid_at``): stored at once in the capture inbox (secrets redacted first)
        once ``agent`` may write ``namespace``, retained later by :meth:`drain_captures`. Returns the
        inbox row's id. The items are embedded when they are retained, as the agent: its ``embed``
        cap is checked now."""
        await self.engine.governor.model_call("embed", len(items), count=False)
        return await inbox.enqueue(self.engine, agent, namespace, items, decide=decide)

    @system("the replica's capture worker: each row is retained as the agent that handed it over")
    async def drain_captures(self, *, batch: int = 16) -> int:
        """Retain one batch of pending captures (each as the agent that handed it over); how many
        inbox rows were handled (0: nothing pending)."""
        return await inbox.drain(self.engine, batch=batch)

    @system("the replica's capture worker and health: a count, no content")
    async def pending_captures(self) -> int:
        """Captures waiting in the inbox (failed-for-good ones not counted)."""
        return await inbox.pending(self.engine)

    @operation(Op.RECALL, meter=None)
    async def warm_query(self, agent: str, text: str) -> None:
        """Embed ``text`` as a query now, so that a recall of it soon after finds the vector in the
        embedding cache (capture embeds while it stores); metered as the agent's ``embed``."""
        await self.engine.embed_query(text)

    @operation(
        Op.RECALL,
        namespace=field("query", "namespace"),
        reads=Read.MEMORIES,
        http="POST /v1/recall",
        client="recall",
        backend="recall",
        mcp="memory_recall",
        cli="recall",
    )
    async def recall(self, agent: str, query: RecallQuery) -> RecallResult:
        """Hybrid recall (SPEC §4.2), through the L1 cache when there is one. ``query.as_of``: what
        the brain held true then; ``query.context``: the dialogue's earlier turns, oldest first."""
        settings = self.engine.settings
        recall_pipeline.validate(query, max_k=settings.recall_max_k, max_chars=settings.max_query_chars)
        # from a replica of the hot tier when one may serve it (cabrain.store.replicas)
        return await self.engine.reading(lambda: self._recall(agent, query))

    async def _recall(self, agent: str, query: RecallQuery) -> RecallResult:
        cache = self.engine.cache
        key = None
        if cache is not None:
            started = time.perf_counter()
            # read before the answer is computed, where it is (see providers/cache.py)
            async with self.engine.read_pool().acquire() as conn:
                scope = await generations.of_namespace(conn, query.namespace)
            if scope is not None:
                key = f"recall:{scope['gen']}:{scope['cache_gen']}:{recall_pipeline.cache_digest(agent, query)}"
                cached = await cache.get(key)
                if cached is not None:
                    result = recall_from_dict(json.loads(cached), cached=True)
                    latency = (time.perf_counter() - started) * 1000
                    recall_pipeline.record(self.engine, agent, query, [h.memory.id for h in result.hits], latency)
                    return result
        result = await recall_pipeline.recall(self.engine, agent, query)
        if cache is not None and key is not None:
            await cache.set(key, json.dumps(to_json(result)), cache.recall_ttl_s)
        return result

    @operation(
        Op.RECALL,
        namespace=field("query", "namespace"),
        reads=Read.MEMORIES,
        http="POST /v1/recall/archive",
        client="recall_archive",
        backend="recall_archive",
        mcp="memory_recall_archive",
        cli="recall",
    )
    async def recall_archive(self, agent: str, query: ArchiveQuery) -> ArchiveResult:
        """Search the cold tier: demoted memories, with the same scoping as :meth:`recall`.

        An explicit, slower call (it reads the namespace's Iceberg files); hot recall never
        touches the cold tier. Invalidated memories are included unless the query says not."""
        settings = self.engine.settings
        # the same text, k and time-range rules as hot recall
        recall_pipeline.validate(query, max_k=settings.recall_max_k, max_chars=settings.max_query_chars)
        started = time.perf_counter()
        result = await archive.recall_archive(self.engine, agent, query)
        log.info(
            "recall_archive",
            extra={
                "agent": agent,
                "namespace": query.namespace,
                "hits": len(result.hits),
                "scanned": result.scanned,
                "ms": (time.perf_counter() - started) * 1000,
            },
        )
        return result

    @operation(
        Op.READ,
        reads=Read.MEMORIES,
        http="GET /v1/memories/{memory_id}",
        client="get",
        backend="get",
        mcp="memory_get",
        cli="get",
    )
    async def get(self, agent: str, memory_id: uuid.UUID | str, *, as_of: datetime | None = None) -> MemoryWithHistory:
        """A memory in any state, with its provenance, its versions before and after, and its
        entities. Unknown and unreadable ids are both :class:`NotFound` (existence does not leak).

        ``as_of``: the version of it that was current at that time (valid at or before it, not yet
        superseded or forgotten then; a naive time is UTC), with its own history; :class:`NotFound`
        when none was."""
        moment = edge.check_moment(as_of, "as_of") if as_of is not None else None
        memory = as_uuid(memory_id)
        return await self.engine.reading(lambda: self._get(agent, memory, as_of=moment))

    async def _get(self, agent: str, memory_id: uuid.UUID, *, as_of: datetime | None = None) -> MemoryWithHistory:
        cache = self.engine.cache
        key = None
        async with self.engine.read_pool().acquire() as conn:
            scope = await generations.of_memory(conn, memory_id)
            if scope is None:
                raise lookup.not_found(memory_id, agent)
            if cache is not None:
                key = f"get:{scope['gen']}:{scope['cache_gen']}:{agent}:{memory_id}"
                key += f":{as_of.isoformat()}" if as_of is not None else ""
                cached = await cache.get(key)
                if cached is not None:
                    return history_from_dict(json.loads(cached))
        result = await lookup.get(self.engine, scope["namespace"], agent, memory_id, as_of=as_of)
        if cache is not None and key is not None:
            await cache.set(key, json.dumps(to_json(result)), cache.row_ttl_s)
        return result

    @operation(
        Op.READ,
        namespace="namespace",
        reads=Read.MEMORIES,
        http="GET /v1/memories",
        client="list_memories",
        backend="list_memories",
    )
    async def list_memories(
        self,
        agent: str,
        namespace: str,
        *,
        source_kind: str | None = None,
        source_ref_prefix: str | None = None,
        limit: int = 1000,
        include_archived: bool = False,
    ) -> list[Memory]:
        """Current memories of ``namespace`` that ``agent`` may read, by provenance (the memory-tool
        backend lists its files with this), ordered by ``source_ref``. ``include_archived`` (with a
        ``source_kind``) adds current ones that sleep moved to the cold tier (tier "cold"): the
        memory-tool files archived before files were pinned, which :meth:`unarchive` brings back."""
        return await lookup.list_current(
            self.engine,
            agent,
            namespace,
            source_kind=source_kind,
            source_ref_prefix=source_ref_prefix,
            limit=limit,
            include_archived=include_archived,
        )

    @operation(Op.READ, namespace="namespace", reads=Read.MEMORIES)
    async def browse(
        self,
        agent: str,
        namespace: str,
        filters: BrowseFilters,
        *,
        limit: int = 50,
        cursor: str | None = None,
        archived: bool = False,
    ) -> MemoryPage:
        """A keyset page of ``namespace``'s memories, newest first, hot or ``archived``
        (:func:`lookup.browse`); ``filters.as_of``: the hot memories as they stood then."""
        return await self.engine.reading(
            lambda: lookup.browse(self.engine, agent, namespace, filters, limit=limit, cursor=cursor, archived=archived)
        )

    @operation(
        Op.CORRECT,
        reads=Read.MEMORIES,
        held=True,
        http="POST /v1/memories/{memory_id}/unarchive",
        client="unarchive",
        backend="unarchive",
    )
    async def unarchive(self, agent: str, memory_id: uuid.UUID | str) -> Memory:
        """Bring an archived (demoted) current memory back to the hot tier, with its own id, content,
        validity, provenance and links: it is recalled again (its passages and keyword postings are
        rebuilt). The cold tier keeps its copy. Needs write access to the namespace."""
        return await changes.unarchive(self.engine, agent, as_uuid(memory_id))

    @operation(Op.READ, reads=Read.MEMORIES)
    async def access_history(self, agent: str, memory_id: uuid.UUID | str) -> list[dict[str, object]]:
        """A readable memory's recent uses, newest first (other agents named to admins only)."""
        return await lookup.access_history(self.engine, agent, as_uuid(memory_id))

    # --- changing what exists --------------------------------------------------------------------
    @operation(
        Op.FORGET,
        reads=Read.MEMORIES,
        held=True,
        http="POST /v1/memories/{memory_id}/forget",
        client="forget",
        backend="forget",
        mcp="memory_forget",
        cli="forget",
    )
    async def forget(self, agent: str, memory_id: uuid.UUID | str, *, reason: str | None = None) -> MemoryWithHistory:
        """Soft-forget: the memory gets ``invalid_at`` and leaves recall; ``get`` still shows it. A
        memory already demoted to the cold tier (kept there as it was) is forgotten on its identity:
        archive recall leaves it out from then on. Either way the forget is recorded on the memory's
        identity, and the raw captured text it came from, if still kept, is removed."""
        memory_id = as_uuid(memory_id)
        await changes.forget(self.engine, agent, memory_id, reason=reason)
        return await self._get(agent, memory_id)  # the forget's answer, not a read of its own

    @operation(
        Op.CORRECT,
        reads=Read.MEMORIES,
        held=True,
        http="POST /v1/memories/{memory_id}/reconsolidate",
        client="reconsolidate",
        backend="reconsolidate",
        mcp="memory_reconsolidate",
    )
    async def reconsolidate(
        self,
        agent: str,
        memory_id: uuid.UUID | str,
        content: str,
        *,
        reason: str | None = None,
        source_ref: str | None = None,
        idempotency_key: str | None = None,
    ) -> RetainResult:
        """Replace a memory with a corrected version (SPEC §4.4): the new memory keeps the old one's
        namespace, visibility and classification (and its ``source_ref`` unless a new one is given: a
        renamed memory-tool file); the old one gets ``invalid_at`` + ``superseded_by``."""
        return await changes.reconsolidate(
            self.engine,
            agent,
            as_uuid(memory_id),
            content,
            reason=reason,
            source_ref=source_ref,
            idempotency_key=idempotency_key,
        )

    @operation(Op.READ, reads=Read.MEMORIES, http="POST /v1/memories/accessed", client="touch", backend="touch")
    async def touch(self, agent: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Count a read of these memories (a memory-tool file viewed): their use and recency rise as a
        recall's hits do, so what is looked at does not fade. Unreadable ids are skipped; returns how
        many were counted."""
        ids = [as_uuid(i) for i in memory_ids]
        if len(ids) > 1000:
            raise InputError(f"at most 1000 memories at a time, got {len(ids)}")
        return await changes.touch(self.engine, agent, ids)


__all__ = ["Brain", "as_uuid"]
