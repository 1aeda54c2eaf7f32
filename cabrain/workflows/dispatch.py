"""``dispatch(task)``: record a task, route it, run it, keep the frontier answer as the reference.

Routing (design 003, "Dispatch Routing Logic"):

1. destructive or review-flagged tasks always go to the frontier model;
2. a task whose kind (its cluster) is trusted - confidence and accuracy at or above
   ``CABRAIN_WORKFLOW_ROUTE_CONFIDENCE`` / ``CABRAIN_WORKFLOW_ROUTE_ACCURACY`` - goes to the
   cluster's learned local chain; if that chain fails or its output fails validation (empty, not
   JSON for a JSON task, not parsing for a code task), the task is retried on the frontier model
   and the failure lowers the chain's confidence;
3. everything else goes to the frontier model.

A sampled share of the locally answered tasks is audited offline against the frontier model, and a
chain whose live accuracy falls is demoted (:mod:`cabrain.workflows.audit`).

A frontier answer is stored as the task's reference (``frontier_runs``) for the offline learning
iterations (:mod:`cabrain.workflows.learn`), superseding an older reference to the same task,
and retained as a memory (a solved example the enhanced prompt recalls). Tasks belong to a
namespace: dispatching needs write access to it, as retaining does.

The pipeline runs on the :class:`~cabrain.engine.Engine`; faces reach it through
:class:`cabrain.workflows.facade.Workflows`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

from cabrain.egress import Egress
from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.providers.llm_calls import CallPolicy, ModelCallError
from cabrain.redact import redact
from cabrain.settings import Settings
from cabrain.store import access
from cabrain.store import workflows as sql
from cabrain.types import MemoryInput, MemoryType, Network, Visibility
from cabrain.workflows import chains, clusters, registry, scoring, shapes
from cabrain.workflows.calls import Caller, Step, totals
from cabrain.write import changes
from cabrain.write import retain as retain_pipeline

log = logging.getLogger("cabrain.workflows")


@dataclass(frozen=True)
class TaskRequest:
    namespace: str
    description: str
    context: str = ""
    task_type: str = "text"
    destructive: bool = False
    needs_review: bool = False
    frontier_agent: str | None = None  # a registered frontier model; default: the first active one

    @classmethod
    def from_json(cls, data: Any) -> TaskRequest:
        if not isinstance(data, dict):
            raise InputError("a task is a JSON object")
        unknown = set(data) - {
            "namespace",
            "description",
            "context",
            "task_type",
            "destructive",
            "needs_review",
            "frontier_agent",
        }
        if unknown:
            raise InputError(f"unknown task field(s): {', '.join(sorted(unknown))}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise InputError(f"bad task: {exc}") from None

    def check(self, max_chars: int) -> None:
        for name in ("namespace", "description", "context"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"{name} must be a string")
        if not self.description.strip():
            raise InputError("the task's description is empty")
        if len(self.description) + len(self.context) > max_chars:
            raise InputError(
                f"the task is {len(self.description) + len(self.context)} characters, the limit is {max_chars}",
                hint="raise CABRAIN_WORKFLOW_MAX_TASK_CHARS",
            )
        if "\x00" in self.description + self.context:
            raise InputError("the task contains a NUL character")
        if self.task_type not in scoring.TASK_TYPES:
            raise InputError(f"task_type must be one of {', '.join(scoring.TASK_TYPES)}, got {self.task_type!r}")
        for name in ("destructive", "needs_review"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name} must be true or false")

    def checked(self, max_chars: int, *, scrub: bool = True) -> TaskRequest:
        """This task, checked; with ``scrub`` (CABRAIN_REDACT_SECRETS), without its secrets and
        ``<private>`` blocks: what any model is sent and what is stored (a task's context is often a
        log or a config, with a key in it)."""
        self.check(max_chars)
        if not scrub:
            return self
        return dataclasses.replace(self, description=redact(self.description), context=redact(self.context))

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "description": self.description,
            "context": self.context,
            "task_type": self.task_type,
            "destructive": self.destructive,
            "needs_review": self.needs_review,
            "frontier_agent": self.frontier_agent,
        }

    @property
    def digest(self) -> bytes:
        return hashlib.sha256("\x00".join((self.task_type, self.description, self.context)).encode()).digest()

    def prompt(self, examples: tuple[tuple[str, str], ...] = ()) -> chains.TaskPrompt:
        return chains.TaskPrompt(self.description, self.context, self.task_type, examples)


@dataclass
class DispatchResult:
    task_id: uuid.UUID
    route: str  # frontier | local | fallback
    reason: str
    output: str
    cluster: dict[str, Any]
    chain: dict[str, Any] | None = None
    agents: list[str] = field(default_factory=list)
    cost_usd: float | None = None
    local_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": str(self.task_id),
            "route": self.route,
            "reason": self.reason,
            "output": self.output,
            "cluster": self.cluster,
            "chain": self.chain,
            "agents": self.agents,
            "cost_usd": self.cost_usd,
            "local_error": self.local_error,
        }


def caller_for(engine: Engine) -> Caller:
    """The model caller of this process: its models reached and their keys read through the egress
    policy (only the variables CABRAIN_SECRET_ENV_ALLOW lists are read from this environment)."""
    s = engine.settings
    egress = Egress.of(s, os.environ)
    return Caller(
        engine.pool,
        policy=CallPolicy(s.workflow_timeout_s, s.workflow_retries, s.workflow_retry_backoff_s, egress),
        prices=s.workflow_prices,
        max_tokens=s.workflow_max_tokens,
        meter=engine.governor.model_call,
        scrub=s.redact_secrets,
    )


async def keep_reference(
    conn: Any,
    reference_id: uuid.UUID,
    task_id: uuid.UUID,
    namespace: str,
    task_hash: bytes,
    frontier: registry.ModelAgent,
    step: Step,
) -> Any:
    """Keep the frontier's answer ``step`` as the task's reference, superseding older references to the
    same task (same namespace and hash) and their attempts; the superseded ones' ``memories`` and the
    ``clusters`` whose attempts gave way. Inside the caller's transaction."""
    await conn.execute(
        sql.INSERT_REFERENCE,
        reference_id,
        task_id,
        namespace,
        frontier.name,
        step.output,
        step.tokens_in,
        step.tokens_out,
        step.cost_usd,
        step.duration_ms,
    )
    return await conn.fetchrow(sql.SUPERSEDE, namespace, task_hash, reference_id)


