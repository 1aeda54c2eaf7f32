"""The engine: what every pipeline runs with, in one object.

It holds the dependencies (settings, clock, the connection pool, the embedder behind the L1
embedding cache, the keyword backend, the reranker, the chat model, the L1 cache, recall's
bookkeeping, the cold tier, the hot tier's read replicas) and nothing else. The pipelines
(:mod:`cabrain.search.recall`, :mod:`cabrain.search.archive`, :mod:`cabrain.write.retain`,
:mod:`cabrain.write.changes`, the capture inbox, workflow dispatch) take an ``Engine``; the faces
never do: they call the :class:`cabrain.brain.Brain` facade, which validates, caches and calls a
pipeline.

The import order is one way: faces -> brain -> pipelines -> engine -> store / providers.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg
import numpy as np

from cabrain.clock import Clock, utc_now
from cabrain.errors import CabrainError, ConfigError, EmbedderError
from cabrain.governance import Governor, MeteredChat
from cabrain.limits import AgentSlots
from cabrain.providers.cache import RedisCache
from cabrain.providers.embedders import Embedder, load_embedder
from cabrain.providers.llm import ChatModel, load_chat_model
from cabrain.providers.rerankers import Reranker, load_reranker
from cabrain.settings import Settings
from cabrain.store import migrations
from cabrain.store.bookkeeping import Bookkeeper
from cabrain.store.embedded import EmbeddedPostgres
from cabrain.store.keyword import KeywordBackend, PostgresBM25
from cabrain.store.pool import create_pool
from cabrain.store.reconnect import CONNECTION_LOST
from cabrain.store.replicas import PINNED, PRIMARY, READ_AFTER, Replicas, wal_position

if TYPE_CHECKING:  # pyiceberg loads only when the cold tier is first used
    from cabrain.store.cold import ColdTier

T = TypeVar("T")
A = TypeVar("A")


class Engine:
    """The dependencies of the memory organ. Built by :meth:`open`; closed by :meth:`close`."""

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
        on_close: list[Callable[[], None]] | None = None,
        clock: Clock = utc_now,
        replicas: Replicas | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock  # "now" for the write path's default valid_at, salience recency, inbox retention
        self.pool = pool  # the primary: every write, and reads that are not routed (read_pool)
        self.replicas = replicas  # CABRAIN_DATABASE_REPLICA_URLS (cabrain.store.replicas)
        self.embedder = embedder
        self.keyword: KeywordBackend = keyword or PostgresBM25(
            k1=settings.bm25_k1,
            b=settings.bm25_b,
            postings_per_term=settings.bm25_postings_per_term,
            dates=settings.index_dates,
        )
        self.reranker = reranker
        self.cache = cache
        # roles, caps and usage (cabrain.governance): every operation is checked and counted there
        self.governor = Governor(
            pool, clock, flush_s=settings.usage_flush_s, profile_ttl_s=settings.api_key_cache_ttl_s
        )
        # what one agent may run at once here (cabrain.limits): the gate holds a slot per operation
        self.running = AgentSlots(
            settings.max_concurrent_per_agent,
            settings.max_queued_per_agent,
            refusal=lambda agent, limit: (
                f"agent {agent!r} has {limit} operations running and more waiting, the most one agent may"
            ),
            setting="CABRAIN_MAX_CONCURRENT_PER_AGENT or CABRAIN_MAX_QUEUED_PER_AGENT",
        )
        # write decisions and entity extraction, when configured; each call metered to the agent acted for
        self.chat = MeteredChat(chat, self.governor) if chat is not None else None
        self.bookkeeper = Bookkeeper(pool)
        self._on_close = on_close or []
        self._cold: ColdTier | None = None

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        dsn: str | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        clock: Clock = utc_now,
    ) -> Engine:
        """Connect, check the schema is current and fits the embedding model, load providers.

        With no ``dsn`` and no ``CABRAIN_DATABASE_URL``, holds a lease on the embedded server
        until :meth:`close`. ``embedder`` / ``reranker`` replace the configured ones (the Serve
        ingress passes handles to its model deployments)."""
        on_close: list[Callable[[], None]] = []
        if dsn is None:
            if settings.database_url is not None:
                dsn = settings.database_url.get_secret_value()
            else:
                server = EmbeddedPostgres.from_settings(settings)
                dsn = await asyncio.to_thread(server.acquire)
                on_close.append(server.release)
        try:
            model: Embedder = embedder if embedder is not None else await asyncio.to_thread(load_embedder, settings)
            pool = await create_pool(dsn, settings)
            try:
                async with pool.acquire() as conn:
                    state = await migrations.require_current(conn, settings.schema_dir)
                migrations.check_embedding_dim(state, model.dim, settings.embedding_model)
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
        # each replica is connected to and measured on first use (a read, or health)
        standbys = Replicas(settings.replica_dsns, settings, pool) if settings.replica_dsns else None
        return cls(
            settings,
            pool,
            model,
            reranker=reranker,
            cache=cache,
            chat=chat,
            on_close=on_close,
            clock=clock,
            replicas=standbys,
        )

    async def close(self) -> None:
        await self.governor.close()
        await self.bookkeeper.close()
        if self.cache is not None:
            await self.cache.close()
        if self.replicas is not None:
            await self.replicas.close()
        await self.pool.close()
        for release in self._on_close:
            await asyncio.to_thread(release)
        self._on_close = []

    # --- reads from replicas --------------------------------------------------------------------
    def read_pool(self) -> asyncpg.Pool:
        """The pool a read runs on: the replica :meth:`reading` chose for this call, else the primary."""
        pinned = PINNED.get()
        return self.pool if pinned is None else pinned

    async def reading(self, op: Callable[[], Awaitable[T]], *, again: bool = True) -> T:
        """Run the read ``op`` with :meth:`read_pool` on a replica when one may serve it (up, within
        ``replica_max_lag_s``, and past the caller's last write, :data:`READ_AFTER`), else
        on the primary. A replica lost during the read leaves the rotation, and the read runs once
        more on the primary (``again``; an export that has begun writing its output does not)."""
        if self.replicas is None or PINNED.get() is not None or PRIMARY.get():
            return await op()
        pool = await self.replicas.choose(READ_AFTER.get())
        if pool is None:
            return await op()
        token = PINNED.set(pool)
        try:
            return await op()
        except CONNECTION_LOST as exc:
            await self.replicas.lost(pool, exc)
            if not again:
                raise
        except asyncpg.SerializationError:  # a query cancelled by a conflict with the replica's recovery
            if not again:
                raise
        finally:
            PINNED.reset(token)
        return await op()

    async def wal_position(self) -> str:
        """The primary's WAL position now: a read naming it sees every write committed before."""
        return await wal_position(self.pool)

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
            await self.cache.set_embeddings({k: np.asarray(v, dtype=np.float32) for k, v in fresh.items()})
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        return await self._call_embedder(self.embedder.embed_query, text)

    async def _call_embedder(self, fn: Callable[[A], Awaitable[T]], arg: A) -> T:
        await self.governor.model_call("embed", len(arg) if isinstance(arg, list) else 1)
        try:
            return await fn(arg)
        except CabrainError:
            raise
        except Exception as exc:  # a provider failing in any way: nothing gets written
            raise EmbedderError(f"the embedder {self.embedder.name} failed: {exc}; nothing was written") from exc

    # --- the cold tier -------------------------------------------------------------------------
    def cold_tier(self) -> ColdTier:
        """The Iceberg cold tier, opened on first use (archive recall and demoted ids only)."""
        if self._cold is None:
            from cabrain.store.cold import ColdTier  # pyiceberg is heavy: loaded on first use

            self._cold = ColdTier(self.settings)
        return self._cold

    # --- bookkeeping, off the response path ------------------------------------------------------
    def record_access(self, ids: list[uuid.UUID], event: dict[str, Any]) -> None:
        """Queue access counts for ``ids`` and one ``memory_events`` row; written in the background."""
        self.bookkeeper.record(ids, event)
