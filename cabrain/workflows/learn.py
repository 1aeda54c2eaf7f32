"""Learning iterations: offline, never on the request path (a Ray job, or ``cabrain workflows learn``).

For each current reference (a frontier run not superseded and not yet learned from) whose kind of
task is not trusted yet, local chains are tried simplest first (:func:`chains.candidates`) and
each attempt is stored with its chain, output, score, tokens, cost and time; the iterations stop
at the first chain whose complete score reaches ``CABRAIN_WORKFLOW_ACCEPT_SCORE``, or after
``CABRAIN_WORKFLOW_MAX_ATTEMPTS``. The cluster's best chain and confidence are then recomputed.
Runs fan out over the cluster's nodes as Ray tasks, one per reference, each on an
:class:`~cabrain.engine.Engine` of its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from cabrain.engine import Engine
from cabrain.errors import ConfigError, NotFound
from cabrain.fixes import Fix
from cabrain.providers.embedders import Embedder, load_embedder
from cabrain.search import recall as recall_pipeline
from cabrain.settings import Settings, load_settings, settings_for_replicas
from cabrain.store import workflows as sql
from cabrain.types import RecallQuery
from cabrain.workflows import audit, chains, clusters, grade, registry, scoring, shapes
from cabrain.workflows.calls import totals
from cabrain.workflows.dispatch import caller_for

log = logging.getLogger("cabrain.workflows")


@dataclass
class LearnOutcome:
    run_id: str
    status: str  # learned | skipped | failed
    reason: str = ""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    cluster: dict[str, Any] | None = None
    budget: dict[str, int] = field(default_factory=dict)  # the chains there were, those allowed, the models

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "attempts": self.attempts,
            "budget": self.budget,
            "cluster": self.cluster,
        }


async def _examples(engine: Engine, row: Any, limit: int) -> tuple[tuple[str, str], ...]:
    """Similar solved tasks from the namespace's memory, as the task's submitter may read them."""
    if limit <= 0:
        return ()
    settings = engine.settings
    query = RecallQuery(
        row["description"][: settings.max_query_chars],
        row["namespace"],
        k=limit + 1,
        source_kinds=("workflow",),
        rerank=False,
        expand=False,
    )
    try:
        recall_pipeline.validate(query, max_k=settings.recall_max_k, max_chars=settings.max_query_chars)
        result = await recall_pipeline.recall(engine, row["submitted_by"], query)
    except Exception as exc:  # noqa: BLE001 - examples are an enhancement; say so and go on
        log.warning("no examples recalled", extra={"run": str(row["id"]), "error": str(exc)})
        return ()
    out = []
    for hit in result.hits:
        if hit.memory.id == row["memory_id"]:
            continue  # the task's own answer is not an example
        task, _, answer = hit.memory.content.partition("\nAnswer: ")
        out.append((task.split(": ", 1)[-1], answer))
    return tuple(out[:limit])


async def learn_one(engine: Engine, run_id: uuid.UUID) -> LearnOutcome:
    """The iterations for one reference (skipped when superseded, learned, its kind trusted, or
    another learner is at it)."""
    async with engine.pool.acquire() as lock:
        if not await lock.fetchval(sql.CLAIM, str(run_id)):
            return LearnOutcome(str(run_id), "skipped", "another learner is working on it")
        try:
            return await _learn_locked(engine, run_id)
        finally:
            await lock.fetchval(sql.RELEASE, str(run_id))


async def _learn_locked(engine: Engine, run_id: uuid.UUID) -> LearnOutcome:
    s = engine.settings
    caller = caller_for(engine)
    weights = scoring.Weights(s.workflow_weight_embedding, s.workflow_weight_judge, s.workflow_weight_structural)
    async with engine.pool.acquire() as conn:
        row = await conn.fetchrow(sql.RUN, run_id)
        if row is None:
            raise NotFound(f"no frontier run {run_id}")
        if row["superseded_at"] is not None or row["learned_at"] is not None:
            return LearnOutcome(str(run_id), "skipped", "superseded" if row["superseded_at"] else "already learned")
        cluster = await clusters.get(conn, row["cluster_id"])
        judge = await grade.judge_model(conn, s)
        local = [
            a
            for a in await registry.listed(conn, layer="local", active_only=True)
            if judge is None or a.name != judge.name
        ]
        agents = {a.name: a for a in await registry.listed(conn)}
    if cluster.trusted(s.workflow_route_confidence, s.workflow_route_accuracy, s.workflow_max_local_ms):
        async with engine.pool.acquire() as conn:
            await conn.execute(sql.DONE, run_id, None)
        return LearnOutcome(str(run_id), "skipped", "its kind of task is already trusted", cluster=cluster.to_json())
    if not local:
        raise ConfigError(
            "no active local model is registered",
            fix=Fix(
                "register_model", {"layer": "local", "provider": "openai", "endpoint": "http://127.0.0.1:11434/v1"}
            ),
        )
    outcome = LearnOutcome(str(run_id), "learned")
    prompt_examples: tuple[tuple[str, str], ...] | None = None
    async with engine.pool.acquire() as conn:
        tried = {r["chain_key"] for r in await conn.fetch(sql.TRIED, run_id)}  # scored already (an audit, say)
        # the kind's shape from its other references: this answer never shapes its own constraint
        shape = await shapes.of_kind(
            conn, row["cluster_id"], row["task_type"], row["description"], besides=row["task_id"]
        )
    every = [
        c
        for c in chains.candidates(local, shaped=shape is not None)
        if c.key not in cluster.demoted and c.key not in tried
    ]
    outcome.budget = {"chains": len(every), "allowed": s.workflow_max_attempts, "models": len(local)}
    for spec in every[: s.workflow_max_attempts]:
        examples: tuple[tuple[str, str], ...] = ()
        if spec.kind == "enhanced":
            if prompt_examples is None:
                prompt_examples = await _examples(engine, row, s.workflow_examples)
            examples = prompt_examples
        task = chains.TaskPrompt(row["description"], row["context"], row["task_type"], examples, shape)
        run = await chains.run(caller, spec, agents, task, purpose="learn", task_id=row["task_id"])
        score = None if run.error else await grade.score(engine, caller, judge, row, run.output or "", weights)
        sums = totals(run.steps)
        async with engine.pool.acquire() as conn:
            await conn.execute(
                sql.INSERT_ATTEMPT,
                uuid.uuid4(),
                run_id,
                row["task_id"],
                row["cluster_id"],
                spec.kind,
                spec.key,
                json.dumps([st.to_json() for st in run.steps]),
                run.output,
                None if score is None else score.value,
                json.dumps({} if score is None else score.parts()),
                bool(score and score.complete),
                sums["tokens_in"],
                sums["tokens_out"],
                sums["cost_usd"],
                sums["duration_ms"],
                run.error,
            )
        outcome.attempts.append(
            {
                "chain": spec.key,
                "score": None if score is None else round(score.value, 4),
                "complete": bool(score and score.complete),
                "error": run.error,
            }
        )
        if score is not None and score.complete and score.value >= s.workflow_accept_score:
            break
    if outcome.attempts and all(a["error"] for a in outcome.attempts):
        # No chain answered (the local server down, say): nothing was learned; try again next time.
        reason = f"no local chain answered: {outcome.attempts[0]['error']}"
        async with engine.pool.acquire() as conn:
            await conn.execute(sql.NOT_YET, run_id, reason[:2000])
        outcome.status, outcome.reason = "failed", reason
        return outcome
    async with engine.pool.acquire() as conn, conn.transaction():
        await conn.execute(sql.DONE, run_id, None)
        cluster = await clusters.recompute(conn, row["cluster_id"], s)
    outcome.cluster = cluster.to_json()
    return outcome


async def _learn_guarded(engine: Engine, run_id: str) -> dict[str, Any]:
    try:
        return (await learn_one(engine, uuid.UUID(run_id))).to_json()
    except Exception as exc:  # noqa: BLE001 - reported per run; the others go on
        log.error("learning failed", extra={"run": run_id, "error": str(exc)})
        async with engine.pool.acquire() as conn:
            await conn.execute(sql.NOT_YET, uuid.UUID(run_id), str(exc)[:2000])
        return LearnOutcome(run_id, "failed", str(exc)).to_json()


_EMBEDDERS: dict[str, Embedder] = {}


async def _guarded(engine: Engine, op: str, target: str) -> dict[str, Any]:
    if op == "audit":
        return await _audit_guarded(engine, target)
    return await _learn_guarded(engine, target)


async def _audit_guarded(engine: Engine, task_id: str) -> dict[str, Any]:
    try:
        return (await audit.audit_one(engine, uuid.UUID(task_id))).to_json()
    except Exception as exc:  # noqa: BLE001 - reported per task; the others go on
        log.error("audit failed", extra={"task": task_id, "error": str(exc)})
        return audit.AuditOutcome(task_id, "failed", str(exc)).to_json()


async def _work_in(settings: Settings, dsn: str, op: str, target: str) -> dict[str, Any]:
    """One run learned from (or one task audited) in a Ray worker: its own Engine (the embedder is
    loaded once per worker process)."""
    key = f"{settings.embedding_provider}|{settings.embedding_model}"
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = load_embedder(settings)
    engine = await Engine.open(settings, dsn=dsn, embedder=_EMBEDDERS[key])
    try:
        return await _guarded(engine, op, target)
    finally:
        await engine.close()


def _remote() -> Any:
    import ray  # heavy, and only the Ray fan-out needs it

    @ray.remote(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")
    def learn_task(settings: dict[str, Any], dsn: str, op: str, target: str) -> dict[str, Any]:
        return asyncio.run(_work_in(load_settings(**settings), dsn, op, target))

    return learn_task


async def learn(
    settings: Settings,
    dsn: str,
    *,
    namespaces: Sequence[str] | None = None,
    limit: int = 100,
    use_ray: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One learning pass: first the audit of up to ``limit`` locally answered tasks (a sample,
    :mod:`cabrain.workflows.audit`), then the iterations for up to ``limit`` references (the audits'
    among them); a report of what each did. With ``use_ray`` one Ray task per task or reference, else
    here, on an :class:`Engine` opened for it."""
    say = progress or (lambda line: None)
    started = time.perf_counter()
    scope = list(namespaces) if namespaces else None
    conn = await asyncpg.connect(dsn)
    try:
        tasks = [
            str(r["id"])
            for r in await conn.fetch(sql.TO_AUDIT, scope, audit.sample(settings.workflow_audit_rate), limit)
        ]
    finally:
        await conn.close()
    engine: Engine | None = None
    try:
        if tasks:
            say(f"auditing {len(tasks)} locally answered task(s){' on Ray' if use_ray else ''}")
            engine = None if use_ray else await Engine.open(settings, dsn=dsn)
        audits = await _fan_out(settings, dsn, "audit", tasks, engine, say)
        conn = await asyncpg.connect(dsn)
        try:
            runs = [str(r["id"]) for r in await conn.fetch(sql.TO_LEARN, scope, limit)]
        finally:
            await conn.close()
        say(f"learning from {len(runs)} reference run(s){' on Ray' if use_ray and runs else ''}")
        if runs and engine is None and not use_ray:
            engine = await Engine.open(settings, dsn=dsn)
        outcomes = await _fan_out(settings, dsn, "learn", runs, engine, say)
    finally:
        if engine is not None:
            await engine.close()
    counts = {k: sum(1 for o in outcomes if o["status"] == k) for k in ("learned", "skipped", "failed")}
    return {
        "runs": len(runs),
        **counts,
        "attempts": sum(len(o["attempts"]) for o in outcomes),
        "seconds": round(time.perf_counter() - started, 3),
        "outcomes": outcomes,
        "audits": {
            "tasks": len(tasks),
            **{k: sum(1 for o in audits if o["status"] == k) for k in ("audited", "skipped", "failed")},
            "demoted": [{"chain": o["chain"], "judgment": o["demoted"]} for o in audits if o["demoted"]],
            "outcomes": audits,
        },
    }


