"""Connecting to the hot tier: the embedded server or ``CABRAIN_DATABASE_URL``.

:func:`hot_tier` yields the DSN to use for the duration of a command (holding a lease on the
embedded server when there is no URL); :func:`connect` opens one connection, turning driver
errors into :class:`~cabrain.errors.DatabaseUnreachable` with a hint, and registers the pgvector
codec once the extension exists.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import asyncpg
from pgvector.asyncpg import register_vector

from cabrain.errors import ConfigError, DatabaseUnreachable, ExtensionMissing
from cabrain.settings import Settings
from cabrain.settings import redact_url as redact
from cabrain.store.embedded import EmbeddedPostgres

MIN_SERVER_VERSION = 150000
MIN_PGVECTOR = (0, 8, 0)

SERVER_FACTS = """
SELECT current_setting('server_version_num')::int AS version_num,
       current_setting('server_version') AS version,
       (SELECT default_version FROM pg_available_extensions WHERE name = 'vector') AS vector_available,
       (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector_installed,
       current_database() AS database,
       current_user AS user_name
"""

# --- server-level statements ----------------------------------------------------------------------
# readiness: the server answers
PING = "SELECT 1"
# the server ends this connection's own session (a failpoint's network fault: :mod:`cabrain.failpoints`)
TERMINATE_SELF = "SELECT pg_terminate_backend(pg_backend_pid())"

# --- doctor's checks (:mod:`cabrain.doctor`) -----------------------------------------------------
# the monthly partitions of ``memories`` and the rows left in its default partition
PARTITION_FACTS = """
SELECT count(*) FILTER (WHERE c.relname <> 'memories_default') AS monthly,
       (SELECT count(*) FROM memories_default) AS in_default
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'public.memories'::regclass
"""
SLEEP_ROLE_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cabrain_sleep')"
SLEEP_TABLES_EXIST = "SELECT to_regclass('sleep_runs') IS NOT NULL"


@contextlib.contextmanager
def hot_tier(settings: Settings) -> Iterator[str]:
    """Yield the DSN of the hot tier; with no URL configured, run the embedded server meanwhile."""
    if settings.database_url is not None:
        yield settings.database_url.get_secret_value()
        return
    with EmbeddedPostgres.from_settings(settings) as server:
        yield server.dsn()


def describe_target(settings: Settings) -> str:
    """Where the hot tier is, for humans (credentials removed)."""
    if settings.database_url is None:
        return f"embedded PostgreSQL in {settings.embedded_pg_dir}"
    return redact(settings.database_url.get_secret_value())


def _where(dsn: str) -> str:
    parts = urlsplit(dsn)
    host = parts.hostname or parse_qs(parts.query).get("host", ["local socket"])[0]
    return f"{host}:{parts.port or 5432}"


async def connect(dsn: str, *, timeout: float = 10.0) -> asyncpg.Connection:
    """Open a connection, with an actionable error when that is impossible."""
    where = _where(dsn)
    fix = "start the server, check CABRAIN_DATABASE_URL, or unset it to use the embedded database"
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
    except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError) as exc:
        raise DatabaseUnreachable(
            f"PostgreSQL at {where} refused the credentials: {exc}",
            hint="check the user and password in CABRAIN_DATABASE_URL",
        ) from exc
    except asyncpg.InvalidCatalogNameError as exc:
        raise DatabaseUnreachable(
            f"PostgreSQL at {where}: {exc}",
            hint="create the database first (createdb NAME) or fix its name in CABRAIN_DATABASE_URL",
        ) from exc
    except socket.gaierror as exc:
        raise DatabaseUnreachable(
            f"cannot resolve the database host in {redact(dsn)}: {exc.strerror}", hint=fix
        ) from exc
    except (OSError, asyncpg.CannotConnectNowError, asyncpg.ConnectionDoesNotExistError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise DatabaseUnreachable(f"cannot reach PostgreSQL at {where}: {reason}", hint=fix) from exc
    except TimeoutError as exc:
        raise DatabaseUnreachable(f"PostgreSQL at {where} did not answer within {timeout:.0f}s", hint=fix) from exc
    except (ValueError, asyncpg.ClientConfigurationError) as exc:
        raise ConfigError(
            f"CABRAIN_DATABASE_URL cannot be used: {exc}",
            hint="use postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
        ) from exc
    if await conn.fetchval("SELECT to_regtype('vector') IS NOT NULL"):
        await register_vector(conn)
    return conn


@dataclass(frozen=True)
class ServerFacts:
    version_num: int
    version: str
    vector_available: str | None
    vector_installed: str | None
    database: str
    user_name: str


async def server_facts(conn: asyncpg.Connection) -> ServerFacts:
    return ServerFacts(**dict(await conn.fetchrow(SERVER_FACTS)))


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def check_server(facts: ServerFacts) -> None:
    """Raise unless the server is PostgreSQL >= 15 with pgvector >= 0.8 available."""
    if facts.version_num < MIN_SERVER_VERSION:
        raise ExtensionMissing(
            f"PostgreSQL {facts.version} is too old: CaBrain needs 15 or newer",
            hint="upgrade the server, or unset CABRAIN_DATABASE_URL to use the embedded PostgreSQL 18",
        )
    vector = facts.vector_installed or facts.vector_available
    if vector is None:
        raise ExtensionMissing(
            f"the pgvector extension is not installed on the server of database {facts.database!r}",
            hint=(
                "install pgvector 0.8 or newer on that server (e.g. the postgresql-NN-pgvector "
                "package), or unset CABRAIN_DATABASE_URL to use the embedded PostgreSQL"
            ),
        )
    if _version_tuple(vector) < MIN_PGVECTOR:
        raise ExtensionMissing(
            f"pgvector {vector} is too old: CaBrain needs 0.8 or newer",
            hint="upgrade pgvector on the server, then ALTER EXTENSION vector UPDATE",
        )
