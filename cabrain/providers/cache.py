"""The optional Redis L1 cache (SPEC §2.1). Never authoritative: PostgreSQL stays the truth.

This module holds the connection handling; the cache-aside logic of recall lands with it.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from cabrain.errors import CacheError
from cabrain.settings import redact_url as _redact


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
