"""Domain types shared by the core and every face."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class Visibility(str, enum.Enum):
    PRIVATE = "private"  # the owner agent only
    TEAM = "team"  # agents granted the namespace (and its owner)
    GLOBAL = "global"  # every agent


class Network(str, enum.Enum):
    FACT = "fact"
    EXPERIENCE = "experience"
    OBSERVATION = "observation"
    BELIEF = "belief"


class MemoryType(str, enum.Enum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    WORKING = "working"


class Decision(str, enum.Enum):
    """What retain did with a new memory (SPEC §4.1)."""

    ADD = "ADD"  # stored as a new memory
    UPDATE = "UPDATE"  # stored, and it supersedes a neighbour it revises
    INVALIDATE = "INVALIDATE"  # it retracts a neighbour, which is invalidated; nothing new stored
    NOOP = "NOOP"  # a duplicate: the existing memory was reinforced instead


class RecallMode(str, enum.Enum):
    VECTOR = "vector"
    BM25 = "bm25"
    HYBRID = "hybrid"


@dataclass(frozen=True)
class MemoryInput:
    """One memory to retain."""

    content: str
    namespace: str
    visibility: Visibility = Visibility.PRIVATE
    network: Network = Network.EXPERIENCE
    memory_type: MemoryType = MemoryType.EPISODIC
    source_kind: str | None = None
    source_ref: str | None = None
    valid_at: datetime | None = None
    importance: float | None = None  # explicit importance; None = computed at write time
    important: bool = False  # an explicit "this matters" flag from the caller
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Memory:
    """A stored memory with its provenance."""

    id: uuid.UUID
    namespace: str
    owner_agent_id: str | None
    visibility: Visibility
    network: Network
    memory_type: MemoryType
    content: str
    source_kind: str | None
    source_ref: str | None
    importance: float
    access_count: int
    last_accessed_at: datetime | None
    created_at: datetime
    valid_at: datetime
    invalid_at: datetime | None
    superseded_by: uuid.UUID | None
    tier: str
    metadata: Mapping[str, Any]

    @property
    def is_current(self) -> bool:
        return self.invalid_at is None


@dataclass(frozen=True)
class RetainResult:
    decision: Decision
    memory_id: uuid.UUID | None  # the stored (or, for NOOP, the reinforced) memory
    importance: float
    superseded: tuple[uuid.UUID, ...] = ()  # memories this write invalidated
    entities: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class ScoreBreakdown:
    vector_rank: int | None
    vector_similarity: float | None
    bm25_rank: int | None
    bm25_score: float | None
    fused: float
    importance: float
    rerank: float | None = None


@dataclass(frozen=True)
class Hit:
    memory: Memory
    score: float
    breakdown: ScoreBreakdown


@dataclass(frozen=True)
class RecallQuery:
    query: str
    namespace: str
    k: int = 10
    mode: RecallMode = RecallMode.HYBRID
    include_invalid: bool = False
    networks: tuple[Network, ...] | None = None
    memory_types: tuple[MemoryType, ...] | None = None
    source_kinds: tuple[str, ...] | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    rerank: bool = True  # rerank when a reranker is configured
    expand: bool = True  # one hop through the entity graph


@dataclass(frozen=True)
class EntitySummary:
    """An entity the hits of a recall mention, with what sleep summarised of it."""

    name: str
    summary: str
    summarized_at: datetime | None
    memory_ids: list[uuid.UUID]  # the hits that mention it, best first


@dataclass(frozen=True)
class RecallResult:
    hits: list[Hit]
    related: list[Memory]
    timings_ms: Mapping[str, float]
    cached: bool = False
    # the summaries of the entities the hits mention most, each only when the caller may read every
    # memory it was made from
    entities: list[EntitySummary] = field(default_factory=list)


@dataclass(frozen=True)
class ArchiveQuery:
    """``recall_archive``: a search of the cold tier (demoted memories). Unlike hot recall it
    includes invalidated (superseded, forgotten) memories unless ``include_invalid`` is False."""

    query: str
    namespace: str
    k: int = 10
    mode: RecallMode = RecallMode.HYBRID
    include_invalid: bool = True
    networks: tuple[Network, ...] | None = None
    memory_types: tuple[MemoryType, ...] | None = None
    source_kinds: tuple[str, ...] | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass(frozen=True)
class Link:
    """A provenance edge (``memory_sources``): ``relation`` is distilled_from or merged."""

    memory_id: uuid.UUID
    relation: str


@dataclass(frozen=True)
class ArchiveHit:
    memory: Memory  # tier "cold"
    score: float
    breakdown: ScoreBreakdown
    demoted_at: datetime
    batch: uuid.UUID  # the demotion batch (cold_batches) that carried it
    derived: list[Link]  # memories made from this one (facts distilled from it, a dedup survivor)
    sources: list[Link]  # memories this one was made from


@dataclass(frozen=True)
class ArchiveResult:
    hits: list[ArchiveHit]
    scanned: int  # cold rows read (after partition pruning)
    files: int  # data files planned
    timings_ms: Mapping[str, float]


@dataclass(frozen=True)
class MemoryWithHistory:
    """``get``: the memory, the versions it replaced (oldest first) and those that replaced it."""

    memory: Memory
    previous: list[Memory]
    next: list[Memory]
    entities: list[str]


@dataclass(frozen=True)
class Entity:
    """A name memories mention (a person, project, tool, file ...), and what sleep summarised of it."""

    id: uuid.UUID
    namespace: str
    name: str
    kind: str | None
    summary: str | None  # None: not summarised yet, or made from memories the caller may not read
    summarized_at: datetime | None  # None whenever summary is
    updated_at: datetime


@dataclass(frozen=True)
class EntityPage:
    """``list_entities``: entities in name order; ``next_cursor`` asks for the next page."""

    entities: list[Entity]
    next_cursor: str | None


@dataclass(frozen=True)
class EntityWithMemories:
    """``get_entity``: the entity and the memories that mention it the caller may read, newest first."""

    entity: Entity
    memories: list[Memory]


# --- JSON forms (the HTTP API and the L1 cache use these) -----------------------------------------
def jsonable(value: Any) -> Any:
    """``value`` with enums, datetimes and UUIDs (at any depth) turned into JSON values."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def _dt(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _parse_dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def memory_to_dict(m: Memory) -> dict[str, Any]:
    return {
        "id": str(m.id),
        "namespace": m.namespace,
        "owner_agent_id": m.owner_agent_id,
        "visibility": m.visibility.value,
        "network": m.network.value,
        "memory_type": m.memory_type.value,
        "content": m.content,
        "source_kind": m.source_kind,
        "source_ref": m.source_ref,
        "importance": m.importance,
        "access_count": m.access_count,
        "last_accessed_at": _dt(m.last_accessed_at),
        "created_at": _dt(m.created_at),
        "valid_at": _dt(m.valid_at),
        "invalid_at": _dt(m.invalid_at),
        "superseded_by": str(m.superseded_by) if m.superseded_by else None,
        "tier": m.tier,
        "metadata": dict(m.metadata),
    }


