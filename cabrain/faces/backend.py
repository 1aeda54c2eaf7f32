"""What the agent-facing faces (MCP tools, the memory-tool backend, capture) need from CaBrain,
for one agent: straight from a :class:`~cabrain.brain.Brain`, or through the HTTP API."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

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
)

if TYPE_CHECKING:
    from cabrain.brain import Brain
    from cabrain.client import AsyncClient


class MemoryBackend(Protocol):
    """CaBrain's memory operations, acting as one agent."""

    agent: str

    async def retain(self, item: MemoryInput, *, decide: bool = True) -> RetainResult: ...

    async def recall(self, query: RecallQuery) -> RecallResult: ...

    async def recall_archive(self, query: ArchiveQuery) -> ArchiveResult: ...

    async def get(self, memory_id: uuid.UUID | str, *, as_of: datetime | None = None) -> MemoryWithHistory: ...

    async def forget(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> MemoryWithHistory: ...

    async def reconsolidate(
        self, memory_id: uuid.UUID | str, content: str, *, reason: str | None = None, source_ref: str | None = None
    ) -> RetainResult: ...

    async def correct(self, memory_id: uuid.UUID | str, content: str, *, reason: str | None = None) -> RetainResult: ...

    async def restore(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> dict[str, Any]: ...

    async def list_memories(
        self,
        namespace: str,
        *,
        source_kind: str | None = None,
        source_ref_prefix: str | None = None,
        limit: int = 1000,
        include_archived: bool = False,
    ) -> list[Memory]: ...

    async def share(self, namespace: str, grantee: str, *, can_write: bool = False) -> bool: ...

    async def judgments(self, memory_id: uuid.UUID | str) -> list[dict[str, Any]]: ...

    async def revert(
        self,
        *,
        memory_id: uuid.UUID | str | None = None,
        judgment_id: uuid.UUID | str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]: ...

    async def revert_run(self, run_id: uuid.UUID | str, *, reason: str | None = None) -> list[dict[str, Any]]: ...

    async def touch(self, memory_ids: list[uuid.UUID]) -> int: ...

    async def unarchive(self, memory_id: uuid.UUID | str) -> Memory: ...

    async def create_namespace(self, name: str) -> bool: ...

    async def namespaces(self) -> list[dict[str, Any]]: ...

    async def entities(
        self, namespace: str, *, query: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EntityPage: ...

    async def entity(
        self, namespace: str, name_or_id: str, *, history: bool = False, limit: int = 20
    ) -> EntityWithMemories: ...

    async def rename_entity(
        self, namespace: str, name_or_id: str, new_name: str, *, reason: str | None = None
    ) -> dict[str, Any]: ...

    async def merge_entity(
        self, namespace: str, name_or_id: str, into: str, *, reason: str | None = None
    ) -> dict[str, Any]: ...

    async def dispatch(self, task: dict[str, Any]) -> dict[str, Any]: ...


class BrainBackend:
    """In process, on a Brain (stdio MCP without a service, the ingress's /mcp, capture)."""

    def __init__(self, brain: Brain, agent: str) -> None:
        self.brain, self.agent = brain, agent

    async def retain(self, item: MemoryInput, *, decide: bool = True) -> RetainResult:
        [result] = await self.brain.retain(self.agent, [item], decide=decide)
        return result

    async def recall(self, query: RecallQuery) -> RecallResult:
        return await self.brain.recall(self.agent, query)

    async def recall_archive(self, query: ArchiveQuery) -> ArchiveResult:
        return await self.brain.recall_archive(self.agent, query)

    async def get(self, memory_id: uuid.UUID | str, *, as_of: datetime | None = None) -> MemoryWithHistory:
        return await self.brain.get(self.agent, memory_id, as_of=as_of)

    async def forget(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> MemoryWithHistory:
        return await self.brain.forget(self.agent, memory_id, reason=reason)

    async def reconsolidate(
        self, memory_id: uuid.UUID | str, content: str, *, reason: str | None = None, source_ref: str | None = None
    ) -> RetainResult:
        return await self.brain.reconsolidate(self.agent, memory_id, content, reason=reason, source_ref=source_ref)

    async def correct(self, memory_id: uuid.UUID | str, content: str, *, reason: str | None = None) -> RetainResult:
        return await self.brain.correct(self.agent, memory_id, content, reason=reason)

    async def restore(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> dict[str, Any]:
        return await self.brain.restore(self.agent, memory_id, reason=reason)

    async def list_memories(
        self,
        namespace: str,
        *,
        source_kind: str | None = None,
        source_ref_prefix: str | None = None,
        limit: int = 1000,
        include_archived: bool = False,
    ) -> list[Memory]:
        return await self.brain.list_memories(
            self.agent,
            namespace,
            source_kind=source_kind,
            source_ref_prefix=source_ref_prefix,
            limit=limit,
            include_archived=include_archived,
        )

    async def share(self, namespace: str, grantee: str, *, can_write: bool = False) -> bool:
        return await self.brain.share(self.agent, namespace, grantee, can_write=can_write)

    async def judgments(self, memory_id: uuid.UUID | str) -> list[dict[str, Any]]:
        return await self.brain.judgments(self.agent, memory_id)

    async def revert(
        self,
        *,
        memory_id: uuid.UUID | str | None = None,
        judgment_id: uuid.UUID | str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        return await self.brain.revert(self.agent, memory_id=memory_id, judgment_id=judgment_id, reason=reason)

    async def revert_run(self, run_id: uuid.UUID | str, *, reason: str | None = None) -> list[dict[str, Any]]:
        return await self.brain.revert_run(self.agent, run_id, reason=reason)

    async def touch(self, memory_ids: list[uuid.UUID]) -> int:
        return await self.brain.touch(self.agent, memory_ids)

    async def unarchive(self, memory_id: uuid.UUID | str) -> Memory:
        return await self.brain.unarchive(self.agent, memory_id)

    async def create_namespace(self, name: str) -> bool:
        return await self.brain.create_namespace(self.agent, name)

    async def namespaces(self) -> list[dict[str, Any]]:
        return await self.brain.namespaces(self.agent)

    async def entities(
        self, namespace: str, *, query: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EntityPage:
        return await self.brain.entities(self.agent, namespace, query=query, limit=limit, cursor=cursor)

    async def entity(
        self, namespace: str, name_or_id: str, *, history: bool = False, limit: int = 20
    ) -> EntityWithMemories:
        return await self.brain.entity(self.agent, namespace, name_or_id, history=history, limit=limit)

    async def rename_entity(
        self, namespace: str, name_or_id: str, new_name: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        return await self.brain.rename_entity(self.agent, namespace, name_or_id, new_name, reason=reason)

    async def merge_entity(
        self, namespace: str, name_or_id: str, into: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        return await self.brain.merge_entity(self.agent, namespace, name_or_id, into, reason=reason)

    async def dispatch(self, task: dict[str, Any]) -> dict[str, Any]:
        return (await self.brain.workflows.dispatch(self.agent, task)).to_json()


class HttpBackend:
    """Through a running service's HTTP API, with an agent's key."""

    def __init__(self, client: AsyncClient, agent: str) -> None:
        self.client, self.agent = client, agent

    async def retain(self, item: MemoryInput, *, decide: bool = True) -> RetainResult:
        if decide:
            return await self.client.retain(item)
        [result] = await self.client.retain_batch([item], decide=False)
        return result

    async def recall(self, query: RecallQuery) -> RecallResult:
        return await self.client.recall(query)

    async def recall_archive(self, query: ArchiveQuery) -> ArchiveResult:
        return await self.client.recall_archive(query)

    async def get(self, memory_id: uuid.UUID | str, *, as_of: datetime | None = None) -> MemoryWithHistory:
        return await self.client.get(memory_id, as_of=as_of)

    async def forget(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> MemoryWithHistory:
        return await self.client.forget(memory_id, reason=reason)

    async def reconsolidate(
        self, memory_id: uuid.UUID | str, content: str, *, reason: str | None = None, source_ref: str | None = None
    ) -> RetainResult:
        return await self.client.reconsolidate(memory_id, content, reason=reason, source_ref=source_ref)

    async def correct(self, memory_id: uuid.UUID | str, content: str, *, reason: str | None = None) -> RetainResult:
        return await self.client.correct(memory_id, content, reason=reason)

    async def restore(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> dict[str, Any]:
        return await self.client.restore(memory_id, reason=reason)

    async def list_memories(
        self,
        namespace: str,
        *,
        source_kind: str | None = None,
        source_ref_prefix: str | None = None,
        limit: int = 1000,
        include_archived: bool = False,
    ) -> list[Memory]:
        return await self.client.list_memories(
            namespace,
            source_kind=source_kind,
            source_ref_prefix=source_ref_prefix,
            limit=limit,
            include_archived=include_archived,
        )

    async def share(self, namespace: str, grantee: str, *, can_write: bool = False) -> bool:
        return await self.client.share(namespace, grantee, can_write=can_write)

    async def judgments(self, memory_id: uuid.UUID | str) -> list[dict[str, Any]]:
        return await self.client.judgments(memory_id)

    async def revert(
        self,
        *,
        memory_id: uuid.UUID | str | None = None,
        judgment_id: uuid.UUID | str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        return await self.client.revert(memory_id=memory_id, judgment_id=judgment_id, reason=reason)

    async def revert_run(self, run_id: uuid.UUID | str, *, reason: str | None = None) -> list[dict[str, Any]]:
        return await self.client.revert_run(run_id, reason=reason)

    async def touch(self, memory_ids: list[uuid.UUID]) -> int:
        return await self.client.touch(memory_ids)

    async def unarchive(self, memory_id: uuid.UUID | str) -> Memory:
        return await self.client.unarchive(memory_id)

    async def create_namespace(self, name: str) -> bool:
        return await self.client.create_namespace(name)

    async def namespaces(self) -> list[dict[str, Any]]:
        return await self.client.namespaces()

    async def entities(
        self, namespace: str, *, query: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> EntityPage:
        return await self.client.entities(namespace, query=query, limit=limit, cursor=cursor)

    async def entity(
        self, namespace: str, name_or_id: str, *, history: bool = False, limit: int = 20
    ) -> EntityWithMemories:
        return await self.client.entity(namespace, name_or_id, history=history, limit=limit)

    async def rename_entity(
        self, namespace: str, name_or_id: str, new_name: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        return await self.client.rename_entity(namespace, name_or_id, new_name, reason=reason)

    async def merge_entity(
        self, namespace: str, name_or_id: str, into: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        return await self.client.merge_entity(namespace, name_or_id, into, reason=reason)

    async def dispatch(self, task: dict[str, Any]) -> dict[str, Any]:
        return await self.client.dispatch(task)
