"""The live accuracy of trusted local chains: a sampled audit of locally answered tasks, and demotion.

A trusted chain earned its trust on the references it was tried against while learning; what it
answers live may drift from that (another kind of input, a model replaced behind its endpoint). So a
share of the tasks it answered (``CABRAIN_WORKFLOW_AUDIT_RATE``, chosen by the task's id) is sent to
the frontier model as well, offline, in the learning pass, never on the request path. The frontier's
answer becomes the task's reference (as if the task had gone to the frontier: learning may use it), and
the local answer is scored against it the way learning scores its attempts (:mod:`grade`). The score
is kept as the chain's live score (``workflow_audits``) and as an attempt of that chain, so the
chain's accuracy counts what it does live.

When the chain's last ``CABRAIN_WORKFLOW_AUDIT_WINDOW`` complete live scores since the last decision
on it number at least ``CABRAIN_WORKFLOW_AUDIT_MIN`` and their mean is below
``CABRAIN_WORKFLOW_ROUTE_ACCURACY``, the chain is demoted in its kind of task: the cluster leaves it
out when it picks its best chain, so the kind goes back to the frontier model (or to another chain
that has earned trust on its own). The demotion is a judgment (kind ``workflow_demote``, origin
``workflow_audit``) with the live scores that led to it and the cluster before and after; a writer
of the namespace reverts it like any other (``POST /v1/judgments/revert``, ``cabrain revert``),
which puts the chain back, and a revert starts a fresh window of live scores.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from cabrain.engine import Engine
from cabrain.errors import ConflictError, NotFound
from cabrain.providers.llm_calls import ModelCallError
from cabrain.settings import Settings
from cabrain.store import judgments
from cabrain.store import workflow_clusters as cluster_sql
from cabrain.store import workflows as sql
from cabrain.workflows import chains, clusters, grade, registry, scoring
from cabrain.workflows.dispatch import caller_for, keep_reference

SAMPLE_SCALE = 1_000_000  # the audit rate, in millionths of the tasks


@dataclass
class AuditOutcome:
    task_id: str
    status: str  # audited | skipped | failed
    reason: str = ""
    chain: str | None = None
    score: float | None = None
    complete: bool = False
    live: dict[str, Any] | None = None  # the chain's live accuracy after this audit: {n, mean}
    demoted: str | None = None  # the demotion's judgment, when this audit demoted the chain

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "status": self.status,
            "reason": self.reason,
            "chain": self.chain,
            "score": None if self.score is None else round(self.score, 4),
            "complete": self.complete,
            "live": self.live,
            "demoted": self.demoted,
        }


def sample(rate: float) -> int:
    """The audit rate as the statement that samples tasks takes it (millionths)."""
    return round(max(0.0, min(1.0, rate)) * SAMPLE_SCALE)


async def audit_one(engine: Engine, task_id: uuid.UUID) -> AuditOutcome:
    """Audit one locally answered task (skipped when audited already, or another learner is at it)."""
    key = f"audit:{task_id}"
    async with engine.pool.acquire() as lock:
        if not await lock.fetchval(sql.CLAIM, key):
            return AuditOutcome(str(task_id), "skipped", "another learner is auditing it")
        try:
            return await _audit_locked(engine, task_id)
        finally:
            await lock.fetchval(sql.RELEASE, key)


async def _audit_locked(engine: Engine, task_id: uuid.UUID) -> AuditOutcome:
    s = engine.settings
    caller = caller_for(engine)
    async with engine.pool.acquire() as conn:
        row = await conn.fetchrow(sql.AUDITED_TASK, task_id)
        if row is None:
            raise NotFound(f"no workflow task {task_id}")
        if row["audited"]:
            return AuditOutcome(str(task_id), "skipped", "already audited")
        frontier = await registry.frontier(conn)
        judge = await grade.judge_model(conn, s)
    chain = row["chain"] if isinstance(row["chain"], dict) else json.loads(row["chain"])
    kind, chain_key = chain["kind"], chain["key"]
    outcome = AuditOutcome(str(task_id), "audited", chain=chain_key)
    task = chains.TaskPrompt(row["description"], row["context"], row["task_type"])
    system = chains.SYSTEM_ANSWER.format(format=chains.FORMAT[row["task_type"]])
    try:
        step = await caller.call(frontier, system, task.text(), purpose="audit", task_id=task_id)
    except ModelCallError as exc:  # a missed sample, recorded so: the task is not audited again
        async with engine.pool.acquire() as conn:
            await conn.execute(
                sql.INSERT_AUDIT, task_id, row["cluster_id"], chain_key, None, None, "{}", False, str(exc)[:2000]
            )
        outcome.status, outcome.reason = "failed", f"the frontier model failed: {str(exc)[:300]}"
        return outcome
    weights = scoring.Weights(s.workflow_weight_embedding, s.workflow_weight_judge, s.workflow_weight_structural)
    score = await grade.score(
        engine, caller, judge, {**dict(row), "output": step.output}, row["local_output"] or "", weights
    )
    outcome.score, outcome.complete = score.value, score.complete
    reference_id, parts = uuid.uuid4(), json.dumps(score.parts())
    async with engine.pool.acquire() as conn, conn.transaction():
        old = await keep_reference(conn, reference_id, task_id, row["namespace"], row["task_hash"], frontier, step)
        await conn.execute(
            sql.INSERT_ATTEMPT,
            uuid.uuid4(),
            reference_id,
            task_id,
            row["cluster_id"],
            kind,
            chain_key,
            json.dumps([{"role": "live", "task_id": str(task_id)}]),
            row["local_output"],
            score.value,
            parts,
            score.complete,
            row["tokens_in"],
            row["tokens_out"],
            row["cost_usd"],
            float(row["duration_ms"]),
            None,
        )
        if (
            await conn.fetchval(
                sql.INSERT_AUDIT,
                task_id,
                row["cluster_id"],
                chain_key,
                reference_id,
                score.value,
                parts,
                score.complete,
                None,
            )
            is None
        ):
            raise ConflictError(f"workflow task {task_id} was audited meanwhile")
        for other in set(old["clusters"] or []) - {row["cluster_id"]}:
            await clusters.recompute(conn, other, s)
        if row["cluster_id"] is not None:
            await _judge_live(conn, s, row["namespace"], row["cluster_id"], chain_key, outcome)
    return outcome


async def _judge_live(
    conn: Any, s: Settings, namespace: str, cluster_id: int, chain_key: str, outcome: AuditOutcome
) -> None:
    """Recompute the cluster with the new live score, and demote the chain when its live accuracy fell."""
    before = await clusters.recompute(conn, cluster_id, s)
    live = await conn.fetchrow(sql.LIVE, cluster_id, chain_key, s.workflow_audit_window, namespace)
    n, mean = int(live["n"]), live["mean"]
    outcome.live = {"n": n, "mean": None if mean is None else round(mean, 4)}
    if chain_key in before.demoted or n < s.workflow_audit_min or mean >= s.workflow_route_accuracy:
        return
    decision = {
        "cluster": cluster_id,
        "chain": chain_key,
        "op": "demote",
        "prior": s.workflow_confidence_prior,
        "failure_weight": s.workflow_failure_weight,
    }
    await cluster_sql.set_demoted(conn, decision, True)
    after = await clusters.get(conn, cluster_id)
    judgment = judgments.Judgment(
        namespace,
        "workflow_demote",
        "workflow_audit",
        f"local chain {chain_key} demoted: its live accuracy is {mean:.2f} over its last {n} audited task(s), "
        f"below {s.workflow_route_accuracy}",
        inputs={
            "workflow": decision,
            "live": {
                "n": n,
                "mean": round(mean, 4),
                "threshold": s.workflow_route_accuracy,
                "window": s.workflow_audit_window,
                "tasks": list(live["tasks"] or []),
            },
            "before": before.to_json(),
            "after": after.to_json(),
        },
        decided_by="sleep",
    )
    outcome.demoted = str(await judgments.record(conn, judgment))