def memory_from_dict(d: Mapping[str, Any]) -> Memory:
    return Memory(
        id=uuid.UUID(d["id"]),
        namespace=d["namespace"],
        owner_agent_id=d["owner_agent_id"],
        visibility=Visibility(d["visibility"]),
        network=Network(d["network"]),
        memory_type=MemoryType(d["memory_type"]),
        content=d["content"],
        source_kind=d["source_kind"],
        source_ref=d["source_ref"],
        importance=d["importance"],
        access_count=d["access_count"],
        last_accessed_at=_parse_dt(d["last_accessed_at"]),
        created_at=_parse_dt(d["created_at"]),
        valid_at=_parse_dt(d["valid_at"]),
        invalid_at=_parse_dt(d["invalid_at"]),
        superseded_by=uuid.UUID(d["superseded_by"]) if d["superseded_by"] else None,
        tier=d["tier"],
        metadata=d["metadata"],
    )


def recall_to_dict(r: RecallResult) -> dict[str, Any]:
    return {
        "hits": [
            {"memory": memory_to_dict(h.memory), "score": h.score, "breakdown": h.breakdown.__dict__} for h in r.hits
        ],
        "related": [memory_to_dict(m) for m in r.related],
        "timings_ms": dict(r.timings_ms),
        "cached": r.cached,
        "entities": [
            {
                "name": e.name,
                "summary": e.summary,
                "summarized_at": _dt(e.summarized_at),
                "memory_ids": [str(i) for i in e.memory_ids],
            }
            for e in r.entities
        ],
    }


def recall_from_dict(d: Mapping[str, Any], *, cached: bool = False) -> RecallResult:
    return RecallResult(
        hits=[Hit(memory_from_dict(h["memory"]), h["score"], ScoreBreakdown(**h["breakdown"])) for h in d["hits"]],
        related=[memory_from_dict(m) for m in d["related"]],
        timings_ms=d["timings_ms"],
        cached=cached,
        entities=[  # absent from answers of earlier versions (and their cached ones)
            EntitySummary(
                e["name"], e["summary"], _parse_dt(e["summarized_at"]), [uuid.UUID(i) for i in e["memory_ids"]]
            )
            for e in d.get("entities", [])
        ],
    )