class Dispatcher:
    """Routes and runs tasks on ``engine``, with the settings it has when made."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.settings: Settings = engine.settings
        self.caller = caller_for(engine)

    async def dispatch(self, agent: str, request: TaskRequest) -> DispatchResult:
        s = self.settings
        request = request.checked(s.workflow_max_task_chars, scrub=s.redact_secrets)
        async with self.engine.pool.acquire() as conn:
            await access.require_writer(conn, agent, request.namespace)
            frontier = await registry.frontier(conn, request.frontier_agent)  # fail before any call
        [vector] = await self.engine.embed_documents([f"{request.description}\n{request.context[:1000]}"])
        task_id = uuid.uuid4()
        async with self.engine.pool.acquire() as conn, conn.transaction():
            cluster_id = await clusters.assign(conn, request.namespace, vector, s.workflow_cluster_similarity)
            await conn.execute(
                sql.INSERT_TASK,
                task_id,
                request.namespace,
                agent,
                request.digest,
                request.description,
                request.context,
                request.task_type,
                request.destructive,
                request.needs_review,
                vector,
                cluster_id,
            )
            cluster = await clusters.get(conn, cluster_id)
        try:
            return await self._route(agent, request, task_id, cluster, frontier)
        except BaseException as exc:
            async with self.engine.pool.acquire() as conn:
                await conn.execute(sql.FAIL_TASK, task_id, self._said(f"{type(exc).__name__}: {exc}")[:2000])
            raise

    def _said(self, text: str) -> str:
        """``text`` as it may be stored (redacted with CABRAIN_REDACT_SECRETS)."""
        return redact(text) if self.settings.redact_secrets else text

    async def _route(
        self,
        agent: str,
        request: TaskRequest,
        task_id: uuid.UUID,
        cluster: clusters.Cluster,
        frontier: registry.ModelAgent,
    ) -> DispatchResult:
        s = self.settings
        if request.destructive:
            return await self._frontier(
                agent,
                request,
                task_id,
                cluster,
                frontier,
                "frontier",
                "destructive tasks always go to the frontier model",
            )
        if request.needs_review:
            return await self._frontier(
                agent,
                request,
                task_id,
                cluster,
                frontier,
                "frontier",
                "tasks flagged for review always go to the frontier model",
            )
        why = cluster.why_not(s.workflow_route_confidence, s.workflow_route_accuracy, s.workflow_max_local_ms)
        if why is not None:
            return await self._frontier(agent, request, task_id, cluster, frontier, "frontier", why)
        assert cluster.best_chain is not None
        spec = chains.ChainSpec.from_json(cluster.best_chain)
        async with self.engine.pool.acquire() as conn:
            agents = {a.name: a for a in await registry.listed(conn)}
            shape = (
                await shapes.of_kind(conn, cluster.id, request.task_type, request.description)
                if spec.kind == "constrained"
                else None
            )
        prompt = dataclasses.replace(request.prompt(), schema=shape)
        run = await chains.run(self.caller, spec, agents, prompt, purpose="local", task_id=task_id)
        problem = run.error or scoring.validate(request.task_type, run.output or "")
        if problem is None:
            reason = (
                f"trusted local chain {spec.key} (confidence {cluster.confidence:.2f}, "
                f"accuracy {cluster.avg_accuracy:.2f})"
            )
            async with self.engine.pool.acquire() as conn:
                await conn.execute(
                    sql.FINISH_TASK, task_id, "local", reason, json.dumps(spec.to_json()), run.output, "done", None
                )
            return DispatchResult(
                task_id,
                "local",
                reason,
                run.output or "",
                cluster.to_json(),
                spec.to_json(),
                list(spec.agents),
                totals(run.steps)["cost_usd"],
            )
        log.info("local chain failed validation", extra={"task": str(task_id), "chain": spec.key, "problem": problem})
        result = await self._frontier(
            agent,
            request,
            task_id,
            cluster,
            frontier,
            "fallback",
            f"local chain {spec.key} failed: {problem}; retried on the frontier model",
            chain=spec,
        )
        local_cost = totals(run.steps)["cost_usd"]
        result.local_error = problem
        result.agents = [*spec.agents, *result.agents]
        if result.cost_usd is not None and local_cost is not None:
            result.cost_usd += local_cost
        return result

    async def _frontier(
        self,
        agent: str,
        request: TaskRequest,
        task_id: uuid.UUID,
        cluster: clusters.Cluster,
        frontier: registry.ModelAgent,
        route: str,
        reason: str,
        chain: chains.ChainSpec | None = None,
    ) -> DispatchResult:
        s = self.settings
        system = chains.SYSTEM_ANSWER.format(format=chains.FORMAT[request.task_type])
        try:
            step = await self.caller.call(
                frontier, system, request.prompt().text(), purpose="frontier", task_id=task_id
            )
        except ModelCallError:
            if chain is not None:  # the fallback failed too; the chain's failure still counts
                async with self.engine.pool.acquire() as conn, conn.transaction():
                    await conn.execute(
                        sql.FINISH_TASK,
                        task_id,
                        route,
                        reason,
                        json.dumps(chain.to_json()),
                        None,
                        "failed",
                        "the frontier model failed as well",
                    )
                    await clusters.recompute(conn, cluster.id, s)
            raise
        reference_id = uuid.uuid4()
        async with self.engine.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                sql.FINISH_TASK,
                task_id,
                route,
                reason,
                json.dumps(chain.to_json()) if chain else None,
                step.output,
                "done",
                None,
            )
            old = await keep_reference(conn, reference_id, task_id, request.namespace, request.digest, frontier, step)
            for cluster_id in {cluster.id, *(old["clusters"] or [])}:
                updated = await clusters.recompute(conn, cluster_id, s)
                if cluster_id == cluster.id:
                    cluster = updated
        await self._remember(agent, request, task_id, reference_id, step.output, old["memories"] or [])
        return DispatchResult(
            task_id, route, reason, step.output, cluster.to_json(), None, [frontier.name], step.cost_usd
        )

    async def _remember(
        self,
        agent: str,
        request: TaskRequest,
        task_id: uuid.UUID,
        reference_id: uuid.UUID,
        output: str,
        superseded: list[uuid.UUID],
    ) -> None:
        """The solved task as a memory (the enhanced prompt's examples); older answers to the
        same task are forgotten. A failure here loses no answer: it is logged."""
        limit = self.settings.max_content_chars
        text = f"Solved task ({request.task_type}): {request.description}\nAnswer: {output}"[:limit]
        try:
            [stored] = await retain_pipeline.retain(
                self.engine,
                agent,
                [
                    MemoryInput(
                        text,
                        request.namespace,
                        visibility=Visibility.TEAM,
                        network=Network.EXPERIENCE,
                        memory_type=MemoryType.PROCEDURAL,
                        source_kind="workflow",
                        source_ref=f"workflow:{task_id}",
                        metadata={"workflow_task": str(task_id)},
                    )
                ],
                decide_writes=False,
            )
            async with self.engine.pool.acquire() as conn:
                await conn.execute(sql.SET_MEMORY, reference_id, stored.memory_id)
            for memory_id in superseded:
                await changes.forget(
                    self.engine, agent, memory_id, reason="a newer answer to the same task superseded it"
                )
        except Exception as exc:  # noqa: BLE001 - the answer is stored; the example is a convenience
            log.warning("could not retain the solved task as a memory", extra={"task": str(task_id), "error": str(exc)})
