"""Domain types shared by the core and every face."""

from __future__ import annotations

import dataclasses
import enum
import operator
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ConfigDict, with_config

# How the HTTP API documents the answers among these types (pydantic reads it; nothing here validates):
# their JSON form (to_json) holds every field, defaults included, and nothing else.
JSON_FORM = ConfigDict(
    json_schema_extra={"additionalProperties": False}, json_schema_serialization_defaults_required=True
)


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


@with_config(JSON_FORM)
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


@with_config(JSON_FORM)
@dataclass(frozen=True)
class RetainResult:
    decision: Decision
    memory_id: uuid.UUID | None  # the stored (or, for NOOP, the reinforced) memory
    importance: float
    superseded: tuple[uuid.UUID, ...] = ()  # memories this write invalidated
    entities: tuple[str, ...] = ()
    reason: str = ""


@with_config(JSON_FORM)
@dataclass(frozen=True)
class ScoreBreakdown:
    vector_rank: int | None
    vector_similarity: float | None
    bm25_rank: int | None
    bm25_score: float | None
    fused: float
    importance: float
    rerank: float | None = None
    thread: float | None = None  # the thread cohesion term, for a turn of a conversation
    speaker: float | None = None  # the speaker nudge, for a turn by the one speaker the query names


@with_config(JSON_FORM)
@dataclass(frozen=True)
class Hit:
    memory: Memory
    score: float
    breakdown: ScoreBreakdown
    # lower-ranked candidates this hit stands for: a distilled fact's source turns, or the facts
    # sleep distilled from this turn (one answer, one place in the results)
    covers: tuple[uuid.UUID, ...] = ()


# The earlier turns of a dialogue a recall takes at most (``RecallQuery.context``); each is held to the
# query's length limit (CABRAIN_MAX_QUERY_CHARS).
MAX_CONTEXT_TURNS = 20


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
    # what the brain held true at that moment: the versions valid at or before it and not yet
    # superseded or invalidated then (a naive time is UTC); None: as it is now
    as_of: datetime | None = None
    # the dialogue's earlier turns, oldest first; ``query`` is its latest turn
    context: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # one form for every face (a JSON list, a naive time) before the query is validated or keyed
        if isinstance(self.context, list):
            object.__setattr__(self, "context", tuple(self.context))
        if isinstance(self.as_of, datetime) and self.as_of.tzinfo is None:
            object.__setattr__(self, "as_of", self.as_of.replace(tzinfo=UTC))


@with_config(JSON_FORM)
@dataclass(frozen=True)
class EntitySummary:
    """An entity the hits of a recall mention, with what sleep summarised of it."""

    name: str
    summary: str
    summarized_at: datetime | None
    memory_ids: list[uuid.UUID]  # the hits that mention it, best first


@with_config(JSON_FORM)
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


@with_config(JSON_FORM)
@dataclass(frozen=True)
class Link:
    """A provenance edge (``memory_sources``): ``relation`` is distilled_from, merged or summarizes."""

    memory_id: uuid.UUID
    relation: str


@with_config(JSON_FORM)
@dataclass(frozen=True)
class ArchiveHit:
    memory: Memory  # tier "cold"
    score: float
    breakdown: ScoreBreakdown
    demoted_at: datetime
    batch: uuid.UUID  # the demotion batch (cold_batches) that carried it
    derived: list[Link]  # memories made from this one (facts distilled from it, a dedup survivor)
    sources: list[Link]  # memories this one was made from


@with_config(JSON_FORM)
@dataclass(frozen=True)
class ArchiveResult:
    hits: list[ArchiveHit]
    scanned: int  # cold rows read (after partition pruning)
    files: int  # data files planned
    timings_ms: Mapping[str, float]


@with_config(JSON_FORM)
@dataclass(frozen=True)
class MemoryWithHistory:
    """``get``: the memory, the versions it replaced (oldest first) and those that replaced it."""

    memory: Memory
    previous: list[Memory]
    next: list[Memory]
    entities: list[str]


@with_config(JSON_FORM)
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
    mentions: int = 0  # current team and global memories that mention it (every reader may read them)
    own_private_mentions: int = 0  # and the caller's own private ones (nobody else's are counted)
    merged_into: uuid.UUID | None = None  # merged by a person into this entity (its mentions moved there)


@with_config(JSON_FORM)
@dataclass(frozen=True)
class EntityPage:
    """``entities``: entities in name order; ``next_cursor`` asks for the next page."""

    entities: list[Entity]
    next_cursor: str | None


@with_config(JSON_FORM)
@dataclass(frozen=True)
class MemoryPage:
    """``browse``: memories newest first; ``next_cursor`` asks for the next page."""

    memories: list[Memory]
    next_cursor: str | None


@with_config(JSON_FORM)
@dataclass(frozen=True)
class RelatedEntity:
    """An entity another one shares facts with: an edge of the entity graph, weighed by the facts."""

    id: uuid.UUID
    name: str
    kind: str | None
    shared_facts: int


