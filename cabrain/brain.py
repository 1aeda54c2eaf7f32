"""The ``Brain`` facade: the one core every face (HTTP, MCP, memory tool, capture, CLI) calls.

Every call acts as an agent; scoping is enforced in SQL (:mod:`cabrain.store.scope`)::

    async with await Brain.open(settings) as brain:
        await brain.create_agent("claude")
        await brain.create_namespace("claude", "cabrain")
        [result] = await brain.retain("claude", [MemoryInput("We chose pgvector.", "cabrain")])
        answer = await brain.recall("claude", RecallQuery("which vector store?", "cabrain"))
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from cabrain import identity, namespaces
from cabrain.clock import Clock, utc_now
from cabrain.errors import (
    AccessDenied,
    AlreadyExists,
    CabrainError,
    ColdStoreError,
    ConfigError,
    EmbedderError,
    InputError,
    NotFound,
)
from cabrain.faces import inbox
from cabrain.fixes import Fix
from cabrain.providers.cache import RedisCache
from cabrain.providers.embedders import Embedder, load_embedder
from cabrain.providers.llm import ChatModel, load_chat_model
from cabrain.providers.rerankers import Reranker, load_reranker
from cabrain.redact import redact
from cabrain.search.keyword import KeywordBackend, PostgresBM25
from cabrain.settings import Settings
from cabrain.store import entities as entity_sql
from cabrain.store import memories as sql
from cabrain.store import migrations
from cabrain.store.bookkeeping import Bookkeeper
from cabrain.store.pool import create_pool
from cabrain.store.scope import ACCESS_CTE, readable_id
from cabrain.types import (
    ArchiveQuery,
    ArchiveResult,
    EntityPage,
    EntityWithMemories,
    Memory,
    MemoryInput,
    MemoryWithHistory,
    RecallQuery,
    RecallResult,
    RetainResult,
    history_from_dict,
    history_to_dict,
    recall_from_dict,
    recall_to_dict,
)
from cabrain.write.entities import entity_key

log = logging.getLogger(__name__)

CREATE_NAMESPACE = """
INSERT INTO namespaces (name, owner_agent_id) VALUES ($1, $2)
ON CONFLICT (name) DO NOTHING
RETURNING name
"""
NAMESPACE_OWNER = "SELECT owner_agent_id FROM namespaces WHERE name = $1"
NAMESPACE_OWNER_EXISTS = "SELECT 1 FROM namespaces WHERE name = $1"
IS_ADMIN = "SELECT is_admin FROM agents WHERE id = $1 AND disabled_at IS NULL"
# A grant is an offer until its grantee accepts it; widening an accepted grant makes it an offer again.
UPSERT_GRANT = """
INSERT INTO namespace_grants (agent_id, namespace, can_read, can_write, granted_by)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (agent_id, namespace) DO UPDATE
SET can_read = EXCLUDED.can_read, can_write = EXCLUDED.can_write,
    granted_by = EXCLUDED.granted_by, granted_at = now(),
    accepted_at = CASE WHEN (EXCLUDED.can_write AND NOT namespace_grants.can_write)
                         OR (EXCLUDED.can_read AND NOT namespace_grants.can_read)
                       THEN NULL ELSE namespace_grants.accepted_at END
RETURNING accepted_at IS NOT NULL AS accepted
"""
DELETE_GRANT = "DELETE FROM namespace_grants WHERE agent_id = $1 AND namespace = $2"
ACCEPT_GRANT = """
UPDATE namespace_grants SET accepted_at = coalesce(accepted_at, now())
WHERE agent_id = $1 AND namespace = $2
RETURNING can_read, can_write, accepted_at
"""
# $1 namespace, $2 agent, $3 ids: every one of them is a memory of the namespace the agent may read (hot or archived).
ALL_READABLE = f"""
WITH {ACCESS_CTE}
SELECT coalesce(bool_and({readable_id("x.id")}), false) FROM unnest($3::uuid[]) AS x(id)
"""
# Archived identities of a namespace whose source_kind is not known yet (demoted before schema 0010).
ARCHIVED_UNKNOWN_KIND = "SELECT id FROM memory_ids WHERE namespace = $1 AND tier = 'cold' AND source_kind IS NULL"
SET_ARCHIVED_KIND = """
UPDATE memory_ids i SET source_kind = k.kind FROM unnest($1::uuid[], $2::text[]) AS k(id, kind) WHERE i.id = k.id
"""
ARCHIVED_OF_KIND = """
SELECT id FROM memory_ids WHERE namespace = $1 AND tier = 'cold' AND source_kind = $2 AND forgotten_at IS NULL
ORDER BY id
"""
# An archived memory back in the hot tier, as it was (the register trigger re-registers its identity).
RESTORE_ROW = """
WITH restored AS (
    INSERT INTO memories (id, namespace, owner_agent_id, visibility, network, memory_type, content, source_kind,
                          source_ref, embedding, importance, access_count, last_accessed_at, created_at, valid_at,
                          metadata, content_hash, pinned)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16::jsonb, $17, $18)
    RETURNING namespace
)
UPDATE namespaces SET memory_count = memory_count + 1 WHERE name = (SELECT namespace FROM restored)
"""
# The L1 cache's key parts, read from PostgreSQL before an answer is computed (providers/cache.py).
CACHE_SCOPE = (
    "SELECT g.gen AS cache_gen, e.gen FROM cache_generations g CROSS JOIN cache_epoch e WHERE g.namespace = $1"
)
CACHE_SCOPE_OF_ID = """
SELECT i.namespace, g.gen AS cache_gen, e.gen
FROM memory_ids i LEFT JOIN cache_generations g ON g.namespace = i.namespace CROSS JOIN cache_epoch e
WHERE i.id = $1
"""
AGENT_EXISTS = "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1)"
AGENT_ACTIVE = "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND disabled_at IS NULL)"
LIST_NAMESPACES = """
SELECT n.name, n.owner_agent_id, n.created_at,
       CASE WHEN n.owner_agent_id = $1 OR adm.is_admin THEN n.memory_count END AS memory_count,
       n.owner_agent_id = $1 OR adm.is_admin OR coalesce(g.can_read, false) AS can_read,
       n.owner_agent_id = $1 OR adm.is_admin OR coalesce(g.can_write AND g.accepted_at IS NOT NULL, false) AS can_write,
       CASE WHEN g.agent_id IS NOT NULL AND n.owner_agent_id IS DISTINCT FROM $1
            THEN jsonb_build_object('can_read', g.can_read, 'can_write', g.can_write, 'granted_by', g.granted_by,
                                    'accepted', g.accepted_at IS NOT NULL) END AS grant