def history_to_dict(h: MemoryWithHistory) -> dict[str, Any]:
    return {
        "memory": memory_to_dict(h.memory),
        "previous": [memory_to_dict(m) for m in h.previous],
        "next": [memory_to_dict(m) for m in h.next],
        "entities": list(h.entities),
    }


def history_from_dict(d: Mapping[str, Any]) -> MemoryWithHistory:
    return MemoryWithHistory(
        memory=memory_from_dict(d["memory"]),
        previous=[memory_from_dict(m) for m in d["previous"]],
        next=[memory_from_dict(m) for m in d["next"]],
        entities=list(d["entities"]),
    )


def entity_to_dict(e: Entity) -> dict[str, Any]:
    return {
        "id": str(e.id),
        "namespace": e.namespace,
        "name": e.name,
        "kind": e.kind,
        "summary": e.summary,
        "summarized_at": _dt(e.summarized_at),
        "updated_at": _dt(e.updated_at),
    }


def entity_from_dict(d: Mapping[str, Any]) -> Entity:
    return Entity(
        id=uuid.UUID(d["id"]),
        namespace=d["namespace"],
        name=d["name"],
        kind=d["kind"],
        summary=d["summary"],
        summarized_at=_parse_dt(d["summarized_at"]),
        updated_at=_parse_dt(d["updated_at"]),
    )


def entity_page_to_dict(p: EntityPage) -> dict[str, Any]:
    return {"entities": [entity_to_dict(e) for e in p.entities], "next_cursor": p.next_cursor}


def entity_page_from_dict(d: Mapping[str, Any]) -> EntityPage:
    return EntityPage([entity_from_dict(e) for e in d["entities"]], d["next_cursor"])


def entity_memories_to_dict(e: EntityWithMemories) -> dict[str, Any]:
    return {"entity": entity_to_dict(e.entity), "memories": [memory_to_dict(m) for m in e.memories]}


def entity_memories_from_dict(d: Mapping[str, Any]) -> EntityWithMemories:
    return EntityWithMemories(entity_from_dict(d["entity"]), [memory_from_dict(m) for m in d["memories"]])


def retain_to_dict(r: RetainResult) -> dict[str, Any]:
    return {
        "decision": r.decision.value,
        "memory_id": str(r.memory_id) if r.memory_id else None,
        "importance": r.importance,
        "superseded": [str(s) for s in r.superseded],
        "entities": list(r.entities),
        "reason": r.reason,
    }


def retain_from_dict(d: Mapping[str, Any]) -> RetainResult:
    return RetainResult(
        decision=Decision(d["decision"]),
        memory_id=uuid.UUID(d["memory_id"]) if d["memory_id"] else None,
        importance=d["importance"],
        superseded=tuple(uuid.UUID(s) for s in d["superseded"]),
        entities=tuple(d["entities"]),
        reason=d["reason"],
    )


def archive_to_dict(r: ArchiveResult) -> dict[str, Any]:
    return {
        "hits": [
            {
                "memory": memory_to_dict(h.memory),
                "score": h.score,
                "breakdown": h.breakdown.__dict__,
                "demoted_at": _dt(h.demoted_at),
                "batch": str(h.batch),
                "derived": [{"memory_id": str(x.memory_id), "relation": x.relation} for x in h.derived],
                "sources": [{"memory_id": str(x.memory_id), "relation": x.relation} for x in h.sources],
            }
            for h in r.hits
        ],
        "scanned": r.scanned,
        "files": r.files,
        "timings_ms": dict(r.timings_ms),
    }


def archive_from_dict(d: Mapping[str, Any]) -> ArchiveResult:
    def links(items: list) -> list[Link]:
        return [Link(uuid.UUID(x["memory_id"]), x["relation"]) for x in items]

    return ArchiveResult(
        hits=[
            ArchiveHit(
                memory_from_dict(h["memory"]),
                h["score"],
                ScoreBreakdown(**h["breakdown"]),
                _parse_dt(h["demoted_at"]),
                uuid.UUID(h["batch"]),
                links(h["derived"]),
                links(h["sources"]),
            )
            for h in d["hits"]
        ],
        scanned=d["scanned"],
        files=d["files"],
        timings_ms=d["timings_ms"],
    )
