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
from cabrain.providers.llm_calls import ModelCallError
from cabrain.search import recall as recall_pipeline
from cabrain.settings import Settings, load_settings, settings_for_replicas
from cabrain.store import workflows as sql
from cabrain.types import RecallQuery
from cabrain.workflows import chains, clusters, registry, scoring
from cabrain.workflows.calls import Caller, totals
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


async def _score(
    engine: Engine, caller: Caller, judge: registry.ModelAgent | None, row: Any, output: str, weights: scoring.Weights
) -> scoring.Score:
    reference = row["output"]
    ref_vec, out_vec = await engine.embed_documents([reference, output])
    embedding = scoring.cosine(ref_vec, out_vec)
    structural = scoring.structural(row["task_type"], reference, output)
    if judge is None:
        return scoring.combine(
            embedding, None, structural, weights, "no judge model configured (CABRAIN_WORKFLOW_JUDGE)"
        )
    try:
        step = await caller.call(
            judge,
            scoring.JUDGE_SYSTEM,
            scoring.judge_prompt(
                chains.TaskPrompt(row["description"], row["context"], row["task_type"]).text(), reference, output
            ),
            purpose="judge",
            task_id=row["task_id"],
            role="judge",
        )
        value, reason = scoring.parse_judge(step.output)
    except (ModelCallError, ValueError) as exc:
        return scoring.combine(embedding, None, structural, weights, f"the judge failed: {str(exc)[:300]}")
    return scoring.combine(embedding, value, structural, weights, None, reason)


async def _judge(conn: asyncpg.Connection, settings: Settings) -> registry.ModelAgent | None:
    if not settings.workflow_judge:
        return None
    try:
        agent = await registry.get(conn, settings.workflow_judge)
    except NotFound:
        return None
    return agent if agent.active else None


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
        judge = await _judge(conn, s)
        local = [
            a
            for a in await registry.listed(conn, layer="local", active_only=True)
            if judge is None or a.name != judge.name
        ]
        agents = {a.name: a for a in await registry.listed(conn)}
    if cluster.trusted(s.workflow_route_confidence, s.workflow_route_accuracy):
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
    every = chains.candidates(local)
    outcome.budget = {"chains": len(every), "allowed": s.workflow_max_attempts, "models": len(local)}
    for spec in every[: s.workflow_max_attempts]:
        examples: tuple[tuple[str, str], ...] = ()
        if spec.kind == "enhanced":
            if prompt_examples is None:
                prompt_examples = await _examples(engine, row, s.workflow_examples)
            examples = prompt_examples
        task = chains.TaskPrompt(row["description"], row["context"], row["task_type"], examples)
        run = await chains.run(caller, spec, agents, task, purpose="learn", task_id=row["task_id"])
        score = None if run.error else await _score(engine, caller, judge, row, run.output or "", weights)
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
        cluster = await clusters.recompute(
            conn, row["cluster_id"], prior=s.workflow_confidence_prior, failure_weight=s.workflow_failure_weight
        )
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


async def _learn_in(settings: Settings, dsn: str, run_id: str) -> dict[str, Any]:
    """One run in a Ray worker: its own Engine (the embedder is loaded once per worker process)."""
    key = f"{settings.embedding_provider}|{settings.embedding_model}"
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = load_embedder(settings)
    engine = await Engine.open(settings, dsn=dsn, embedder=_EMBEDDERS[key])
    try:
        return await _learn_guarded(engine, run_id)
    finally:
        await engine.close()


def _remote() -> Any:
    import ray  # heavy, and only the Ray fan-out needs it

    @ray.remote(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")
    def learn_task(settings: dict[str, Any], dsn: str, run_id: str) -> dict[str, Any]:
        return asyncio.run(_learn_in(load_settings(**settings), dsn, run_id))

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
    """Learning iterations for up to ``limit`` references; a report of what each run did. With
    ``use_ray`` one Ray task per reference, else here, on an :class:`Engine` opened for it."""
    say = progress or (lambda line: None)
    started = time.perf_counter()
    conn = await asyncpg.connect(dsn)
    try:
        runs = [str(r["id"]) for r in await conn.fetch(sql.TO_LEARN, list(namespaces) if namespaces else None, limit)]
    finally:
        await conn.close()
    say(f"learning from {len(runs)} reference run(s){' on Ray' if use_ray and runs else ''}")
    outcomes: list[dict[str, Any]] = []
    if use_ray and runs:
        task, payload = _remote(), settings_for_replicas(settings)

        async def remote(run: str) -> dict[str, Any]:
            try:
                return await task.remote(payload, dsn, run)
            except Exception as exc:  # noqa: BLE001 - a task that died (its node, say) is that run's failure
                return LearnOutcome(run, "failed", str(getattr(exc, "cause", None) or exc)).to_json()

        for finished in asyncio.as_completed([remote(run) for run in runs]):
            outcomes.append(await finished)
            say(f"  {len(outcomes)}/{len(runs)}: {outcomes[-1]['status']} {outcomes[-1]['reason']}".rstrip())
    elif runs:
        engine = await Engine.open(settings, dsn=dsn)
        try:
            for run in runs:
                outcomes.append(await _learn_guarded(engine, run))
                say(f"  {len(outcomes)}/{len(runs)}: {outcomes[-1]['status']} {outcomes[-1]['reason']}".rstrip())
        finally:
            await engine.close()
    counts = {k: sum(1 for o in outcomes if o["status"] == k) for k in ("learned", "skipped", "failed")}
    return {
        "runs": len(runs),
        **counts,
        "attempts": sum(len(o["attempts"]) for o in outcomes),
        "seconds": round(time.perf_counter() - started, 3),
        "outcomes": outcomes,
    }