FROM namespaces n
CROSS JOIN (SELECT coalesce(bool_or(is_admin AND disabled_at IS NULL), false) AS is_admin
            FROM agents WHERE id = $1) adm
LEFT JOIN namespace_grants g ON g.namespace = n.name AND g.agent_id = $1
WHERE n.owner_agent_id = $1 OR g.agent_id IS NOT NULL OR adm.is_admin
ORDER BY n.name
"""
LIST_GRANTS = """
SELECT agent_id, namespace, can_read, can_write, granted_by, granted_at, accepted_at
FROM namespace_grants WHERE namespace = $1 ORDER BY agent_id
"""


class Brain:
    """Holds the pool and the providers; every method is one operation of the memory organ."""

    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        embedder: Embedder,
        *,
        keyword: KeywordBackend | None = None,
        reranker: Reranker | None = None,
        cache: RedisCache | None = None,
        chat: ChatModel | None = None,
        on_close: list | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.settings = settings
        self.clock = clock  # "now" for the write path's default valid_at, salience recency, inbox retention
        self.pool = pool
        self.embedder = embedder
        self.keyword = keyword or PostgresBM25(
            k1=settings.bm25_k1, b=settings.bm25_b, postings_per_term=settings.bm25_postings_per_term
        )
        self.reranker = reranker
        self.cache = cache
        self.chat = chat  # write decisions and entity extraction, when configured
        self._bookkeeper = Bookkeeper(pool)
        self._on_close = on_close or []
        self._cold = None

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
        """Connect, check the schema is current and fits the embedding model, load providers.

        With no ``dsn`` and no ``CABRAIN_DATABASE_URL``, holds a lease on the embedded server
        until :meth:`close`. ``embedder`` / ``reranker`` replace the configured ones (the Serve
        ingress passes handles to its model deployments). ``clock`` is "now" for what the brain
        decides by the time (:mod:`cabrain.clock`).
        """
        on_close = []
        if dsn is None:
            if settings.database_url is not None:
                dsn = settings.database_url.get_secret_value()
            else:
                from cabrain.store.embedded import EmbeddedPostgres

                server = EmbeddedPostgres.from_settings(settings)
                dsn = await asyncio.to_thread(server.acquire)
                on_close.append(server.release)
        try:
            embedder = embedder or await asyncio.to_thread(load_embedder, settings)
            pool = await create_pool(dsn, settings)
            try:
                async with pool.acquire() as conn:
                    state = await migrations.require_current(conn, settings.schema_dir)
                migrations.check_embedding_dim(state, embedder.dim, settings.embedding_model)
                if reranker is None:
                    reranker = await asyncio.to_thread(load_reranker, settings)
                chat = load_chat_model(settings)
                if chat is None and "llm" in (settings.write_decider, settings.entity_extractor):
                    raise ConfigError(
                        "CABRAIN_WRITE_DECIDER or CABRAIN_ENTITY_EXTRACTOR is 'llm' but no chat model is configured",
                        hint="set CABRAIN_LLM_URL (and CABRAIN_LLM_MODEL), or use 'auto' / 'deterministic'",
                    )
            except BaseException:
                await pool.close()
                raise
        except BaseException:
            for release in on_close:
                await asyncio.to_thread(release)
            raise
        cache = None
        if settings.redis_url is not None:
            cache = RedisCache(
                settings.redis_url.get_secret_value(),
                recall_ttl_s=settings.cache_recall_ttl_s,
                row_ttl_s=settings.cache_row_ttl_s,
                embedding_ttl_s=settings.cache_embedding_ttl_s,
                timeout_s=settings.cache_timeout_s,
            )
        return cls(settings, pool, embedder, reranker=reranker, cache=cache, chat=chat, on_close=on_close, clock=clock)

    async def close(self) -> None:
        await self._bookkeeper.close()
        if self.cache is not None:
            await self.cache.close()
        await self.pool.close()
        for release in self._on_close:
            await asyncio.to_thread(release)
        self._on_close = []

    async def __aenter__(self) -> Brain:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- embeddings ----------------------------------------------------------------------------
    def _embedding_key(self, kind: str, text: str) -> str:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return f"emb:{self.embedder.name}:{kind}:{digest}"

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed in batches of ``embed_batch_size``, through the L1 cache when there is one."""
        vectors: list[Any] = [None] * len(texts)
        keys = [self._embedding_key("doc", t) for t in texts]
        if self.cache is not None:
            for i, cached in enumerate(await self.cache.get_embeddings(keys)):
                if cached is not None and cached.shape == (self.embedder.dim,):
                    vectors[i] = cached.tolist()
        todo = [i for i, v in enumerate(vectors) if v is None]
        size = self.settings.embed_batch_size
        fresh = {}
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            embedded = await self._call_embedder(self.embedder.embed_documents, [texts[i] for i in chunk])
            if len(embedded) != len(chunk):
                raise EmbedderError(f"the embedder returned {len(embedded)} vectors for {len(chunk)} texts")
            for i, vec in zip(chunk, embedded, strict=True):
                if len(vec) != self.embedder.dim:
                    raise EmbedderError(f"the embedder returned a {len(vec)}-dim vector, expected {self.embedder.dim}")
                vectors[i] = vec
                fresh[keys[i]] = vec
        if self.cache is not None and fresh:
            import numpy as np

            await self.cache.set_embeddings({k: np.asarray(v, dtype=np.float32) for k, v in fresh.items()})
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        return await self._call_embedder(self.embedder.embed_query, text)

    async def _call_embedder(self, fn, arg):
        try:
            return await fn(arg)
        except CabrainError:
            raise
        except Exception as exc:  # a provider failing in any way: nothing gets written
            raise EmbedderError(f"the embedder {self.embedder.name} failed: {exc}; nothing was written") from exc

    # --- agents, namespaces, grants ------------------------------------------------------------
    async def create_agent(
        self, agent_id: str, *, display_name: str | None = None, is_admin: bool = False, exist_ok: bool = True
    ) -> str:
        """Register an agent (idempotent unless ``exist_ok`` is False: then an existing id is
        :class:`AlreadyExists`). Its API keys come from :meth:`create_key`."""
        async with self.pool.acquire() as conn:
            return await identity.create_agent(
                conn, agent_id, display_name=display_name, is_admin=is_admin, exist_ok=exist_ok
            )

    async def create_namespace(self, agent: str, name: str) -> bool:
        """Create a namespace owned by ``agent``; True if made now, False if ``agent`` already owns
        it (idempotent). One owned by another agent is :class:`AlreadyExists`; a personal name
        (``@other/...``) of another agent is :class:`AccessDenied`."""
        if not namespaces.is_valid(name):
            raise InputError(f"namespace {name!r} is not valid", hint=namespaces.HINT)
        owner_of_name = namespaces.personal_owner(name)
        if owner_of_name is not None and owner_of_name != agent:
            raise AccessDenied(
                f"namespace {name!r} is personal to agent {owner_of_name!r}: only that agent can create it",
                hint=f"your own personal namespaces start with '@{agent}/'",
            )
        async with self.pool.acquire() as conn:
            if not await conn.fetchval(AGENT_ACTIVE, agent):
                raise AccessDenied(f"agent {agent!r} is unknown or disabled")
            if await conn.fetchval(CREATE_NAMESPACE, name, agent) is not None:
                return True
            owner = await conn.fetchval(NAMESPACE_OWNER, name)
        if owner != agent:
            raise AlreadyExists(
                f"namespace {name!r} already exists and belongs to another agent",
                hint="choose another name (your personal ones start with '@"
                + agent
                + "/'), or ask its owner for a grant",
            )
        return False

    async def capture_namespace(
        self, agent: str, *, namespace: str | None = None, project: str | None = None
    ) -> tuple[str, bool]:
        """Where ``agent``'s captured memories go, and whether capture may inject that namespace's
        memories into the agent's context: ``(name, injectable)``.

        ``project`` (a name capture derived, e.g. from the git remote) is bound to the agent: its
        own namespace of that name if it has one from before, else the personal ``@agent/project``,
        created now, which nobody else can hold. ``namespace`` (one the operator configured) is used
        as it is, created for the agent if missing; its memories are injected only if the agent
        owns it or accepted a grant on it. Writing still needs write access, checked on write.
        """
        from cabrain.store.scope import INJECTABLE

        if (namespace is None) == (project is None):
            raise InputError("give either namespace or project")
        if project is not None:
            if not namespaces.is_valid(project) or project.startswith("@"):
                raise InputError(f"project {project!r} is not a valid namespace name", hint=namespaces.HINT)
            async with self.pool.acquire() as conn:
                own = await conn.fetchval(NAMESPACE_OWNER, project) == agent
            namespace = project if own else namespaces.personal(agent, project)
        assert namespace is not None
        try:
            await self.create_namespace(agent, namespace)
        except AlreadyExists:
            pass  # someone else's: writing needs their (accepted) grant, and it is injected only then
        async with self.pool.acquire() as conn:
            injectable = bool(await conn.fetchval(INJECTABLE, namespace, agent))
        return namespace, injectable

    async def _require_owner(self, conn: asyncpg.Connection, agent: str, namespace: str) -> None:
        if not await conn.fetchval(AGENT_ACTIVE, agent):
            raise AccessDenied(f"agent {agent!r} is unknown or disabled")
        row = await conn.fetchrow(NAMESPACE_OWNER, namespace)
        if row is None:
            raise NotFound(f"namespace {namespace!r} does not exist")
        if row["owner_agent_id"] != agent and not await conn.fetchval(IS_ADMIN, agent):
            raise AccessDenied(
                f"agent {agent!r} may not share namespace {namespace!r}",
                hint="only its owner or an admin can grant access",
            )

    async def share(
        self, agent: str, namespace: str, grantee: str, *, can_read: bool = True, can_write: bool = False
    ) -> bool:
        """Offer ``grantee`` read (and optionally write) access to ``namespace``'s team memories.
        Reading works at once; writing, and capture injecting the namespace's memories into the
        grantee's context, only once the grantee accepts (:meth:`accept_grant`). Returns whether the
        grant is accepted (narrowing an accepted grant keeps it accepted)."""
        async with self.pool.acquire() as conn, conn.transaction():
            await self._require_owner(conn, agent, namespace)
            if not await conn.fetchval(AGENT_EXISTS, grantee):
                raise NotFound(f"agent {grantee!r} does not exist")
            accepted = await conn.fetchval(UPSERT_GRANT, grantee, namespace, can_read, can_write, agent)
            await sql.insert_events(
                conn,
                [
                    {
                        "namespace": namespace,
                        "op": "share",
                        "agent_id": agent,
                        "metadata": {
                            "grantee": grantee,
                            "can_read": can_read,
                            "can_write": can_write,
                            "accepted": accepted,
                        },
                    }
                ],
            )
        return bool(accepted)

    async def accept_grant(self, agent: str, namespace: str) -> dict[str, Any]:
        """``agent`` accepts the grant it was offered on ``namespace`` (idempotent)."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(AGENT_ACTIVE, agent):
                raise AccessDenied(f"agent {agent!r} is unknown or disabled")
            row = await conn.fetchrow(ACCEPT_GRANT, agent, namespace)
            if row is None:
                raise NotFound(
                    f"agent {agent!r} holds no grant on namespace {namespace!r}",
                    fix=Fix("offer_grant", {"namespace": namespace, "agent": agent}),
                )
            await sql.insert_events(
                conn,
                [
                    {
                        "namespace": namespace,
                        "op": "accept_grant",
                        "agent_id": agent,
                        "metadata": {"can_read": row["can_read"], "can_write": row["can_write"]},
                    }
                ],
            )
        return {"namespace": namespace, "agent": agent, **dict(row)}

    async def decline_grant(self, agent: str, namespace: str) -> bool:
        """``agent`` declines (or gives up) its grant on ``namespace``; True if there was one."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(AGENT_ACTIVE, agent):
                raise AccessDenied(f"agent {agent!r} is unknown or disabled")
            status = await conn.execute(DELETE_GRANT, agent, namespace)
            if status.endswith(" 1"):
                await sql.insert_events(conn, [{"namespace": namespace, "op": "decline_grant", "agent_id": agent}])
        return status.endswith(" 1")

    async def revoke(self, agent: str, namespace: str, grantee: str) -> bool:
        """Remove ``grantee``'s grant on ``namespace``; True if there was one."""
        async with self.pool.acquire() as conn, conn.transaction():
            await self._require_owner(conn, agent, namespace)
            status = await conn.execute(DELETE_GRANT, grantee, namespace)
            await sql.insert_events(
                conn,
                [
                    {
                        "namespace": namespace,
                        "op": "revoke",
                        "agent_id": agent,
                        "metadata": {"grantee": grantee},
                    }
                ],
            )
        return status.endswith(" 1")

    async def list_namespaces(self, agent: str) -> list[dict[str, Any]]:
        """Namespaces ``agent`` owns or holds a grant on (every namespace for an admin)."""
        async with self.pool.acquire() as conn:
            if not await conn.fetchval(AGENT_ACTIVE, agent):
                raise AccessDenied(f"agent {agent!r} is unknown or disabled")
            rows = [dict(r) for r in await conn.fetch(LIST_NAMESPACES, agent)]
        for row in rows:  # the grant offered to the agent, if any
            if isinstance(row["grant"], str):
                row["grant"] = json.loads(row["grant"])
        return rows

    async def list_grants(self, agent: str, namespace: str) -> list[dict[str, Any]]:
        """The grants on ``namespace`` (its owner and admins only)."""
        async with self.pool.acquire() as conn:
            await self._require_owner(conn, agent, namespace)
            return [dict(r) for r in await conn.fetch(LIST_GRANTS, namespace)]

    # --- identity: API keys ---------------------------------------------------------------------
    async def authenticate(self, key: str | None) -> identity.Principal:
        async with self.pool.acquire() as conn:
            return await identity.authenticate(conn, key)

    async def create_key(self, agent_id: str, *, label: str | None = None) -> identity.NewKey:
        async with self.pool.acquire() as conn:
            return await identity.create_key(conn, agent_id, label=label)

    async def revoke_key(self, key_id: uuid.UUID | str, *, agent_id: str | None = None) -> bool:
        async with self.pool.acquire() as conn:
            return await identity.revoke_key(conn, _as_uuid(key_id, "key id"), agent_id=agent_id)

    async def list_agents(self) -> list[identity.AgentInfo]:
        async with self.pool.acquire() as conn:
            return await identity.list_agents(conn)

    async def list_keys(self, agent_id: str) -> list[identity.KeyInfo]:
        async with self.pool.acquire() as conn:
            return await identity.list_keys(conn, agent_id)

    async def disable_agent(self, agent_id: str) -> bool:
        async with self.pool.acquire() as conn:
            return await identity.disable_agent(conn, agent_id)

    # --- memory operations ---------------------------------------------------------------------
    async def retain(
        self, agent: str, items: MemoryInput | Sequence[MemoryInput], *, decide: bool = True
    ) -> list[RetainResult]:
        """Write one memory or a batch (SPEC §4.1). ``decide=False`` stores every item as ADD
        without comparing it with its neighbours (bulk imports of independent documents)."""
        from cabrain.write.retain import retain

        batch = [items] if isinstance(items, MemoryInput) else list(items)
        started = time.perf_counter()
        results = await retain(self, agent, batch, decide_writes=decide)
        log.info("retain", extra={"agent": agent, "count": len(batch), "ms": (time.perf_counter() - started) * 1000})
        return results

    async def recall(self, agent: str, query: RecallQuery) -> RecallResult:
        """Hybrid recall (SPEC §4.2), through the L1 cache when there is one."""
        from cabrain.search.recall import recall, validate

        validate(query, max_k=self.settings.recall_max_k, max_chars=self.settings.max_query_chars)
        key = None
        if self.cache is not None:
            started = time.perf_counter()
            async with self.pool.acquire() as conn:  # read before the answer is computed: see providers/cache.py
                scope = await conn.fetchrow(CACHE_SCOPE, query.namespace)
            if scope is not None:
                key = f"recall:{scope['gen']}:{scope['cache_gen']}:{_digest(agent, query)}"
                cached = await self.cache.get(key)
                if cached is not None:
                    result = recall_from_dict(json.loads(cached), cached=True)
                    latency = (time.perf_counter() - started) * 1000
                    self.after_recall(agent, query, [h.memory.id for h in result.hits], latency)
                    return result
        result = await recall(self, agent, query)
        if key is not None:
            await self.cache.set(key, json.dumps(recall_to_dict(result)), self.cache.recall_ttl_s)
        return result

    def cold_tier(self):
        """The Iceberg cold tier, opened on first use (archive recall and demoted ids only)."""
        if self._cold is None:
            from cabrain.sleep.cold import ColdTier

            self._cold = ColdTier(self.settings)
        return self._cold

    async def recall_archive(self, agent: str, query: ArchiveQuery) -> ArchiveResult:
        """Search the cold tier: demoted memories, with the same scoping as :meth:`recall`.

        An explicit, slower call (it reads the namespace's Iceberg files); hot recall never
        touches the cold tier. Invalidated memories are included unless the query says not."""
        from cabrain.search.archive import recall_archive
        from cabrain.search.recall import validate

        # the same text, k and time-range rules as hot recall
        validate(query, max_k=self.settings.recall_max_k, max_chars=self.settings.max_query_chars)
        started = time.perf_counter()
        result = await recall_archive(self, agent, query)
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

    async def get(self, agent: str, memory_id: uuid.UUID | str) -> MemoryWithHistory:
        """A memory in any state, with its provenance, its versions before and after, and its
        entities. Unknown and unreadable ids are both :class:`NotFound` (existence does not leak)."""
        memory_id = _as_uuid(memory_id)
        key = None
        async with self.pool.acquire() as conn:
            scope = await conn.fetchrow(CACHE_SCOPE_OF_ID, memory_id)
            if scope is None:
                raise NotFound(f"memory {memory_id} does not exist or is not visible to {agent!r}")
            namespace = scope["namespace"]
            if self.cache is not None:
                key = f"get:{scope['gen']}:{scope['cache_gen']}:{agent}:{memory_id}"
                cached = await self.cache.get(key)
                if cached is not None:
                    return history_from_dict(json.loads(cached))
            row = await conn.fetchrow(sql.GET_READABLE, namespace, agent, memory_id)
            if row is not None:
                memory = sql.to_memory(row)
                following, previous, entities = await self._history(conn, namespace, agent, memory_id, memory_id)
            else:
                cold = await conn.fetchrow(sql.COLD_READABLE, namespace, agent, memory_id)
                if cold is None:
                    raise NotFound(f"memory {memory_id} does not exist or is not visible to {agent!r}")
        if row is None:  # demoted: read from the cold tier with no database connection held
            memory = await self._read_cold(namespace, memory_id, cold)
            async with self.pool.acquire() as conn:
                following, previous, entities = await self._history(
                    conn, namespace, agent, memory_id, memory.superseded_by, successor=True
                )
        result = MemoryWithHistory(
            memory=memory,
            previous=[sql.to_memory(r) for r in previous],
            next=[sql.to_memory(r) for r in following],
            entities=[r["name"] for r in entities],
        )
        if key is not None:
            await self.cache.set(key, json.dumps(history_to_dict(result)), self.cache.row_ttl_s)
        return result

    @staticmethod
    async def _history(
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
            first = await conn.fetchrow(sql.GET_READABLE, namespace, agent, chain) if successor else None
            if first is not None or not successor:
                following = ([first] if first else []) + list(
                    await conn.fetch(sql.NEXT_VERSIONS, namespace, agent, chain)
                )
        previous = await conn.fetch(sql.PREVIOUS_VERSIONS, namespace, agent, memory_id)
        entities = await conn.fetch(sql.ENTITIES_OF, memory_id)
        return following, list(previous), list(entities)

    async def _read_cold(self, namespace: str, memory_id: uuid.UUID, where: asyncpg.Record) -> Memory:
        """A demoted memory's row from the cold tier (``where``: its ``COLD_READABLE`` row), shown
        as forgotten when it was forgotten after its demotion (its text, once purged, is gone)."""
        from pyiceberg.expressions import EqualTo

        from cabrain.search.archive import memory_of
        from cabrain.sleep.cold import month_of
        from cabrain.types import MemoryType, Network, Visibility

        if where["purged_at"] is not None:  # forgotten, and its text removed from the cold tier since
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

        cold = await asyncio.to_thread(self.cold_tier)
        rows = await asyncio.to_thread(
            cold.newest, namespace, [str(memory_id)], EqualTo("valid_month", month_of(where["valid_at"]))
        )
        if str(memory_id) not in rows:
            raise ColdStoreError(
                f"memory {memory_id} was demoted to the cold tier (batch {where['cold_batch']}) "
                "but its row is not in the Iceberg table",
                hint="check CABRAIN_COLD_CATALOG_URI / CABRAIN_COLD_WAREHOUSE point at the cold tier the sleep cycle writes",
            )
        memory = memory_of(rows[str(memory_id)])
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
        if not 1 <= limit <= 10_000:
            raise InputError(f"limit must be between 1 and 10000, got {limit}")
        if include_archived and not source_kind:
            raise InputError("include_archived lists archived memories of one source_kind; give it")
        async with self.pool.acquire() as conn:
            if await conn.fetchval(NAMESPACE_OWNER_EXISTS, namespace) is None:
                raise NotFound(f"namespace {namespace!r} does not exist")
            rows = await conn.fetch(sql.LIST_CURRENT, namespace, agent, source_kind, source_ref_prefix, limit)
            found = [sql.to_memory(r) for r in rows]
            if include_archived:
                found += await self._archived_current(conn, agent, namespace, source_kind, source_ref_prefix)
        found.sort(key=lambda m: (m.source_ref is None, m.source_ref or "", m.created_at))
        return found[:limit]

    async def _archived_current(
        self, conn: asyncpg.Connection, agent: str, namespace: str, source_kind: str, prefix: str | None
    ) -> list[Memory]:
        """Current memories of ``source_kind`` in the cold tier that ``agent`` may read. Reads the
        Iceberg table only when memory_ids says there are some (or does not know yet: identities
        archived before schema 0010 learn their source_kind here, once)."""
        from cabrain.search.archive import memory_of

        unknown = [r["id"] for r in await conn.fetch(ARCHIVED_UNKNOWN_KIND, namespace)]
        if unknown:
            cold = await asyncio.to_thread(self.cold_tier)
            for start in range(0, len(unknown), 1000):
                part = unknown[start : start + 1000]
                rows = await asyncio.to_thread(cold.newest, namespace, [str(i) for i in part])
                kinds = {i: (rows[str(i)]["source_kind"] or "") if str(i) in rows else "" for i in part}
                await conn.execute(SET_ARCHIVED_KIND, list(kinds), list(kinds.values()))
        ids = [r["id"] for r in await conn.fetch(ARCHIVED_OF_KIND, namespace, source_kind)]
        if not ids:
            return []
        cold = await asyncio.to_thread(self.cold_tier)
        rows = await asyncio.to_thread(cold.newest, namespace, [str(i) for i in ids])
        out = []
        for memory_id in ids:
            row = rows.get(str(memory_id))
            if row is None or row["invalid_at"] is not None:
                continue
            if prefix and not (row["source_ref"] or "").startswith(prefix):
                continue
            if await conn.fetchrow(sql.COLD_READABLE, namespace, agent, memory_id):
                out.append(memory_of(row))
        return out

    async def unarchive(self, agent: str, memory_id: uuid.UUID | str) -> Memory:
        """Bring an archived (demoted) current memory back to the hot tier, with its own id, content,
        validity, provenance and links: it is recalled again (its passages and keyword postings are
        rebuilt). The cold tier keeps its copy. Needs write access to the namespace."""
        from cabrain.search.archive import memory_of
        from cabrain.search.chunking import chunk
        from cabrain.search.keyword import IndexedDoc
        from cabrain.write.retain import NAMESPACE_LOCK, check_write_access

        memory_id = _as_uuid(memory_id)
        async with self.pool.acquire() as conn:
            namespace = await conn.fetchval(sql.NAMESPACE_OF, memory_id)
            where = namespace and await conn.fetchrow(sql.COLD_READABLE, namespace, agent, memory_id)
            if not where:
                if namespace and await sql.readable_memory(conn, agent, memory_id) is not None:
                    raise InputError(f"memory {memory_id} is not archived")
                raise NotFound(f"memory {memory_id} does not exist or is not visible to {agent!r}")
            await check_write_access(conn, agent, namespace)
        if where["forgotten_at"] is not None:
            raise InputError(f"memory {memory_id} was forgotten; a forgotten memory is not brought back")
        cold = await asyncio.to_thread(self.cold_tier)
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
        passages = chunk(
            memory.content, target_chars=self.settings.chunk_chars, min_chars=self.settings.chunk_min_chars
        )
        vectors = await self.embed_documents([memory.content, *passages])
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(NAMESPACE_LOCK, namespace)
            if not await conn.fetchrow(sql.COLD_READABLE, namespace, agent, memory_id):
                raise InputError(f"memory {memory_id} is no longer archived")
            await conn.execute(
                RESTORE_ROW,
                memory.id,
                namespace,
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
            )
            await self.keyword.index(conn, [IndexedDoc(memory.id, namespace, memory.valid_at, memory.content)])
            await sql.insert_chunks(
                conn,
                [
                    (memory.id, n, namespace, memory.valid_at, text, vec)
                    for n, (text, vec) in enumerate(zip(passages, vectors[1:], strict=True))
                ],
            )
            await sql.insert_events(
                conn,
                [
                    {
                        "namespace": namespace,
                        "op": "unarchive",
                        "memory_id": memory.id,
                        "agent_id": agent,
                        "metadata": {},
                    }
                ],
            )
            restored = await sql.readable_memory(conn, agent, memory.id)
        assert restored is not None
        return restored

    # --- entities --------------------------------------------------------------------------------
    async def list_entities(
        self, agent: str, namespace: str, *, query: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EntityPage:
        """Entities of ``namespace`` in name order, with their summaries, as :mod:`cabrain.store.entities`
        scopes them (an agent that may not read the namespace gets :class:`NotFound`). ``query`` keeps
        names that contain it (any case); ``cursor`` is a page's ``next_cursor``."""
        if not 1 <= limit <= 200:
            raise InputError(f"limit must be between 1 and 200, got {limit}")
        key_part = entity_key(query) if query is not None and query.strip() else None
        async with self.pool.acquire() as conn:
            await entity_sql.require_readable(conn, namespace, agent)
            found, next_cursor = await entity_sql.page(
                conn, namespace, agent, key_part=key_part, after=cursor or None, limit=limit
            )
        return EntityPage(found, next_cursor)

    async def get_entity(
        self, agent: str, namespace: str, name_or_id: str, *, history: bool = False, limit: int = 20
    ) -> EntityWithMemories:
        """One entity of ``namespace`` (by name, in any case, or by id) with its summary when the caller
        may read every memory it was made from, and the hot memories that mention it the caller may
        read, newest first (``history``: superseded and forgotten ones too), at most ``limit``.
        Unknown, unreadable and never-mentioned-to-the-caller entities are all :class:`NotFound`."""
        if not 1 <= limit <= 200:
            raise InputError(f"limit must be between 1 and 200, got {limit}")
        if not isinstance(name_or_id, str) or not name_or_id.strip():
            raise InputError("give an entity's name or id")
        try:
            entity_id = uuid.UUID(name_or_id)
        except ValueError:
            entity_id = None
        async with self.pool.acquire() as conn:
            await entity_sql.require_readable(conn, namespace, agent)
            entity = await entity_sql.one(
                conn, namespace, agent, entity_id=entity_id, key=entity_key(name_or_id), name=name_or_id
            )
            rows = await entity_sql.memories(conn, namespace, agent, entity.id, history=history, limit=limit)
        return EntityWithMemories(entity, [sql.to_memory(r) for r in rows])

    async def _writable(
        self, conn: asyncpg.Connection, agent: str, memory_id: uuid.UUID, *, archived_too: bool = False
    ) -> tuple[Memory | None, str]:
        """The memory ``agent`` may read and change, and its namespace; the memory is None for a
        demoted one, which only ``archived_too`` callers (forget) accept: the archive keeps memories
        as they were. Unknown and unreadable ids are both :class:`NotFound`."""
        from cabrain.write.retain import check_write_access

        memory = await sql.readable_memory(conn, agent, memory_id)
        if memory is not None:
            namespace = memory.namespace
        else:
            namespace = await conn.fetchval(sql.NAMESPACE_OF, memory_id)
            cold = namespace and await conn.fetchrow(sql.COLD_READABLE, namespace, agent, memory_id)
            if not cold:
                raise NotFound(f"memory {memory_id} does not exist or is not visible to {agent!r}")
            if not archived_too:
                raise InputError(
                    f"memory {memory_id} was moved to the cold tier on {cold['demoted_at'].isoformat()}; "
                    "archived memories are kept as they were and cannot be changed",
                    fix=Fix("read_archived", {"memory_id": str(memory_id)}),
                )
        await check_write_access(conn, agent, namespace)
        return memory, namespace

    async def forget(self, agent: str, memory_id: uuid.UUID | str, *, reason: str | None = None) -> MemoryWithHistory:
        """Soft-forget: the memory gets ``invalid_at`` and leaves recall; ``get`` still shows it. A
        memory already demoted to the cold tier (kept there as it was) is forgotten on its identity:
        archive recall leaves it out from then on. Either way the forget is recorded on the memory's
        identity, and the raw captured text it came from, if still kept, is removed."""
        memory_id = _as_uuid(memory_id)
        if reason and self.settings.redact_secrets:
            reason = redact(reason)  # stored with the memory and its identity
        meta = {"forgotten_by": agent, **({"forget_reason": reason} if reason else {})}
        async with self.pool.acquire() as conn, conn.transaction():
            memory, namespace = await self._writable(conn, agent, memory_id, archived_too=True)
            if memory is None:
                meta["tier"] = "cold"
            else:
                await conn.fetchval(sql.INVALIDATE, memory_id, json.dumps(meta, ensure_ascii=False), None)
            await conn.execute(sql.FORGET_IDENTITY, memory_id, agent, reason)
            await conn.execute(inbox.FORGET, memory_id)  # the raw captured text it came from, if still kept
            await sql.insert_events(
                conn,
                [
                    {
                        "namespace": namespace,
                        "op": "forget",
                        "memory_id": memory_id,
                        "agent_id": agent,
                        "metadata": meta,
                    }
                ],
            )
        return await self.get(agent, memory_id)

    async def reconsolidate(
        self,
        agent: str,
        old_id: uuid.UUID | str,
        corrected_content: str,
        *,
        reason: str | None = None,
        source_ref: str | None = None,
    ) -> RetainResult:
        """Replace a memory with a corrected version (SPEC §4.4): the new memory keeps the old one's
        namespace, visibility and classification (and its ``source_ref`` unless a new one is given: a
        renamed memory-tool file); the old one gets ``invalid_at`` + ``superseded_by``."""
        from cabrain.types import Decision
        from cabrain.write.retain import retain

        old_id = _as_uuid(old_id)
        async with self.pool.acquire() as conn:
            old, _ = await self._writable(conn, agent, old_id)
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
        [result] = await retain(self, agent, [item], decide_writes=False, supersede=old_id)
        return RetainResult(
            Decision.UPDATE,
            result.memory_id,
            result.importance,
            (old_id,),
            result.entities,
            reason or "reconsolidated",
        )

    # --- judgments: what CaBrain decided on its own, and undoing it ------------------------------
    async def judgments(self, agent: str, memory_id: uuid.UUID | str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The judgments (supersessions, invalidations, merges, corrections, reverts) that changed a
        memory the agent may read, newest first."""
        from cabrain.store import judgments

        memory_id = _as_uuid(memory_id)
        if not 1 <= limit <= 500:
            raise InputError(f"limit must be between 1 and 500, got {limit}")
        async with self.pool.acquire() as conn:
            await self._must_read(conn, agent, memory_id)
            rows = await judgments.of_memory(conn, memory_id, limit)
            return [judgments.describe(r) for r in rows if await self._may_see_judgment(conn, agent, r)]

    async def revert(
        self,
        agent: str,
        *,
        judgment_id: uuid.UUID | str | None = None,
        memory_id: uuid.UUID | str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Undo a judgment - by its id, or the latest one not reverted yet that changed ``memory_id``:
        every memory it changed gets back its state before it (the same id, content, validity,
        metadata and links), and the revert is recorded as a judgment of its own (revertible in
        turn). Only an agent that may write the namespace and read every memory involved may."""
        from cabrain.store import judgments
        from cabrain.write import retain as retain_sql
        from cabrain.write.retain import check_write_access

        if (judgment_id is None) == (memory_id is None):
            raise InputError("give a judgment id or a memory id, not both")
        reason = redact(reason) if reason and self.settings.redact_secrets else reason
        async with self.pool.acquire() as conn, conn.transaction():
            if judgment_id is not None:
                row = await judgments.get(conn, _as_uuid(judgment_id, "judgment id"))
                if row is None or not await self._may_see_judgment(conn, agent, row):
                    raise NotFound(f"judgment {judgment_id} does not exist or is not visible to {agent!r}")
            else:
                memory_id = _as_uuid(memory_id)
                await self._must_read(conn, agent, memory_id)
                rows = [r for r in await judgments.of_memory(conn, memory_id, 500) if r["reverted_by"] is None]
                if not rows:
                    raise NotFound(f"no judgment to revert changed memory {memory_id}")
                row = rows[0]
                if not await self._may_see_judgment(conn, agent, row):
                    raise NotFound(f"no judgment to revert changed memory {memory_id}")
            await conn.execute(retain_sql.NAMESPACE_LOCK, row["namespace"])
            await check_write_access(conn, agent, row["namespace"])
            row = await judgments.get(conn, row["id"])  # again, under the lock
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
            return judgments.describe(await judgments.get(conn, undo.id))

    async def _must_read(self, conn: asyncpg.Connection, agent: str, memory_id: uuid.UUID) -> None:
        """NotFound unless ``agent`` may read the memory, hot or archived."""
        namespace = await conn.fetchval(sql.NAMESPACE_OF, memory_id)
        if not (namespace and await conn.fetchval(ALL_READABLE, namespace, agent, [memory_id])):
            raise NotFound(f"memory {memory_id} does not exist or is not visible to {agent!r}")

    async def _may_see_judgment(self, conn: asyncpg.Connection, agent: str, row: asyncpg.Record) -> bool:
        """Every memory a judgment is about is readable by ``agent`` (it shows their states)."""
        return bool(await conn.fetchval(ALL_READABLE, row["namespace"], agent, list(row["memory_ids"])))

    async def touch(self, agent: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Count a read of these memories (a memory-tool file viewed): their use and recency rise as a
        recall's hits do, so what is looked at does not fade. Unreadable ids are skipped; returns how
        many were counted."""
        ids = [_as_uuid(i) for i in memory_ids]
        if len(ids) > 1000:
            raise InputError(f"at most 1000 memories at a time, got {len(ids)}")
        seen = []
        async with self.pool.acquire() as conn:
            for memory_id in dict.fromkeys(ids):
                memory = await sql.readable_memory(conn, agent, memory_id)
                if memory is not None and memory.invalid_at is None:
                    seen.append(memory)
        for namespace in sorted({m.namespace for m in seen}):
            mine = [m.id for m in seen if m.namespace == namespace]
            self._bookkeeper.record(
                mine,
                {"namespace": namespace, "op": "read", "agent_id": agent, "metadata": {"ids": [str(i) for i in mine]}},
            )
        return len(seen)

    # --- background work and cache -------------------------------------------------------------
    def after_recall(self, agent: str, query: RecallQuery, ids: list[uuid.UUID], latency_ms: float) -> None:
        """Queue access bookkeeping and the recall's event; written off the response path."""
        self._bookkeeper.record(
            ids,
            {
                "namespace": query.namespace,
                "op": "recall",
                "agent_id": agent,
                "latency_ms": int(latency_ms),
                "metadata": {"k": query.k, "mode": query.mode.value, "hits": [str(i) for i in ids]},
            },
        )


def _as_uuid(value: uuid.UUID | str, what: str = "memory id") -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InputError(f"{value!r} is not a {what} (a UUID)") from None


def _digest(agent: str, query: RecallQuery) -> str:
    parts = [
        agent,
        query.query,
        query.namespace,
        query.k,
        query.mode.value,
        query.include_invalid,
        [n.value for n in query.networks or ()],
        [t.value for t in query.memory_types or ()],
        list(query.source_kinds or ()),
        str(query.valid_from),
        str(query.valid_to),
        query.rerank,
        query.expand,
    ]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()
