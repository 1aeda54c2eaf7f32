"""Reads from the hot tier's streaming replicas (``CABRAIN_DATABASE_REPLICA_URLS``).

A read that may be served by a replica (recall, get, browse, export: :meth:`cabrain.engine.Engine.reading`)
asks :meth:`Replicas.choose` for a pool. A replica is chosen in turn (round robin) among those that:

- answer: one that fails to connect or to answer a check within ``replica_timeout_s`` is left alone
  for ``replica_retry_s`` (logged once when it goes, once when it is back) and the read goes on;
- are in recovery (a replica, not a promoted primary that no longer follows the writes);
- are within ``replica_max_lag_s`` of the primary (bounded staleness);
- have replayed the caller's last write, when the read names it (:data:`READ_AFTER`: the
  ``CaBrain-LSN`` a write answered with), waiting at most ``replica_wait_s`` for it.

None qualifying: the read goes to the primary. Writes always go to the primary.

Lag. A replica's lag is measured at most every ``replica_check_s``: its replayed LSN against the
primary's WAL position (bytes), and in seconds as how long ago the primary was last seen at a
position the replica has replayed (the samples of earlier checks): a replica that has replayed the
primary's position of time *t* holds every write committed before *t*. A replica never seen caught
up falls back to ``now() - pg_last_xact_replay_timestamp()``; one that has replayed all there is has
no lag, however long the primary has been idle.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from cabrain.errors import CabrainError
from cabrain.settings import Settings, redact_url
from cabrain.store.pool import create_pool
from cabrain.store.reconnect import CONNECTION_LOST

log = logging.getLogger(__name__)

# The WAL position a read must see (the caller's last write, as an integer), set by the face for
# the call (the HTTP API from the CaBrain-LSN header): a replica serves the read only once it
# has replayed this far.
READ_AFTER: contextvars.ContextVar[int | None] = contextvars.ContextVar("cabrain_read_after", default=None)
# Reads of the current call stay on the primary (the console: a person sees what they just did).
PRIMARY: contextvars.ContextVar[bool] = contextvars.ContextVar("cabrain_read_primary", default=False)
# The pool the current read was given (Engine.reading): every statement of the read runs there.
PINNED: contextvars.ContextVar[asyncpg.Pool | None] = contextvars.ContextVar("cabrain_read_pool", default=None)

WAL_POSITION = "SELECT pg_current_wal_insert_lsn()::text"
PRIMARY_POSITION = "SELECT pg_current_wal_lsn()::text"
REPLAYED = "SELECT pg_last_wal_replay_lsn()::text"
REPLICA_STATE = """
SELECT pg_is_in_recovery() AS recovering,
       pg_last_wal_replay_lsn()::text AS replayed,
       CASE WHEN pg_is_in_recovery() THEN pg_is_wal_replay_paused() END AS paused,
       extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS since_replay_s
"""
_HEX = re.compile(r"[0-9A-Fa-f]{1,8}")
_SAMPLES = 256  # the primary's positions kept per replica (one per check)
# a replica that cannot be reached or answer (a DatabaseUnreachable from connecting among them)
_FAILED = (*CONNECTION_LOST, OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, CabrainError)


def parse_lsn(text: str) -> int:
    """``'16/B374D848'`` as an integer; ``ValueError`` when it is not an LSN."""
    high, sep, low = text.strip().partition("/")
    if not (sep and _HEX.fullmatch(high) and _HEX.fullmatch(low)):
        raise ValueError(f"not a WAL position (LSN): {text!r}; expected two hex numbers like 16/B374D848")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


async def wal_position(pool: asyncpg.Pool) -> str:
    """The primary's WAL insert position: at or past the end of every transaction committed so far."""
    async with pool.acquire() as conn:
        return str(await conn.fetchval(WAL_POSITION))


