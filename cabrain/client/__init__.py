"""A Python client for CaBrain's HTTP API (``/v1``): :class:`AsyncClient`, and :class:`Client`, the
same methods run to completion (each a one-line wrapper of the async one).

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
import functools
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from cabrain.client.base import (
    Transport,
    _keyed,
    _unreachable,
    memory_body,
    raise_for,
    recall_body,
)
from cabrain.client.corrections import CorrectionCalls
from cabrain.client.entity_care import EntityCareCalls
from cabrain.client.explain import ExplainCalls
from cabrain.client.overview import OverviewCalls
from cabrain.client.service import ServiceCalls
from cabrain.errors import InputError, ServiceError
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


class AsyncClient(ServiceCalls, CorrectionCalls, ExplainCalls, OverviewCalls, EntityCareCalls):
    """Asynchronous client. ``api_key`` is an agent's key (``cbk_...``). Every method is an
    operation's face (``tests/unit/test_faces.py`` holds each to the operation that declares it);
    the service's own operations (governance, channels, pushes, connectors) come from
    :class:`~cabrain.client.service.ServiceCalls`, the connection from
    :class:`~cabrain.client.base.Transport`."""

    # memories
    async def retain(self, item: MemoryInput, *, idempotency_key: str | None = None) -> RetainResult:
        """Retain one memory: ADD, UPDATE, INVALIDATE or NOOP against its neighbours."""
        body = await self.request("POST", "/v1/memories", json=memory_body(item), **_keyed(idempotency_key))
        return retain_from_dict(body)

    async def retain_batch(
        self, items: Sequence[MemoryInput], *, decide: bool = True, idempotency_key: str | None = None
    ) -> list[RetainResult]:
        """Retain a batch in one transaction (all or nothing); ``decide=False`` adds without comparing."""
        body = {"items": [memory_body(i) for i in items], "decide": decide}
        found = await self.request("POST", "/v1/memories/batch", json=body, **_keyed(idempotency_key))
        return [retain_from_dict(r) for r in found["results"]]

    async def recall(self, query: RecallQuery) -> RecallResult:
        """Hybrid recall (``query.as_of``: as of a time; ``query.context``: a dialogue's earlier turns);
        see :meth:`cabrain.brain.Brain.recall`."""
        body = await self.request("POST", "/v1/recall", json=recall_body(query))
        return recall_from_dict(body, cached=body.get("cached", False))

    async def recall_archive(self, query: ArchiveQuery) -> ArchiveResult:
        """Search the cold tier (demoted memories); see :meth:`cabrain.brain.Brain.recall_archive`."""
        return archive_from_dict(await self.request("POST", "/v1/recall/archive", json=to_json(query)))

    async def get(self, memory_id: uuid.UUID | str, *, as_of: datetime | None = None) -> MemoryWithHistory:
        """A memory with its provenance and version history; ``as_of``: the version current at that
        time (a naive time is UTC), see :meth:`cabrain.brain.Brain.get`."""
        params = {"as_of": as_of.isoformat()} if as_of is not None else None
        return history_from_dict(await self.request("GET", f"/v1/memories/{memory_id}", params=params))

    async def list_memories(
        self,
        namespace: str,
        *,
        source_kind: str | None = None,
        source_ref_prefix: str | None = None,
        limit: int = 1000,
        include_archived: bool = False,
    ) -> list[Memory]:
        """The memories of ``namespace`` you may read, filtered by their source."""
        params: dict[str, Any] = {"namespace": namespace, "limit": limit}
        params.update({k: v for k, v in (("source_kind", source_kind), ("source_ref_prefix", source_ref_prefix)) if v})
        if include_archived:
            params["include_archived"] = "true"
        return [memory_from_dict(m) for m in (await self.request("GET", "/v1/memories", params=params))["memories"]]

    async def unarchive(self, memory_id: uuid.UUID | str) -> Memory:
        """Bring an archived memory back into recall."""
        return memory_from_dict(await self.request("POST", f"/v1/memories/{memory_id}/unarchive"))

    async def entities(
        self,
        namespace: str,
        *,
        query: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        sort: str = "name",
    ) -> EntityPage:
        """Entities of ``namespace`` with their summaries and mention counts; see
        :meth:`cabrain.brain.Brain.entities`."""
        params = {
            "namespace": namespace,
            "limit": limit,
            "sort": sort,
            **{k: v for k, v in (("q", query), ("cursor", cursor)) if v},
        }
        return entity_page_from_dict(await self.request("GET", "/v1/entities", params=params))

    async def entity(
        self, namespace: str, name_or_id: str, *, history: bool = False, limit: int = 20
    ) -> EntityWithMemories:
        """One entity with its summary and the memories that mention it; see :meth:`cabrain.brain.Brain.entity`."""
        params = {"namespace": namespace, "history": "true" if history else "false", "limit": limit}
        path = f"/v1/entities/{urllib.parse.quote(str(name_or_id), safe='')}"
        return entity_memories_from_dict(await self.request("GET", path, params=params))

    async def forget(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> MemoryWithHistory:
        """Soft-forget: the memory leaves recall but is kept."""
        body = await self.request("POST", f"/v1/memories/{memory_id}/forget", json={"reason": reason})
        return history_from_dict(body)

    async def reconsolidate(
        self,
        memory_id: uuid.UUID | str,
        content: str,
        *,
        reason: str | None = None,
        source_ref: str | None = None,
        idempotency_key: str | None = None,
    ) -> RetainResult:
        """Replace a memory with a corrected version (the old one is superseded)."""
        body = {"content": content, "reason": reason, "source_ref": source_ref}
        path = f"/v1/memories/{memory_id}/reconsolidate"
        return retain_from_dict(await self.request("POST", path, json=body, **_keyed(idempotency_key)))

    async def touch(self, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Count a read of these memories (their use and recency rise); returns how many were counted."""
        body = await self.request("POST", "/v1/memories/accessed", json={"ids": [str(i) for i in memory_ids]})
        return body["counted"]

    # judgments
    async def judgments(self, memory_id: uuid.UUID | str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The judgments that changed a memory, newest first."""
        path = f"/v1/memories/{memory_id}/judgments"
        return (await self.request("GET", path, params={"limit": limit}))["judgments"]

    async def revert(
        self,
        *,
        judgment_id: uuid.UUID | str | None = None,
        memory_id: uuid.UUID | str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Undo a judgment (by id), or the latest one that changed a memory; returns the revert."""
        if (memory_id is None) == (judgment_id is None):
            raise InputError("give a memory id or a judgment id, not both")
        if judgment_id is not None:
            return await self.request("POST", f"/v1/judgments/{judgment_id}/revert", json={"reason": reason})
        return await self.request("POST", f"/v1/memories/{memory_id}/revert", json={"reason": reason})

    async def revert_run(self, run_id: uuid.UUID | str, *, reason: str | None = None) -> list[dict[str, Any]]:
        """Undo a whole sleep run: its revert judgments, one per namespace you may write."""
        return (await self.request("POST", f"/v1/sleep/runs/{run_id}/revert", json={"reason": reason}))["reverts"]

    # namespaces and grants
    async def create_namespace(self, name: str) -> bool:
        """Create a namespace you own; False if you own it already."""
        return (await self.request("POST", "/v1/namespaces", json={"name": name}))["created"]

    async def namespaces(self) -> list[dict[str, Any]]:
        """The namespaces you own or were granted, and the offers waiting for you."""
        return (await self.request("GET", "/v1/namespaces"))["namespaces"]

    async def share(self, namespace: str, grantee: str, *, can_read: bool = True, can_write: bool = False) -> bool:
        """Offer ``grantee`` access; it reads at once and writes once it accepts. True if accepted already."""
        body = {"namespace": namespace, "agent": grantee, "can_read": can_read, "can_write": can_write}
        return (await self.request("POST", "/v1/grants", json=body))["accepted"]

    async def accept_grant(self, namespace: str) -> dict[str, Any]:
        """Accept the grant this key's agent was offered on ``namespace``."""
        return await self.request("POST", "/v1/grants/accept", json={"namespace": namespace})

    async def decline_grant(self, namespace: str) -> bool:
        """Decline (or give up) this key's agent's grant on ``namespace``; True if there was one."""
        return (await self.request("POST", "/v1/grants/decline", json={"namespace": namespace}))["declined"]

    async def revoke(self, namespace: str, grantee: str) -> bool:
        """Take back ``grantee``'s grant on ``namespace``; True if there was one."""
        params = {"namespace": namespace, "agent": grantee}
        return (await self.request("DELETE", "/v1/grants", params=params))["revoked"]

    async def grants(self, namespace: str) -> list[dict[str, Any]]:
        """The grants on a namespace you own."""
        return (await self.request("GET", "/v1/grants", params={"namespace": namespace}))["grants"]

    # identity (admin)
    async def whoami(self) -> dict[str, Any]:
        """The agent this key belongs to."""
        return await self.request("GET", "/v1/whoami")

    async def agents(self) -> list[dict[str, Any]]:
        """Every agent (admin)."""
        return (await self.request("GET", "/v1/agents"))["agents"]

    async def create_agent(
        self,
        agent_id: str,
        *,
        display_name: str | None = None,
        is_admin: bool = False,
        key_label: str | None = None,
    ) -> dict[str, str]:
        """A new agent and its first key (admin); the key is shown once."""
        body = {"id": agent_id, "display_name": display_name, "is_admin": is_admin, "key_label": key_label}
        return await self.request("POST", "/v1/agents", json=body)

    async def create_key(self, agent_id: str, *, label: str | None = None) -> dict[str, str]:
        """A new key for an agent (admin); shown once."""
        return await self.request("POST", f"/v1/agents/{agent_id}/keys", json={"label": label})

    async def keys(self, agent_id: str) -> list[dict[str, Any]]:
        """An agent's keys, without their secrets (admin)."""
        return (await self.request("GET", f"/v1/agents/{agent_id}/keys"))["keys"]

    async def revoke_key(self, agent_id: str, key_id: uuid.UUID | str) -> None:
        """Revoke one of an agent's keys (admin)."""
        await self.request("DELETE", f"/v1/agents/{agent_id}/keys/{key_id}")

    async def disable_agent(self, agent_id: str) -> None:
        """Disable an agent: its keys stop working (admin)."""
        await self.request("POST", f"/v1/agents/{agent_id}/disable")

    # workflows
    async def dispatch(self, task: dict[str, Any]) -> dict[str, Any]:
        """Workflow learning: route and run a task (``POST /v1/workflows/dispatch``)."""
        return await self.request("POST", "/v1/workflows/dispatch", json=task)

    # health
    async def health(self) -> dict[str, Any]:
        """Liveness: the service answers."""
        return await self.request("GET", "/v1/health")

    async def ready(self) -> bool:
        """Readiness: the models and the database are up."""
        try:
            response = await self._http.get("/v1/ready")
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
        return response.status_code == 200 and bool(response.json().get("ready"))


P = ParamSpec("P")
R = TypeVar("R")


def _sync(method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]) -> Callable[Concatenate[Client, P], R]:
    """``method`` of the async client, run to completion on the sync client's loop."""

    @functools.wraps(method)
    def call(self: Client, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(method(self._async, *args, **kwargs))

    return call


class Client:
    """Synchronous client: every method of :class:`AsyncClient`, each run to completion on this
    client's own event loop (in a thread of its own, so a caller inside a running event loop may
    use it too). ``api_key`` is an agent's key (``cbk_...``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._async = AsyncClient(base_url, api_key, timeout_s=timeout_s, transport=transport)
        self.base_url = self._async.base_url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cabrain-client", daemon=True)
        self._thread.start()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: Coroutine[Any, Any, R]) -> R:
        if self._loop.is_closed():
            call.close()
            raise ServiceError("this client is closed", hint="make a new Client")
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    def close(self) -> None:
        """Close the connections and stop the client's loop (closing twice is harmless)."""
        if self._loop.is_closed():
            return
        try:
            self._run(self._async.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    request = _sync(AsyncClient.request)
    download = _sync(AsyncClient.download)
    retain = _sync(AsyncClient.retain)
    retain_batch = _sync(AsyncClient.retain_batch)
    recall = _sync(AsyncClient.recall)
    recall_archive = _sync(AsyncClient.recall_archive)
    get = _sync(AsyncClient.get)
    list_memories = _sync(AsyncClient.list_memories)
    unarchive = _sync(AsyncClient.unarchive)
    entities = _sync(AsyncClient.entities)
    entity = _sync(AsyncClient.entity)
    forget = _sync(AsyncClient.forget)
    reconsolidate = _sync(AsyncClient.reconsolidate)
    touch = _sync(AsyncClient.touch)
    judgments = _sync(AsyncClient.judgments)
    revert = _sync(AsyncClient.revert)
    revert_run = _sync(AsyncClient.revert_run)
    create_namespace = _sync(AsyncClient.create_namespace)
    namespaces = _sync(AsyncClient.namespaces)
    share = _sync(AsyncClient.share)
    accept_grant = _sync(AsyncClient.accept_grant)
    decline_grant = _sync(AsyncClient.decline_grant)
    revoke = _sync(AsyncClient.revoke)
    grants = _sync(AsyncClient.grants)
    whoami = _sync(AsyncClient.whoami)
    agents = _sync(AsyncClient.agents)
    create_agent = _sync(AsyncClient.create_agent)
    create_key = _sync(AsyncClient.create_key)
    keys = _sync(AsyncClient.keys)
    revoke_key = _sync(AsyncClient.revoke_key)
    disable_agent = _sync(AsyncClient.disable_agent)
    dispatch = _sync(AsyncClient.dispatch)
    set_role = _sync(AsyncClient.set_role)
    pending_actions = _sync(AsyncClient.pending_actions)
    decide_action = _sync(AsyncClient.decide_action)
    usage = _sync(AsyncClient.usage)
    set_cap = _sync(AsyncClient.set_cap)
    add_channel = _sync(AsyncClient.add_channel)
    channels = _sync(AsyncClient.channels)
    remove_channel = _sync(AsyncClient.remove_channel)
    file_issue = _sync(AsyncClient.file_issue)
    add_notifier = _sync(AsyncClient.add_notifier)
    notifiers = _sync(AsyncClient.notifiers)
    remove_notifier = _sync(AsyncClient.remove_notifier)
    subscribe = _sync(AsyncClient.subscribe)
    subscriptions = _sync(AsyncClient.subscriptions)
    unsubscribe = _sync(AsyncClient.unsubscribe)
    outbox = _sync(AsyncClient.outbox)
    release = _sync(AsyncClient.release)
    export = _sync(AsyncClient.export)
    import_file = _sync(AsyncClient.import_file)
    add_connector = _sync(AsyncClient.add_connector)
    connectors = _sync(AsyncClient.connectors)
    connector = _sync(AsyncClient.connector)
    remove_connector = _sync(AsyncClient.remove_connector)
    sync_connector = _sync(AsyncClient.sync_connector)
    dry_run_connector = _sync(AsyncClient.dry_run_connector)
    connector_runs = _sync(AsyncClient.connector_runs)
    connector_run = _sync(AsyncClient.connector_run)
    health = _sync(AsyncClient.health)
    ready = _sync(AsyncClient.ready)
    # corrections and the audit (cabrain/client/corrections.py)
    correct = _sync(AsyncClient.correct)
    restore = _sync(AsyncClient.restore)
    audit = _sync(AsyncClient.audit)
    revert_judgments = _sync(AsyncClient.revert_judgments)
    # explain (cabrain/client/explain.py)
    explain_recall = _sync(AsyncClient.explain_recall)
    # overview (cabrain/client/overview.py)
    overview = _sync(AsyncClient.overview)
    # entity care (cabrain/client/entity_care.py)
    rename_entity = _sync(AsyncClient.rename_entity)
    merge_entity = _sync(AsyncClient.merge_entity)


__all__ = ["AsyncClient", "Client", "Transport", "memory_body", "raise_for", "recall_body"]
