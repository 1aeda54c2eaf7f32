"""The MCP tools' shared argument types (each type's description is part of the tool's schema) and
the shapes their answers take (:mod:`cabrain.faces.mcp`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from cabrain import namespaces
from cabrain.types import MAX_CONTEXT_TURNS, Entity, Memory, RecallMode

Namespace = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=namespaces.PATTERN,
        description="Namespace, usually one per project: one you own or were granted (personal ones are "
        "'@<your agent id>/<project>', e.g. '@claude-code/github.com/acme/api', where capture writes); "
        "letters, digits and . _ : / @ -",
    ),
]
MemoryId = Annotated[str, Field(description="A memory id (UUID) from memory_recall or memory_retain.")]
Query = Annotated[
    str,
    Field(
        min_length=1, max_length=4000, description="What you want to know, as a question or keywords, in any language"
    ),
]
HowMany = Annotated[int, Field(ge=1, le=50, description="How many memories to return")]
Mode = Annotated[RecallMode, Field(description="hybrid (best), vector (meaning), bm25 (exact words)")]
AsOf = Annotated[
    datetime | None,
    Field(
        description="What was true at this moment (ISO 8601, e.g. 2026-01-31T12:00:00Z; without an offset: UTC): "
        "the versions valid then, not yet superseded or forgotten. Leave it out for what is true now"
    ),
]
Turns = Annotated[
    Annotated[list[str], Field(max_length=MAX_CONTEXT_TURNS)] | None,
    Field(
        description=f"The conversation's earlier turns, oldest first (at most {MAX_CONTEXT_TURNS}; the query is "
        "its latest turn): what the query refers back to"
    ),
]


def memory_json(m: Memory) -> dict[str, Any]:
    """A memory as an agent should see it: content plus provenance."""
    return {
        "id": str(m.id),
        "content": m.content,
        "namespace": m.namespace,
        "owner": m.owner_agent_id,
        "visibility": m.visibility.value,
        "network": m.network.value,
        "type": m.memory_type.value,
        "source_kind": m.source_kind,
        "source_ref": m.source_ref,
        "importance": round(m.importance, 3),
        "created_at": m.created_at.isoformat(),
        "valid_at": m.valid_at.isoformat(),
        "invalid_at": m.invalid_at.isoformat() if m.invalid_at else None,
        "superseded_by": str(m.superseded_by) if m.superseded_by else None,
        "tier": m.tier,
    }


def when(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def entity_json(e: Entity) -> dict[str, Any]:
    return {
        "name": e.name,
        "id": str(e.id),
        "kind": e.kind,
        "summary": e.summary,
        "summarized_at": when(e.summarized_at),
        "mentions": e.mentions + e.own_private_mentions,  # current memories the caller may read
    }


def namespace_json(row: dict[str, Any], agent: str) -> dict[str, Any]:
    """A namespace as its caller should see it: its access there, and a grant offered and not accepted."""
    grant = row.get("grant")
    access = "owner" if row["owner_agent_id"] == agent else "write" if row["can_write"] else "read"
    offered = None
    if grant and not grant["accepted"]:
        offered = {"can_read": grant["can_read"], "can_write": grant["can_write"], "by": grant["granted_by"]}
    return {
        "name": row["name"],
        "owner": row["owner_agent_id"],
        "access": access,
        "pending_offer": offered,
        "memory_count": row.get("memory_count"),
    }


__all__ = [
    "AsOf",
    "HowMany",
    "MemoryId",
    "Mode",
    "Namespace",
    "Query",
    "Turns",
    "entity_json",
    "memory_json",
    "namespace_json",
    "when",
]
