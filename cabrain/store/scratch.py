"""Scratch databases: created on the hot tier's server for one run (eval, bench), dropped after."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

from cabrain.providers.embedders import Embedder
from cabrain.settings import Settings
from cabrain.store.db import ServerFacts


def with_database(dsn: str, database: str) -> str:
    """``dsn`` pointing at another database on the same server."""
    return urlunsplit(urlsplit(dsn)._replace(path="/" + database))


@contextlib.asynccontextmanager
async def scratch_brain(settings: Settings, embedder: Embedder, *, prefix: str) -> AsyncIterator[tuple]:
    """A migrated, empty database of its own and a Brain on it (no cache); yields
    ``(brain, server facts, the database's DSN)``. The database is dropped afterwards, whatever happens."""
    from cabrain.brain import Brain
    from cabrain.store import migrations
    from cabrain.store.db import check_server, connect, hot_tier, server_facts

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with hot_tier(settings) as dsn:
        admin = await connect(dsn, timeout=settings.db_connect_timeout_s)
        try:
            facts: ServerFacts = await server_facts(admin)
            check_server(facts)
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        try:
            scratch_dsn = with_database(dsn, name)
            conn = await connect(scratch_dsn)
            try:
                await migrations.migrate(
                    conn, settings.schema_dir, embedding_dim=embedder.dim, embedding_model=settings.embedding_model
                )
            finally:
                await conn.close()
            brain = await Brain.open(settings.model_copy(update={"redis_url": None}), dsn=scratch_dsn, embedder=embedder)
            try:
                yield brain, facts, scratch_dsn
            finally:
                await brain.close()
        finally:
            admin = await connect(dsn, timeout=settings.db_connect_timeout_s)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await admin.close()
