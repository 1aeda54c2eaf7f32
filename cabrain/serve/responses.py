"""Answers of the HTTP API (``/v1``) other than the domain types of :mod:`cabrain.types`.

A route returns what its return annotation declares; FastAPI documents that type and
:mod:`cabrain.serve.routing` sends it as :func:`cabrain.types.jsonable` makes it, so the OpenAPI
document and the bodies sent come from one declaration. These are TypedDicts: plain objects, most of
them rows as the Brain returns them. Each is closed (nothing is sent that it does not name) and its
keys are always sent unless marked ``NotRequired``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, with_config

# pydantic takes TypedDicts from typing_extensions only, before Python 3.12
from typing_extensions import TypedDict

from cabrain.identity import AgentInfo, KeyInfo
from cabrain.types import Hit, Memory, RetainResult

CLOSED = ConfigDict(json_schema_extra={"additionalProperties": False})


# --- errors ----------------------------------------------------------------------------------------
@with_config(CLOSED)
class FixOut(TypedDict):
    action: Annotated[
        str,
        Field(
            description="What fixes the error, as an action (cabrain/fixes.py): a client words it for its own caller",
            examples=["create_namespace"],
        ),
    ]
    params: Annotated[dict[str, Any], Field(examples=[{"namespace": "notes"}])]


@with_config(CLOSED)
class ErrorDetail(TypedDict):
    type: Annotated[str, Field(examples=["not_found"])]
    message: str
    hint: Annotated[str | None, Field(description="What to do, in this API's terms (routes).")]
    fix: NotRequired[Annotated[FixOut, Field(description="Present when the fix is an action the caller can take.")]]


@with_config(CLOSED)
class ErrorOut(TypedDict):
    error: ErrorDetail


# --- health and identity ---------------------------------------------------------------------------
@with_config(CLOSED)
class ReplicaOut(TypedDict):
    url: Annotated[str, Field(description="The replica's URL, without its password.")]
    state: Annotated[
        Literal["ok", "behind", "down", "not a replica"],
        Field(description="ok: reads go to it; behind: further than CABRAIN_REPLICA_MAX_LAG_S; down: unreachable."),
    ]
    replayed_lsn: Annotated[str | None, Field(description="The WAL position it has replayed.")]
    lag_bytes: Annotated[int | None, Field(description="WAL bytes the primary has written that it has not replayed.")]
    lag_s: Annotated[float | None, Field(description="How stale its data may be, in seconds (0: caught up).")]
    replay_paused: bool
    reads: Annotated[int, Field(description="Reads this ingress replica sent to it.")]
    error: str | None


@with_config(CLOSED)
class HealthOut(TypedDict):
    status: str
    version: str
    replicas: NotRequired[
        Annotated[list[ReplicaOut], Field(description="The hot tier's read replicas (CABRAIN_DATABASE_REPLICA_URLS).")]
    ]


@with_config(CLOSED)
class ReadyOut(TypedDict):
    ready: bool
    version: str
    models: Annotated[dict[str, dict[str, Any]], Field(description="The loaded models (embedder, reranker).")]
    reason: NotRequired[Annotated[str, Field(description="Why it is not ready (only then).")]]


@with_config(CLOSED)
class WhoAmIOut(TypedDict):
    agent_id: str
    is_admin: bool
    key_id: str


# --- memories --------------------------------------------------------------------------------------
@with_config(CLOSED)
class RetainBatchOut(TypedDict):
    results: list[RetainResult]


@with_config(CLOSED)
class MemoriesOut(TypedDict):
    memories: list[Memory]


@with_config(CLOSED)
class CountedOut(TypedDict):
    counted: Annotated[int, Field(description="How many of the memories were counted (readable ones).")]


@with_config(CLOSED)
class CaptureOut(TypedDict):
    namespace: Annotated[str, Field(description="Where the items went (and recall looked).")]
    queued: Annotated[int, Field(description="The capture inbox row the items wait in (0: no items).")]
    items: int
    hits: NotRequired[Annotated[list[Hit], Field(description="With recall: its hits (none when withheld).")]]
    timings_ms: NotRequired[dict[str, float]]
    withheld: NotRequired[Annotated[str, Field(description="Why the namespace's memories were not recalled.")]]


@with_config(CLOSED)
class JudgmentOut(TypedDict):
    """An automatic judgment (or a correction, or a revert) and the exact states it changed."""

    id: str
    namespace: str
    kind: Annotated[
        str,
        Field(
            description="supersede | invalidate | merge | revert | distill | summarize | decay | archive | alias "
            "| correction | forget | restore | entity_merge | entity_rename | workflow_demote"
        ),
    ]
    origin: Annotated[
        str,
        Field(
            description="The step that made it: write | correction | dedup | reconsolidate | revert | consolidate "
            "| decay | demote | person | workflow_audit"
        ),
    ]
    decided_by: Annotated[str, Field(description="Who decided it: write | sleep | person | import")]
    agent: str | None
    run_id: Annotated[str | None, Field(description="The sleep run that made it (every change a run makes)")]
    reason: str
    inputs: dict[str, Any]
    changes: Annotated[list[dict[str, Any]], Field(description="Per memory: its state before and after")]
    links: list[dict[str, Any]]
    memory_ids: list[str]
    created_at: str
    reverts: str | None
    reverted_by: str | None
    entities: Annotated[
        list[dict[str, Any]],
        Field(
            description="Entity summaries it changed ({entity_id, name, before, after}), names it merged "
            "({entity_id, name, alias_of, long_name, moved, added}), and a person's entity changes: a rename "
            "({change: rename, entity_id, name, before, after}) or a merge ({change: merge, entity_id, name, into, "
            "into_name}); a merge sleep found says how many mentions it moved (moved, added: counts, never ids)"
        ),
    ]


@with_config(CLOSED)
class JudgmentsOut(TypedDict):
    judgments: list[JudgmentOut]


# --- namespaces and grants -------------------------------------------------------------------------
@with_config(CLOSED)
class GrantOffer(TypedDict):
    """The grant a caller holds on another agent's namespace."""

    can_read: bool
    can_write: bool
    granted_by: str | None
    accepted: bool