@dataclass
class Replica:
    """One replica and what its last check found."""

    dsn: str
    name: str  # the URL without its password, for logs and health
    pool: asyncpg.Pool | None = None
    down: bool = False  # unreachable at its last try
    down_until: float = 0.0  # monotonic: not tried again before
    error: str | None = None
    recovering: bool = True
    paused: bool = False
    replayed: int | None = None
    lag_bytes: int | None = None
    lag_s: float | None = None
    checked_at: float | None = None  # monotonic
    served: int = 0  # reads it served
    samples: list[tuple[float, int]] = field(default_factory=list)  # (monotonic, primary position)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Replicas:
    """The replicas of one engine, each with its pool opened on first use."""

    def __init__(
        self,
        dsns: list[str],
        settings: Settings,
        primary: asyncpg.Pool,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.primary = primary
        self.clock = clock
        self.replicas = [Replica(dsn, redact_url(dsn)) for dsn in dsns]
        self._turn = 0

    async def close(self) -> None:
        for replica in self.replicas:
            if replica.pool is not None:
                await replica.pool.close()
                replica.pool = None

    async def choose(self, after: int | None) -> asyncpg.Pool | None:
        """A replica's pool for a read that must see WAL position ``after`` (None: any within the
        lag bound), or None: read from the primary."""
        if not self.replicas:
            return None
        deadline = self.clock() + self.settings.replica_wait_s
        start = self._turn % len(self.replicas)
        self._turn += 1
        for replica in self.replicas[start:] + self.replicas[:start]:
            if not await self._check(replica) or replica.pool is None:
                continue
            if after is not None and (replica.replayed or 0) < after and not await self._wait(replica, after, deadline):
                continue
            replica.served += 1
            return replica.pool
        return None

    async def lost(self, pool: asyncpg.Pool, exc: BaseException) -> None:
        """A read on ``pool`` lost its connection: that replica is down until retried."""
        for replica in self.replicas:
            if replica.pool is not None and replica.pool is pool:
                self._down(replica, exc)
                await replica.pool.expire_connections()

    async def status(self) -> list[dict[str, Any]]:
        """Each replica as health reports it (measured again when its last check is stale)."""
        await asyncio.gather(*(self._check(r) for r in self.replicas))
        return [_describe(r, self.settings.replica_max_lag_s) for r in self.replicas]

    # --- checks --------------------------------------------------------------------------------
    async def _check(self, replica: Replica, *, force: bool = False) -> bool:
        """Whether ``replica`` may serve a read now, measuring it when its last check is stale."""
        now = self.clock()
        if replica.down_until > now and not force:
            return False
        fresh = replica.checked_at is not None and now - replica.checked_at < self.settings.replica_check_s
        if not fresh or force:
            async with replica.lock:  # one check at a time; those waiting use its result
                stale = replica.checked_at is None or self.clock() - replica.checked_at >= self.settings.replica_check_s
                if force or stale:
                    try:
                        await asyncio.wait_for(self._measure(replica), self.settings.replica_timeout_s)
                    except _FAILED as exc:
                        self._down(replica, exc)
                        if replica.pool is not None:
                            await replica.pool.expire_connections()
                        return False
        usable = not replica.down and replica.recovering
        return usable and replica.lag_s is not None and replica.lag_s <= self.settings.replica_max_lag_s

    async def _measure(self, replica: Replica) -> None:
        # the primary first: every write committed before ``then`` is at or before ``primary``
        then = self.clock()
        async with self.primary.acquire() as conn:
            primary = parse_lsn(await conn.fetchval(PRIMARY_POSITION))
        if replica.pool is None:
            replica.pool = await create_pool(replica.dsn, self.settings, timeout_s=self.settings.replica_timeout_s)
        async with replica.pool.acquire() as conn:
            row = await conn.fetchrow(REPLICA_STATE)
        now = self.clock()
        if replica.down:
            log.warning("hot tier replica %s is back; reads go to it again", replica.name)
        replica.down, replica.error, replica.down_until, replica.checked_at = False, None, 0.0, now
        replica.recovering, replica.paused = bool(row["recovering"]), bool(row["paused"])
        if not replica.recovering:
            replica.error = "not a replica (not in recovery): it no longer follows the primary's writes"
            replica.lag_bytes = replica.lag_s = None
            return
        replayed = parse_lsn(row["replayed"]) if row["replayed"] else 0
        replica.replayed = replayed
        replica.lag_bytes = max(0, primary - replayed)
        replica.samples = [*replica.samples[-(_SAMPLES - 1) :], (then, primary)]
        seen = [t for t, position in replica.samples if position <= replayed]
        if replayed >= primary:
            replica.lag_s, replica.samples = 0.0, [(then, primary)]
        elif seen:  # it holds everything the primary had written at the last of these moments
            replica.lag_s = now - seen[-1]
            replica.samples = [s for s in replica.samples if s[0] >= seen[-1]]
        else:
            since = row["since_replay_s"]
            replica.lag_s = None if since is None else max(0.0, float(since))

    async def _wait(self, replica: Replica, after: int, deadline: float) -> bool:
        """Poll ``replica`` until it has replayed ``after`` or ``deadline`` passes."""
        assert replica.pool is not None
        pause = 0.002
        while True:
            try:
                async with replica.pool.acquire() as conn:
                    text = await asyncio.wait_for(conn.fetchval(REPLAYED), self.settings.replica_timeout_s)
            except _FAILED as exc:
                self._down(replica, exc)
                return False
            replica.replayed = parse_lsn(text) if text else 0
            if replica.replayed >= after:
                return True
            if self.clock() + pause > deadline:
                return False
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _down(self, replica: Replica, exc: BaseException) -> None:
        if not replica.down:  # said once per outage
            log.warning(
                "hot tier replica %s is unreachable; reads go to the primary and it is tried again in %.0f s: %s",
                replica.name,
                self.settings.replica_retry_s,
                exc,
            )
        replica.down, replica.error = True, f"{type(exc).__name__}: {exc}".strip()
        replica.down_until = self.clock() + self.settings.replica_retry_s
        replica.checked_at = self.clock()
        replica.lag_s = replica.lag_bytes = None


def _describe(replica: Replica, max_lag_s: float) -> dict[str, Any]:
    if replica.down:
        state = "down"
    elif not replica.recovering:
        state = "not a replica"
    elif replica.lag_s is None or replica.lag_s > max_lag_s:
        state = "behind"
    else:
        state = "ok"
    return {
        "url": replica.name,
        "state": state,
        "replayed_lsn": format_lsn(replica.replayed) if replica.replayed is not None else None,
        "lag_bytes": replica.lag_bytes,
        "lag_s": None if replica.lag_s is None else round(replica.lag_s, 3),
        "replay_paused": replica.paused,
        "reads": replica.served,
        "error": replica.error,
    }