@with_config(JSON_FORM)
@dataclass(frozen=True)
class EntityWithMemories:
    """``entity``: the entity and the memories that mention it the caller may read, newest first;
    how many current ones do (``mentions``), and the entities it shares facts with (``related``)."""

    entity: Entity
    memories: list[Memory]
    mentions: int = 0
    related: list[RelatedEntity] = field(default_factory=list)


# --- JSON forms -------------------------------------------------------------------------------------
# One way to JSON for every type here (jsonable / to_json): the HTTP API's answers, the CLI's --json
# output and the L1 cache all use it, and the API documents the types themselves. Each *_from_dict
# reads a form back.
_PLAIN = frozenset({str, int, float, bool, type(None)})
_converters: dict[type, Callable[[Any], Any]] = {}


def jsonable(value: Any) -> Any:
    """``value`` as JSON values, at any depth: enums by value, datetimes in ISO 8601, UUIDs as
    strings, tuples as lists and dataclasses (the types here) as objects of their fields."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    convert = _converters.get(kind)
    if convert is None:
        convert = _converters[kind] = _converter(kind)
    return convert(value)


def _converter(kind: type) -> Callable[[Any], Any]:
    """How values of ``kind`` become JSON (found once per type: the recall path converts many)."""
    if issubclass(kind, enum.Enum):
        return operator.attrgetter("value")
    if issubclass(kind, datetime):
        return datetime.isoformat
    if issubclass(kind, uuid.UUID):
        return str
    if issubclass(kind, Mapping):
        return lambda value: {k: jsonable(v) for k, v in value.items()}
    if issubclass(kind, list | tuple):
        return lambda value: [jsonable(v) for v in value]
    if dataclasses.is_dataclass(kind):
        names = tuple(f.name for f in dataclasses.fields(kind))
        return lambda value: {name: jsonable(getattr(value, name)) for name in names}
    return _as_is


def _as_is(value: Any) -> Any:
    return value


def to_json(value: Any) -> dict[str, Any]:
    """The JSON form of one of the types here (a dataclass instance): every field, by name."""
    return jsonable(value)


def _parse_dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


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
        created_at=datetime.fromisoformat(d["created_at"]),
        valid_at=datetime.fromisoformat(d["valid_at"]),
        invalid_at=_parse_dt(d["invalid_at"]),
        superseded_by=uuid.UUID(d["superseded_by"]) if d["superseded_by"] else None,
        tier=d["tier"],
        metadata=d["metadata"],
    )


def recall_from_dict(d: Mapping[str, Any], *, cached: bool = False) -> RecallResult:
    return RecallResult(
        hits=[
            Hit(
                memory_from_dict(h["memory"]),
                h["score"],
                ScoreBreakdown(**h["breakdown"]),
                tuple(uuid.UUID(i) for i in h.get("covers", ())),  # absent from earlier versions' answers
            )
            for h in d["hits"]
        ],
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


def history_from_dict(d: Mapping[str, Any]) -> MemoryWithHistory:
    return MemoryWithHistory(
        memory=memory_from_dict(d["memory"]),
        previous=[memory_from_dict(m) for m in d["previous"]],
        next=[memory_from_dict(m) for m in d["next"]],
        entities=list(d["entities"]),
    )


def entity_from_dict(d: Mapping[str, Any]) -> Entity:
    return Entity(
        id=uuid.UUID(d["id"]),
        namespace=d["namespace"],
        name=d["name"],
        kind=d["kind"],
        summary=d["summary"],
        summarized_at=_parse_dt(d["summarized_at"]),
        updated_at=datetime.fromisoformat(d["updated_at"]),
        mentions=int(d.get("mentions", 0)),
        own_private_mentions=int(d.get("own_private_mentions", 0)),
        merged_into=uuid.UUID(d["merged_into"]) if d.get("merged_into") else None,
    )


def entity_page_from_dict(d: Mapping[str, Any]) -> EntityPage:
    return EntityPage([entity_from_dict(e) for e in d["entities"]], d["next_cursor"])


def entity_memories_from_dict(d: Mapping[str, Any]) -> EntityWithMemories:
    return EntityWithMemories(
        entity_from_dict(d["entity"]),
        [memory_from_dict(m) for m in d["memories"]],
        d.get("mentions", 0),  # absent from earlier versions' answers
        [RelatedEntity(uuid.UUID(r["id"]), r["name"], r["kind"], r["shared_facts"]) for r in d.get("related", [])],
    )


def retain_from_dict(d: Mapping[str, Any]) -> RetainResult:
    return RetainResult(
        decision=Decision(d["decision"]),
        memory_id=uuid.UUID(d["memory_id"]) if d["memory_id"] else None,
        importance=d["importance"],
        superseded=tuple(uuid.UUID(s) for s in d["superseded"]),
        entities=tuple(d["entities"]),
        reason=d["reason"],
    )


def archive_from_dict(d: Mapping[str, Any]) -> ArchiveResult:
    def links(items: list) -> list[Link]:
        return [Link(uuid.UUID(x["memory_id"]), x["relation"]) for x in items]

    return ArchiveResult(
        hits=[
            ArchiveHit(
                memory_from_dict(h["memory"]),
                h["score"],
                ScoreBreakdown(**h["breakdown"]),
                datetime.fromisoformat(h["demoted_at"]),
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
