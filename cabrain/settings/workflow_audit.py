"""What a local chain must keep up to stay trusted: its latency, and its live accuracy
(:mod:`cabrain.workflows.audit`: the share of locally answered tasks the frontier model answers again
offline, and when a chain's live scores demote it)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class WorkflowAuditSettings(BaseModel):
    workflow_audit_rate: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Share of the tasks a trusted local chain answered that the learning pass sends to the "
        "frontier model too and scores (chosen by the task's id; 0: no audits, and no demotions).",
    )
    workflow_max_local_ms: float = Field(
        default=60_000.0,
        ge=0,
        description="A kind of task is routed to a local chain only if the chain's mean time an answer is within "
        "this many milliseconds (0: no limit).",
    )
    workflow_audit_window: int = Field(
        default=10, ge=1, le=1000, description="A chain's live accuracy: the mean of its last this many audits."
    )
    workflow_audit_min: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Audits a chain needs (since its last demotion or restore) before its live accuracy can demote "
        "it, when below CABRAIN_WORKFLOW_ROUTE_ACCURACY.",
    )


__all__ = ["WorkflowAuditSettings"]
