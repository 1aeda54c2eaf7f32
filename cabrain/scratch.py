"""Scratch databases for the measuring tools (eval, bench): created on the hot tier's server, migrated,
with a Brain on them, and dropped after (or kept between runs, for a corpus that takes long to build)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

from cabrain.brain import Brain
from cabrain.providers.embedders import Embedder
from cabrain.settings import Settings
from cabrain.store import migrations
from cabrain.store import scratch as sql
from cabrain.store.db import ServerFacts, check_server, connect, hot_tier, server_facts


def with_database(dsn: str, database: str) -> str:
    """``dsn`` pointing at another database on the same server."""
    return urlunsplit(urlsplit(dsn)._replace(path="/" + database))


async def _migrated_brain(settings: Settings, embedder: Embedder, dsn: str) -> Brain:
    conn = await connect(dsn)
    try:
        await migrations.migrate(
            conn, settings.schema_dir, embedding_dim=embedder.dim, embedding_model=settings.embedding_model
        )
    finally:
        await conn.close()
    return await Brain.open(settings.model_copy(update={"redis_url": None}), dsn=dsn, embedder=embedder)


@contextlib.asynccontextmanager
async def _admin(settings: Settings, dsn: str) -> AsyncIterator:
    admin = await connect(dsn, timeout=settings.db_connect_timeout_s)
    try:
        yield admin
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def scratch_brain(settings: Settings, embedder: Embedder, *, prefix: str) -> AsyncIterator[tuple]:
    """A migrated, empty database of its own and a Brain on it (no cache); yields
    ``(brain, server facts, the database's DSN)``. The database is dropped afterwards, whatever happens."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with hot_tier(settings) as dsn:
        async with _admin(settings, dsn) as admin:
            facts: ServerFacts = await server_facts(admin)
            check_server(facts)
            await admin.execute(sql.create_database(name))
        try:
            scratch_dsn = with_database(dsn, name)
            brain = await _migrated_brain(settings, embedder, scratch_dsn)
            try:
                yield brain, facts, scratch_dsn
            finally:
                await brain.close()
        finally:
            async with _admin(settings, dsn) as admin:
                await admin.execute(sql.drop_database(name))


@contextlib.asynccontextmanager
async def kept_brain(settings: Settings, embedder: Embedder, *, name: str, fingerprint: str) -> AsyncIterator[tuple]:
    """A database kept between runs (a benchmark corpus that takes long to build); yields
    ``(brain, server facts, DSN, complete)``. ``complete`` is True when the database exists and was
    marked with ``fingerprint`` by :func:`mark_complete`; otherwise it is made afresh (empty)."""
    with hot_tier(settings) as dsn:
        async with _admin(settings, dsn) as admin:
            facts: ServerFacts = await server_facts(admin)
            check_server(facts)
            mark = await admin.fetchval(sql.DATABASE_MARK, name)
            complete = mark == fingerprint
            if not complete:
                await admin.execute(sql.drop_database(name))
                await admin.execute(sql.create_database(name))
        kept_dsn = with_database(dsn, name)
        brain = await _migrated_brain(settings, embedder, kept_dsn)
        try:
            yield brain, facts, kept_dsn, complete
        finally:
            await brain.close()


async def mark_complete(brain: Brain, name: str, fingerprint: str) -> None:
    """Mark the kept database ``name`` as holding what ``fingerprint`` describes."""
    async with brain.engine.pool.acquire() as conn:
        await conn.execute(sql.mark_database(name, fingerprint))
