"""Request bodies of the HTTP API (``/v1``), with the examples the OpenAPI docs show (the answers:
:mod:`cabrain.serve.responses`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cabrain.types import (
    MAX_CONTEXT_TURNS,
    ArchiveQuery,
    MemoryInput,
    MemoryType,
    Network,
    RecallMode,
    RecallQuery,
    Visibility,
)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _query_fields(body: BaseModel) -> dict[str, Any]:
    """A query body's fields, its lists as the tuples the frozen query types hold."""
    data = body.model_dump()
    for key in ("networks", "memory_types", "source_kinds"):  # context: RecallQuery makes its own tuple
        if data[key] is not None:
            data[key] = tuple(data[key])
    return data


class MemoryIn(Body):
    content: str = Field(description="The memory, in any language (Arabic and English are first class).")
    namespace: str = Field(description="Namespace to write into (must exist and be writable by the caller).")
    visibility: Visibility = Visibility.PRIVATE
    network: Network = Network.EXPERIENCE
    memory_type: MemoryType = MemoryType.EPISODIC
    source_kind: str | None = Field(default=None, description="manual, decision, chat, claude_code, import, ...")
    source_ref: str | None = Field(default=None, description="Where it came from (URL, file, message id).")
    valid_at: datetime | None = Field(default=None, description="When it became true (default: now).")
    importance: float | None = Field(default=None, ge=0, le=1, description="Explicit importance; unset: scored.")
    important: bool = Field(default=False, description="The caller flags this as mattering.")
    metadata: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "content": "We chose pgvector with HNSW for the hot tier.",
                    "namespace": "cabrain",
                    "visibility": "team",
                    "network": "fact",
                    "source_kind": "decision",
                },
                {"content": "اجتماع الفريق يوم الأحد الساعة العاشرة صباحاً.", "namespace": "team-ar"},
            ]
        },
    )

    def to_input(self) -> MemoryInput:
        return MemoryInput(**self.model_dump())


class RetainBatchIn(Body):
    items: list[MemoryIn] = Field(min_length=1, description="Memories to write in one transaction.")
    decide: bool = Field(
        default=True,
        description="Compare each with its neighbours (false: store all as ADD).",
    )


class RecallIn(Body):
    query: str = Field(description="What to remember.")
    namespace: str
    k: int = Field(default=10, ge=1, description="Hits wanted (at most CABRAIN_RECALL_MAX_K).")
    mode: RecallMode = RecallMode.HYBRID
    include_invalid: bool = False
    networks: list[Network] | None = None
    memory_types: list[MemoryType] | None = None
    source_kinds: list[str] | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    rerank: bool = True
    expand: bool = True
    as_of: datetime | None = Field(
        default=None,
        description="What the brain held true at this moment (ISO 8601; without an offset: UTC): the versions "
        "valid at or before it and not yet superseded or forgotten then. Unset: as it is now.",
    )
    context: list[str] = Field(
        default_factory=list,
        max_length=MAX_CONTEXT_TURNS,
        description="The dialogue's earlier turns, oldest first (query is the latest); each as long as a "
        "query may be (CABRAIN_MAX_QUERY_CHARS).",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "which vector store did we choose?",
                    "namespace": "cabrain",
                    "k": 5,
                },
                {
                    "query": "and which one did we use before that?",
                    "namespace": "cabrain",
                    "context": ["we moved the hot tier last spring", "right, after the load tests"],
                    "as_of": "2026-03-01T00:00:00Z",
                },
            ]
        },
    )

    def to_query(self) -> RecallQuery:
        return RecallQuery(**_query_fields(self))