async def _fan_out(
    settings: Settings,
    dsn: str,
    op: str,
    targets: list[str],
    engine: Engine | None,
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Each target learned from (``op`` learn: a reference) or audited (audit: a task), on Ray when
    ``engine`` is None, else one after another on ``engine``."""
    outcomes: list[dict[str, Any]] = []

    def said(outcome: dict[str, Any]) -> None:
        outcomes.append(outcome)
        detail = outcome["reason"] or (f"score {outcome['score']}" if op == "audit" else "")
        if outcome.get("demoted"):
            detail += f"; {outcome['chain']} demoted (judgment {outcome['demoted']})"
        say(f"  {op} {len(outcomes)}/{len(targets)}: {outcome['status']} {detail}".rstrip())

    if not targets:
        return outcomes
    if engine is None:
        task, payload = _remote(), settings_for_replicas(settings)

        async def remote(target: str) -> dict[str, Any]:
            try:
                return await task.remote(payload, dsn, op, target)
            except Exception as exc:  # noqa: BLE001 - a task that died (its node, say) is that target's failure
                failed = str(getattr(exc, "cause", None) or exc)
                if op == "audit":
                    return audit.AuditOutcome(target, "failed", failed).to_json()
                return LearnOutcome(target, "failed", failed).to_json()

        for finished in asyncio.as_completed([remote(t) for t in targets]):
            said(await finished)
    else:
        for target in targets:
            said(await _guarded(engine, op, target))
    return outcomes
