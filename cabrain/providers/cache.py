"""The optional Redis L1 cache (SPEC §2.1). Never authoritative: PostgreSQL stays the truth.

What it holds (all keys under ``cabrain:``):

- ``recall:<epoch>:<generation>:<digest>``: a recall's answer for one agent and one exact request,
  for ``cache_recall_ttl_s``;
- ``get:<epoch>:<generation>:<agent>:<id>``: ``get`` results, for ``cache_row_ttl_s``;
- ``emb:<model>:<kind>:<sha256>``: content -> embedding, for ``cache_embedding_ttl_s``.

Whether a cached answer is still valid is decided in PostgreSQL, never by what Redis holds: every
change that can alter a namespace's answers (a write, a forget, a supersession, a grant, a sleep
step, a demotion) moves that namespace's ``cache_gen`` to a fresh value of one sequence, in the same
transaction (triggers, schema 0009), and agent changes move the global epoch. The caller reads both
before it computes an answer and keys the answer with them, so an answer is only read back while
nothing it depends on has changed. Redis restarting from a snapshot, being restored from an old
one or losing writes can only lose entries: the keys it brings back name generations that will
never be asked for again.

Every Redis failure is logged (at most once a minute) and treated as a miss: with Redis down or
flushed, recall gives the same answers, only slower.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from cabrain.errors import CacheError
from cabrain.settings import redact_url as _redact

log = logging.getLogger(__name__)
PREFIX = "cabrain:"


def _raw(value: bytes | str | None) -> bytes | None:
    """A stored value as bytes. redis-py types every reply as bytes or str; a client made without
    ``decode_responses`` (all of ours) gets bytes."""
    return value.encode() if isinstance(value, str) else value


async def probe_redis(url: str, *, timeout: float = 3.0) -> str:
    """PING the server at ``url``; return its version, or raise :class:`CacheError`."""
    client = aioredis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        await client.ping()
        info = await client.info("server")
        return str(info.get("redis_version", "unknown"))
    except (RedisError, OSError) as exc:
        raise CacheError(
            f"cannot reach Redis at {_redact(url)}: {exc}",
            hint="start redis-server, fix CABRAIN_REDIS_URL, or unset it to run without the L1 cache",
        ) from exc
    finally:
        await client.aclose()


class RedisCache:
    """Cache-aside helpers; every method degrades to a miss when Redis fails."""

    def __init__(
        self,
        url: str,
        *,
        recall_ttl_s: int = 30,
        row_ttl_s: int = 300,
        embedding_ttl_s: int = 86400,
        timeout_s: float = 0.25,
    ) -> None:
        self._client = aioredis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        self._url = _redact(url)
        self.recall_ttl_s, self.row_ttl_s, self.embedding_ttl_s = recall_ttl_s, row_ttl_s, embedding_ttl_s
        self._last_warning = 0.0
        self.hits = 0
        self.misses = 0
        self.errors = 0

    async def close(self) -> None:
        await self._client.aclose()

    def _failed(self, op: str, exc: Exception) -> None:
        self.errors += 1
        now = time.monotonic()
        if now - self._last_warning > 60:
            self._last_warning = now
            log.warning(
                "cache.unavailable",
                extra={"op": op, "redis": self._url, "error": str(exc), "effect": "serving from PostgreSQL"},
            )

    # --- values ---------------------------------------------------------------------------------
    async def get(self, key: str) -> bytes | None:
        try:
            value = await self._client.get(PREFIX + key)
        except (RedisError, OSError) as exc:
            self._failed("get", exc)
            return None
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return _raw(value)

    async def set(self, key: str, value: bytes | str, ttl_s: int) -> None:
        try:
            await self._client.set(PREFIX + key, value, ex=ttl_s)
        except (RedisError, OSError) as exc:
            self._failed("set", exc)

    async def get_embeddings(self, keys: list[str]) -> list[np.ndarray | None]:
        try:
            values = await self._client.mget([PREFIX + k for k in keys])
        except (RedisError, OSError) as exc:
            self._failed("mget", exc)
            return [None] * len(keys)
        blobs = [_raw(v) for v in values]
        found = sum(1 for b in blobs if b)
        self.hits += found
        self.misses += len(blobs) - found
        return [np.frombuffer(b, dtype=np.float32) if b else None for b in blobs]

    async def set_embeddings(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for key, vec in items.items():
                    pipe.set(PREFIX + key, np.asarray(vec, dtype=np.float32).tobytes(), ex=self.embedding_ttl_s)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            self._failed("mset", exc)