@with_config(CLOSED)
class NamespaceOut(TypedDict):
    name: str
    owner_agent_id: str | None
    created_at: datetime
    memory_count: Annotated[int | None, Field(description="For its owner and admins only.")]
    can_read: bool
    can_write: bool
    grant: GrantOffer | None


@with_config(CLOSED)
class NamespacesOut(TypedDict):
    namespaces: list[NamespaceOut]


@with_config(CLOSED)
class NamespaceCreatedOut(TypedDict):
    name: str
    created: Annotated[bool, Field(description="False: the caller owned it already (200, not 201).")]


@with_config(CLOSED)
class GrantOut(TypedDict):
    agent_id: str
    namespace: str
    can_read: bool
    can_write: bool
    granted_by: str | None
    granted_at: datetime
    accepted_at: Annotated[datetime | None, Field(description="Unset while the grant is an offer.")]


@with_config(CLOSED)
class GrantsOut(TypedDict):
    grants: list[GrantOut]


@with_config(CLOSED)
class SharedOut(TypedDict):
    namespace: str
    agent: str
    can_read: bool
    can_write: bool
    accepted: Annotated[bool, Field(description="Whether the grantee has accepted it already.")]


@with_config(CLOSED)
class AcceptedOut(TypedDict):
    namespace: str
    agent: str
    can_read: bool
    can_write: bool
    accepted_at: datetime


@with_config(CLOSED)
class DeclinedOut(TypedDict):
    namespace: str
    agent: str
    declined: Annotated[bool, Field(description="False: the caller held no grant there.")]


@with_config(CLOSED)
class RevokedOut(TypedDict):
    namespace: str
    agent: str
    revoked: Annotated[bool, Field(description="False: the agent held no grant there.")]


# --- agents and keys -------------------------------------------------------------------------------
@with_config(CLOSED)
class AgentsOut(TypedDict):
    agents: list[AgentInfo]


@with_config(CLOSED)
class NewKeyOut(TypedDict):
    agent_id: str
    key_id: str
    key: Annotated[str, Field(description="Shown once; only its SHA-256 digest is stored.")]
    prefix: str


