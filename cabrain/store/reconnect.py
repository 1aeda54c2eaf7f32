"""Riding out a lost database connection: PostgreSQL restarted, failed over, or the network cut
a pooled connection. The operation is run again on fresh connections until the server answers or
``timeout_s`` passes. Only idempotent operations may be retried this way: reads, and retains that
carry an idempotency key (:mod:`cabrain.store.requests`), made once before the first attempt.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from cabrain.errors import DatabaseUnreachable

log = logging.getLogger(__name__)
T = TypeVar("T")

# The hot tier went away under a pooled connection (restart, failover): reconnect and retry.
CONNECTION_LOST: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.InternalClientError,  # a pooled connection left mid-protocol when the server died
    ConnectionError,  # refused / reset while the server restarts (TimeoutError is not one of these)
    FileNotFoundError,  # its unix socket is gone while it restarts
)


async def retrying(op: Callable[[], Awaitable[T]], *, pool: asyncpg.Pool, timeout_s: float) -> T:
    """``await op()``; when the connection is lost, drop the pool's connections and try again, with
    backoff (0.1 s doubling to 1 s), until ``timeout_s``: then :class:`DatabaseUnreachable`."""
    deadline = time.monotonic() + timeout_s
    delay = 0.1
    while True:
        try:
            return await op()
        except CONNECTION_LOST as exc:
            await pool.expire_connections()
            if time.monotonic() + delay > deadline:
                raise DatabaseUnreachable(
                    f"the database connection was lost and could not be re-established: {exc}",
                    hint="check that PostgreSQL is running; requests resume as soon as it is back",
                ) from exc
            log.warning("database connection lost; reconnecting", extra={"error": str(exc)})
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
