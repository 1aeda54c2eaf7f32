"""The transport under both clients: one authenticated httpx connection pool, retries of keyed
writes, and error answers turned back into CaBrain's own errors (with their hint and fix)."""

from __future__ import annotations

import asyncio
import uuid
from typing import IO, Any, Self

import httpx

from cabrain.errors import ServiceError, error_class
from cabrain.fixes import Fix
from cabrain.types import (
    MemoryInput,
    RecallQuery,
    to_json,
)


def memory_body(item: MemoryInput) -> dict[str, Any]:
    return to_json(item)


def recall_body(query: RecallQuery) -> dict[str, Any]:
    return to_json(query)


def raise_for(response: httpx.Response) -> Any:
    """The JSON body of a 2xx answer, or the matching CaBrain error."""
    if response.is_success:
        return response.json()
    try:
        err = response.json()["error"]
        kind, message, hint, fix = (
            err.get("type", ""),
            err.get("message", ""),
            err.get("hint"),
            Fix.from_json(err.get("fix")),  # the caller's face words it for its own surface
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        kind, message, hint, fix = "", response.text[:500] or response.reason_phrase, None, None
    raise error_class(kind)(f"{message} (HTTP {response.status_code})", hint=hint, fix=fix)


def _unreachable(base_url: str, exc: Exception) -> ServiceError:
    return ServiceError(
        f"cannot reach CaBrain at {base_url}: {exc}",
        hint="start it with `cabrain up`, or check CABRAIN_API_URL",
    )


# Writes carry an Idempotency-Key (the caller's, or one made per call): the client retries them
# after a transport fault this many times, and the service answers a retry without writing again.
WRITE_RETRIES = 2
RETRY_PAUSE_S = 0.2


# The service's answer to a write, where it reads from replicas of its database: the WAL position
# after the write. The client sends the last one back on every request, so a read after its own write
# is served by a replica that has it (or by the primary): cabrain.serve.standbys.
LSN_HEADER = "CaBrain-LSN"


def _position(lsn: str) -> int:
    high, _, low = lsn.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def _keyed(key: str | None) -> dict[str, Any]:
    return {"headers": {"Idempotency-Key": key or str(uuid.uuid4())}, "retry": True}


class Transport:
    """Requests to one CaBrain service as one agent (its key)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float = 60.0,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout_s, limits=limits, transport=transport
        )
        self.lsn: str | None = None  # the latest CaBrain-LSN the service answered with

    def _seen(self, response: httpx.Response) -> None:
        """Keep the newer of the client's CaBrain-LSN and the one ``response`` carries."""
        given = response.headers.get(LSN_HEADER)
        if not given:
            return
        try:
            newer = self.lsn is None or _position(given) > _position(self.lsn)
        except ValueError:
            return  # not a position: the service's answer is used as it is, the header ignored
        if newer:
            self.lsn = given

    def _headers(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.lsn is None:
            return kwargs
        return {**kwargs, "headers": {**(kwargs.get("headers") or {}), LSN_HEADER: self.lsn}}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, *, retry: bool = False, **kwargs: Any) -> Any:
        """One call; ``retry`` (a keyed write) is sent again after a transport fault."""
        for attempt in range(WRITE_RETRIES + 1 if retry else 1):
            try:
                response = await self._http.request(method, path, **self._headers(kwargs))
                break
            except httpx.TransportError as exc:
                if not retry or attempt == WRITE_RETRIES:
                    raise _unreachable(self.base_url, exc) from exc
                await asyncio.sleep(RETRY_PAUSE_S * (attempt + 1))
            except httpx.HTTPError as exc:
                raise _unreachable(self.base_url, exc) from exc
        self._seen(response)
        return raise_for(response)

    async def download(self, path: str, out: IO[str], **kwargs: Any) -> None:
        """A streamed text answer (an export) written to ``out`` as it arrives."""
        try:
            async with self._http.stream("GET", path, **self._headers(kwargs)) as response:
                if not response.is_success:
                    await response.aread()
                    raise_for(response)
                async for text in response.aiter_text():
                    out.write(text)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