@with_config(CLOSED)
class KeysOut(TypedDict):
    keys: list[KeyInfo]


@with_config(CLOSED)
class KeyRevokedOut(TypedDict):
    key_id: str
    revoked: bool


@with_config(CLOSED)
class AgentDisabledOut(TypedDict):
    agent_id: str
    disabled: bool
    changed: Annotated[bool, Field(description="False: it was disabled already.")]


# --- overview (cabrain/overview.py) ---------------------------------------------------------------
@with_config(CLOSED)
class OverviewNamespaceOut(TypedDict):
    name: str
    current: int
    superseded: int
    forgotten: int
    archived: int
    hot: int
    cold: int
    private_of_others: Annotated[
        int, Field(description="Other agents' private memories it holds: a number, told to who sees it whole.")
    ]


@with_config(CLOSED)
class OverviewTotalsOut(TypedDict):
    memories: int
    by_state: Annotated[dict[str, int], Field(description="current, superseded, forgotten (hot); archived (cold)")]
    by_tier: dict[str, int]
    by_type: Annotated[dict[str, int], Field(description="Current hot memories per memory type.")]
    by_source: Annotated[dict[str, int], Field(description="Current hot memories per source kind.")]


@with_config(CLOSED)
class ActivityOut(TypedDict):
    start: datetime
    retained: int
    recalled: int
    judged: int
    slept: int


@with_config(CLOSED)
class StorageOut(TypedDict):
    hot_bytes: Annotated[int | None, Field(description="Admins only.")]
    cold_bytes: Annotated[int | None, Field(description="Admins only; from the Iceberg snapshot summary.")]
    cold_records: int | None
    cold_note: str | None


@with_config(CLOSED)
class RunBriefOut(TypedDict):
    id: uuid.UUID
    started_at: datetime
    finished_at: datetime | None
    status: str
    namespaces: list[str]


@with_config(CLOSED)
class OverviewOut(TypedDict):
    generated_at: datetime
    namespace: str | None
    namespaces: list[OverviewNamespaceOut]
    totals: OverviewTotalsOut
    days: Annotated[list[ActivityOut], Field(description="The last 7 UTC days, oldest first.")]
    hours: Annotated[list[ActivityOut], Field(description="The last 24 UTC hours, oldest first.")]
    storage: StorageOut
    last_runs: list[RunBriefOut]
    pending_actions: int
    excluded: str


# --- corrections and the audit of judgments --------------------------------------------------------
@with_config(CLOSED)
class SideOut(TypedDict):
    memory_id: Annotated[str | None, Field(description="None: a text that is no memory (a retraction's).")]
    content: Annotated[str | None, Field(description="None: the memory is archived (in the cold tier).")]


@with_config(CLOSED)
class AuditJudgmentOut(JudgmentOut):
    before: Annotated[list[SideOut], Field(description="What it took out of recall, with its text.")]
    after: Annotated[list[SideOut], Field(description="What it brought into recall (or the retraction's text).")]
    touched: Annotated[list[SideOut], Field(description="What it changed otherwise (importance, metadata).")]


@with_config(CLOSED)
class AuditCountOut(TypedDict):
    decided_by: str
    kind: str
    count: int


@with_config(CLOSED)
class AuditOut(TypedDict):
    namespace: str
    judgments: list[AuditJudgmentOut]
    counts: Annotated[list[AuditCountOut], Field(description="Per origin and kind, in the window, visible ones.")]
    counts_capped: Annotated[bool, Field(description="The counts stopped at the newest 1,000 judgments.")]
    next_cursor: str | None


@with_config(CLOSED)
class RevertResultOut(TypedDict):
    id: str
    ok: bool
    revert: NotRequired[Annotated[str, Field(description="The revert judgment's id (ok).")]]
    status: NotRequired[Annotated[int, Field(description="Why not (not ok): the HTTP status of the error.")]]
    error: NotRequired[str]


@with_config(CLOSED)
class RevertsOut(TypedDict):
    results: list[RevertResultOut]
