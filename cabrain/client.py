"""A Python client for CaBrain's HTTP API (``/v1``), synchronous and asynchronous.

::

    from cabrain.client import Client

    with Client("http://127.0.0.1:8000", api_key) as cb:
        cb.create_namespace("notes")
        result = cb.retain(MemoryInput("We chose pgvector.", "notes"))
        hits = cb.recall(RecallQuery("which vector store?", "notes")).hits

Answers come back as CaBrain's own types (:mod:`cabrain.types`); error answers raise the same
errors the core raises (:class:`~cabrain.errors.NotFound`, :class:`~cabrain.errors.AccessDenied`,
:class:`~cabrain.errors.Unauthenticated`, ...), with the server's message and hint.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from typing import IO, Any

import httpx

from cabrain.errors import InputError, ServiceError, error_class
from cabrain.fixes import Fix
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
    archive_from_dict,
    entity_memories_from_dict,
    entity_page_from_dict,
    history_from_dict,
    memory_from_dict,
    recall_from_dict,
    retain_from_dict,
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


def _keyed(key: str | None) -> dict[str, Any]:
    return {"headers": {"Idempotency-Key": key or str(uuid.uuid4())}, "retry": True}


class _Requests:
    """Paths and bodies of every call, shared by the sync and async clients."""

    @staticmethod
    def retain(item: MemoryInput, key: str | None) -> tuple[str, str, dict[str, Any]]:
        return "POST", "/v1/memories", {"json": memory_body(item), **_keyed(key)}

    @staticmethod
    def retain_batch(items: Sequence[MemoryInput], decide: bool, key: str | None) -> tuple[str, str, dict[str, Any]]:
        body = {"items": [memory_body(i) for i in items], "decide": decide}
        return "POST", "/v1/memories/batch", {"json": body, **_keyed(key)}

    @staticmethod
    def reconsolidate(
        memory_id: uuid.UUID | str, content: str, reason: str | None, source_ref: str | None, key: str | None
    ) -> tuple[str, str, dict[str, Any]]:
        body = {"content": content, "reason": reason, "source_ref": source_ref}
        return "POST", f"/v1/memories/{memory_id}/reconsolidate", {"json": body, **_keyed(key)}

    @staticmethod
    def recall(query: RecallQuery) -> tuple[str, str, dict[str, Any]]:
        return "POST", "/v1/recall", {"json": recall_body(query)}

    @staticmethod
    def revert(memory_id: uuid.UUID | str | None, judgment_id: uuid.UUID | str | None) -> tuple[str, str]:
        if (memory_id is None) == (judgment_id is None):
            raise InputError("give a memory id or a judgment id, not both")
        if judgment_id is not None:
            return "POST", f"/v1/judgments/{judgment_id}/revert"
        return "POST", f"/v1/memories/{memory_id}/revert"

    @staticmethod
    def recall_archive(query: ArchiveQuery) -> tuple[str, str, dict[str, Any]]:
        return "POST", "/v1/recall/archive", {"json": to_json(query)}

    @staticmethod
    def entities(namespace: str, query: str | None, limit: int, cursor: str | None) -> tuple[str, str, dict[str, Any]]:
        params = {"namespace": namespace, "limit": limit, **{k: v for k, v in (("q", query), ("cursor", cursor)) if v}}
        return "GET", "/v1/entities", {"params": params}

    @staticmethod
    def entity(namespace: str, name_or_id: str, history: bool, limit: int) -> tuple[str, str, dict[str, Any]]:
        params = {"namespace": namespace, "history": "true" if history else "false", "limit": limit}
        return "GET", f"/v1/entities/{urllib.parse.quote(str(name_or_id), safe='')}", {"params": params}


class Client:
    """Synchronous client. ``api_key`` is an agent's key (``cbk_...``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float = 60.0,
        transport: Any = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout_s,
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, *, retry: bool = False, **kwargs: Any) -> Any:
        """One call; ``retry`` (a keyed write) is sent again after a transport fault."""
        for attempt in range(WRITE_RETRIES + 1 if retry else 1):
            try:
                response = self._http.request(method, path, **kwargs)
                break
            except httpx.TransportError as exc:
                if not retry or attempt == WRITE_RETRIES:
                    raise _unreachable(self.base_url, exc) from exc
                time.sleep(RETRY_PAUSE_S * (attempt + 1))
            except httpx.HTTPError as exc:
                raise _unreachable(self.base_url, exc) from exc
        return raise_for(response)

    def download(self, path: str, out: IO[str], **kwargs: Any) -> None:
        """A streamed text answer (an export) written to ``out`` as it arrives."""
        try:
            with self._http.stream("GET", path, **kwargs) as response:
                if not response.is_success:
                    response.read()
                    raise_for(response)
                for text in response.iter_text():
                    out.write(text)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc

    # memories
    def retain(self, item: MemoryInput, *, idempotency_key: str | None = None) -> RetainResult:
        method, path, kw = _Requests.retain(item, idempotency_key)
        return retain_from_dict(self.request(method, path, **kw))

    def retain_batch(
        self, items: Sequence[MemoryInput], *, decide: bool = True, idempotency_key: str | None = None
    ) -> list[RetainResult]:
        method, path, kw = _Requests.retain_batch(items, decide, idempotency_key)
        return [retain_from_dict(r) for r in self.request(method, path, **kw)["results"]]

    def recall(self, query: RecallQuery) -> RecallResult:
        method, path, kw = _Requests.recall(query)
        body = self.request(method, path, **kw)
        return recall_from_dict(body, cached=body.get("cached", False))

    def recall_archive(self, query: ArchiveQuery) -> ArchiveResult:
        """Search the cold tier (demoted memories); see :meth:`cabrain.brain.Brain.recall_archive`."""
        method, path, kw = _Requests.recall_archive(query)
        return archive_from_dict(self.request(method, path, **kw))

    def get(self, memory_id: uuid.UUID | str) -> MemoryWithHistory:
        return history_from_dict(self.request("GET", f"/v1/memories/{memory_id}"))

    def entities(
        self, namespace: str, *, query: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EntityPage:
        """Entities of ``namespace`` with their summaries; see :meth:`cabrain.brain.Brain.list_entities`."""
        method, path, kw = _Requests.entities(namespace, query, limit, cursor)
        return entity_page_from_dict(self.request(method, path, **kw))

    def entity(self, namespace: str, name_or_id: str, *, history: bool = False, limit: int = 20) -> EntityWithMemories:
        """One entity with its summary and the memories that mention it; see :meth:`cabrain.brain.Brain.get_entity`."""
        method, path, kw = _Requests.entity(namespace, name_or_id, history, limit)
        return entity_memories_from_dict(self.request(method, path, **kw))

    def forget(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> MemoryWithHistory:
        return history_from_dict(self.request("POST", f"/v1/memories/{memory_id}/forget", json={"reason": reason}))

    def reconsolidate(
        self,
        memory_id: uuid.UUID | str,
        content: str,
        *,
        reason: str | None = None,
        source_ref: str | None = None,
        idempotency_key: str | None = None,
    ) -> RetainResult:
        method, path, kw = _Requests.reconsolidate(memory_id, content, reason, source_ref, idempotency_key)
        return retain_from_dict(self.request(method, path, **kw))

    def judgments(self, memory_id: uuid.UUID | str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The judgments that changed a memory, newest first."""
        return self.request("GET", f"/v1/memories/{memory_id}/judgments", params={"limit": limit})["judgments"]

    def revert(
        self,
        *,
        memory_id: uuid.UUID | str | None = None,
        judgment_id: uuid.UUID | str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Undo a judgment (by id), or the latest one that changed a memory; returns the revert."""
        return self.request(*_Requests.revert(memory_id, judgment_id), json={"reason": reason})

    def revert_run(self, run_id: uuid.UUID | str, *, reason: str | None = None) -> list[dict[str, Any]]:
        """Undo a whole sleep run: its revert judgments, one per namespace you may write."""
        return self.request("POST", f"/v1/sleep/runs/{run_id}/revert", json={"reason": reason})["reverts"]

    def touch(self, memory_ids: Sequence[uuid.UUID | str]) -> int:
        return self.request("POST", "/v1/memories/accessed", json={"ids": [str(i) for i in memory_ids]})["counted"]

    # namespaces and grants
    def create_namespace(self, name: str) -> bool:
        return self.request("POST", "/v1/namespaces", json={"name": name})["created"]

    def namespaces(self) -> list[dict[str, Any]]:
        return self.request("GET", "/v1/namespaces")["namespaces"]

    def share(
        self,
        namespace: str,
        agent: str,
        *,
        can_read: bool = True,
        can_write: bool = False,
    ) -> bool:
        """Offer ``agent`` access; it reads at once and writes once it accepts. True if accepted already."""
        body = {
            "namespace": namespace,
            "agent": agent,
            "can_read": can_read,
            "can_write": can_write,
        }
        return self.request("POST", "/v1/grants", json=body)["accepted"]

    def accept_grant(self, namespace: str) -> dict[str, Any]:
        """Accept the grant this key's agent was offered on ``namespace``."""
        return self.request("POST", "/v1/grants/accept", json={"namespace": namespace})

    def decline_grant(self, namespace: str) -> bool:
        """Decline (or give up) this key's agent's grant on ``namespace``; True if there was one."""
        return self.request("POST", "/v1/grants/decline", json={"namespace": namespace})["declined"]

    def revoke(self, namespace: str, agent: str) -> bool:
        return self.request("DELETE", "/v1/grants", params={"namespace": namespace, "agent": agent})["revoked"]

    def grants(self, namespace: str) -> list[dict[str, Any]]:
        return self.request("GET", "/v1/grants", params={"namespace": namespace})["grants"]

    # identity
    def whoami(self) -> dict[str, Any]:
        return self.request("GET", "/v1/whoami")

    def agents(self) -> list[dict[str, Any]]:
        return self.request("GET", "/v1/agents")["agents"]

    def create_agent(
        self,
        agent_id: str,
        *,
        display_name: str | None = None,
        is_admin: bool = False,
        key_label: str | None = None,
    ) -> dict[str, str]:
        body = {
            "id": agent_id,
            "display_name": display_name,
            "is_admin": is_admin,
            "key_label": key_label,
        }
        return self.request("POST", "/v1/agents", json=body)

    def create_key(self, agent_id: str, *, label: str | None = None) -> dict[str, str]:
        return self.request("POST", f"/v1/agents/{agent_id}/keys", json={"label": label})

    def keys(self, agent_id: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/v1/agents/{agent_id}/keys")["keys"]

    def revoke_key(self, agent_id: str, key_id: uuid.UUID | str) -> None:
        self.request("DELETE", f"/v1/agents/{agent_id}/keys/{key_id}")

    def disable_agent(self, agent_id: str) -> None:
        self.request("POST", f"/v1/agents/{agent_id}/disable")

    # health
    def health(self) -> dict[str, Any]:
        return self.request("GET", "/v1/health")

    def ready(self) -> bool:
        try:
            response = self._http.get("/v1/ready")
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
        return response.status_code == 200 and bool(response.json().get("ready"))


class AsyncClient:
    """Asynchronous client (the memory calls of :class:`Client`, awaitable)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float = 60.0,
        max_connections: int = 100,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout_s, limits=limits)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, *, retry: bool = False, **kwargs: Any) -> Any:
        """One call; ``retry`` (a keyed write) is sent again after a transport fault."""
        for attempt in range(WRITE_RETRIES + 1 if retry else 1):
            try:
                response = await self._http.request(method, path, **kwargs)
                break
            except httpx.TransportError as exc:
                if not retry or attempt == WRITE_RETRIES:
                    raise _unreachable(self.base_url, exc) from exc
                await asyncio.sleep(RETRY_PAUSE_S * (attempt + 1))
            except httpx.HTTPError as exc:
                raise _unreachable(self.base_url, exc) from exc
        return raise_for(response)

    async def retain(self, item: MemoryInput, *, idempotency_key: str | None = None) -> RetainResult:
        method, path, kw = _Requests.retain(item, idempotency_key)
        return retain_from_dict(await self.request(method, path, **kw))

    async def retain_batch(
        self, items: Sequence[MemoryInput], *, decide: bool = True, idempotency_key: str | None = None
    ) -> list[RetainResult]:
        method, path, kw = _Requests.retain_batch(items, decide, idempotency_key)
        return [retain_from_dict(r) for r in (await self.request(method, path, **kw))["results"]]

    async def recall(self, query: RecallQuery) -> RecallResult:
        method, path, kw = _Requests.recall(query)
        body = await self.request(method, path, **kw)
        return recall_from_dict(body, cached=body.get("cached", False))

    async def recall_archive(self, query: ArchiveQuery) -> ArchiveResult:
        method, path, kw = _Requests.recall_archive(query)
        return archive_from_dict(await self.request(method, path, **kw))

    async def get(self, memory_id: uuid.UUID | str) -> MemoryWithHistory:
        return history_from_dict(await self.request("GET", f"/v1/memories/{memory_id}"))

    async def entities(
        self, namespace: str, *, query: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EntityPage:
        method, path, kw = _Requests.entities(namespace, query, limit, cursor)
        return entity_page_from_dict(await self.request(method, path, **kw))

    async def entity(
        self, namespace: str, name_or_id: str, *, history: bool = False, limit: int = 20
    ) -> EntityWithMemories:
        method, path, kw = _Requests.entity(namespace, name_or_id, history, limit)
        return entity_memories_from_dict(await self.request(method, path, **kw))

    async def forget(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> MemoryWithHistory:
        return history_from_dict(
            await self.request("POST", f"/v1/memories/{memory_id}/forget", json={"reason": reason})
        )

    async def create_namespace(self, name: str) -> bool:
        return (await self.request("POST", "/v1/namespaces", json={"name": name}))["created"]

    async def namespaces(self) -> list[dict[str, Any]]:
        return (await self.request("GET", "/v1/namespaces"))["namespaces"]

    async def reconsolidate(
        self,
        memory_id: uuid.UUID | str,
        content: str,
        *,
        reason: str | None = None,
        source_ref: str | None = None,
        idempotency_key: str | None = None,
    ) -> RetainResult:
        method, path, kw = _Requests.reconsolidate(memory_id, content, reason, source_ref, idempotency_key)
        return retain_from_dict(await self.request(method, path, **kw))

    async def judgments(self, memory_id: uuid.UUID | str, *, limit: int = 50) -> list[dict[str, Any]]:
        return (await self.request("GET", f"/v1/memories/{memory_id}/judgments", params={"limit": limit}))["judgments"]

    async def revert(
        self,
        *,
        memory_id: uuid.UUID | str | None = None,
        judgment_id: uuid.UUID | str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        return await self.request(*_Requests.revert(memory_id, judgment_id), json={"reason": reason})

    async def revert_run(self, run_id: uuid.UUID | str, *, reason: str | None = None) -> list[dict[str, Any]]:
        return (await self.request("POST", f"/v1/sleep/runs/{run_id}/revert", json={"reason": reason}))["reverts"]

    async def touch(self, memory_ids: Sequence[uuid.UUID | str]) -> int:
        return (await self.request("POST", "/v1/memories/accessed", json={"ids": [str(i) for i in memory_ids]}))[
            "counted"
        ]

    async def share(self, namespace: str, agent: str, *, can_read: bool = True, can_write: bool = False) -> bool:
        body = {"namespace": namespace, "agent": agent, "can_read": can_read, "can_write": can_write}
        return (await self.request("POST", "/v1/grants", json=body))["accepted"]

    async def whoami(self) -> dict[str, Any]:
        return await self.request("GET", "/v1/whoami")

    async def dispatch_task(self, task: dict[str, Any]) -> dict[str, Any]:
        """Workflow learning: route and run a task (``POST /v1/workflows/dispatch``)."""
        return await self.request("POST", "/v1/workflows/dispatch", json=task)

    async def list_memories(
        self,
        namespace: str,
        *,
        source_kind: str | None = None,
        source_ref_prefix: str | None = None,
        limit: int = 1000,
        include_archived: bool = False,
    ) -> list[Memory]:
        params: dict[str, Any] = {"namespace": namespace, "limit": limit}
        params.update({k: v for k, v in (("source_kind", source_kind), ("source_ref_prefix", source_ref_prefix)) if v})
        if include_archived:
            params["include_archived"] = "true"
        return [memory_from_dict(m) for m in (await self.request("GET", "/v1/memories", params=params))["memories"]]

    async def unarchive(self, memory_id: uuid.UUID | str) -> Memory:
        return memory_from_dict(await self.request("POST", f"/v1/memories/{memory_id}/unarchive"))