class ArchiveRecallIn(Body):
    query: str = Field(description="What to look for in the archive.")
    namespace: str
    k: int = Field(default=10, ge=1, description="Hits wanted (at most CABRAIN_RECALL_MAX_K).")
    mode: RecallMode = RecallMode.HYBRID
    include_invalid: bool = Field(default=True, description="Include superseded and forgotten memories.")
    networks: list[Network] | None = None
    memory_types: list[MemoryType] | None = None
    source_kinds: list[str] | None = None
    valid_from: datetime | None = Field(default=None, description="Only memories valid from this moment on.")
    valid_to: datetime | None = Field(default=None, description="Only memories valid before this moment.")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "what did we decide about the job queue?",
                    "namespace": "cabrain",
                    "k": 5,
                    "valid_from": "2026-01-01T00:00:00Z",
                    "valid_to": "2026-04-01T00:00:00Z",
                }
            ]
        },
    )

    def to_query(self) -> ArchiveQuery:
        return ArchiveQuery(**_query_fields(self))


class CaptureItemIn(Body):
    content: str = Field(min_length=1)
    visibility: Visibility = Visibility.PRIVATE
    network: Network = Network.EXPERIENCE
    memory_type: MemoryType = MemoryType.EPISODIC
    source_kind: str | None = Field(default=None, max_length=200)
    source_ref: str | None = Field(default=None, max_length=2000)
    valid_at: datetime | None = None
    important: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class CaptureRecallIn(Body):
    query: str = Field(min_length=1)
    k: int = Field(default=6, ge=1, le=50)
    context: list[str] = Field(
        default_factory=list,
        max_length=MAX_CONTEXT_TURNS,
        description="The session's earlier turns, oldest first (query is the prompt just submitted).",
    )


class CaptureIn(Body):
    namespace: str | None = Field(
        default=None,
        description="A namespace the operator chose (CABRAIN_CAPTURE_NAMESPACE); created (owned by the caller) "
        "when missing. Its memories are recalled for context only if the caller owns it or accepted a grant on it.",
    )
    project: str | None = Field(
        default=None,
        description="The project's name as capture derived it (e.g. 'github.com/acme/api'); bound to the caller: "
        "its own namespace of that name from before, else its personal '@<agent>/<project>'.",
    )
    items: list[CaptureItemIn] = Field(
        default_factory=list, max_length=256, description="Memories (none: only recall)."
    )
    decide: bool = Field(default=True, description="Compare with neighbours (false: store as they are).")
    recall: CaptureRecallIn | None = Field(default=None, description="Also recall for context, in the same call.")


class ForgetIn(Body):
    reason: str | None = Field(default=None, max_length=2000)


class RevertIn(Body):
    reason: str | None = Field(default=None, max_length=2000, description="Why it is undone (kept with the revert).")


class TouchIn(Body):
    ids: list[str] = Field(min_length=1, max_length=1000, description="Memory ids that were read.")


class ReconsolidateIn(Body):
    content: str = Field(description="The corrected memory; the old one is superseded, never deleted.")
    reason: str | None = Field(default=None, max_length=2000)
    source_ref: str | None = Field(
        default=None, max_length=2000, description="A new source_ref (unset: keep the old one)."
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "content": "We moved the hot tier to PostgreSQL 18.",
                    "reason": "upgrade",
                }
            ]
        },
    )


class NamespaceIn(Body):
    name: str = Field(
        description="Letters, digits and . _ : / @ - (1-200 characters); '@<your agent id>/...' is personal.",
        examples=["cabrain"],
    )


class GrantAnswerIn(Body):
    namespace: str = Field(description="The namespace whose grant the caller accepts or declines.")


class GrantIn(Body):
    namespace: str
    agent: str = Field(description="The agent receiving access.")
    can_read: bool = True
    can_write: bool = False

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"namespace": "cabrain", "agent": "reviewer", "can_write": False}]},
    )


class RevokeIn(Body):
    namespace: str
    agent: str


class AgentIn(Body):
    id: str = Field(
        description="Agent id: letters, digits and . _ @ - (1-128 characters).",
        examples=["claude-code"],
    )
    display_name: str | None = Field(default=None, max_length=200)
    is_admin: bool = False
    key_label: str | None = Field(default=None, max_length=200, description="Label of the first key.")


class KeyIn(Body):
    label: str | None = Field(default=None, max_length=200)
