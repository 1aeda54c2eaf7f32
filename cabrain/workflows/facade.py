"""The ``Workflows`` facade: the one entry to workflow learning for every face (HTTP, MCP, CLI).

Like :class:`cabrain.brain.Brain`, it is made from an :class:`~cabrain.engine.Engine`; a method
validates its input, checks who may do it (:mod:`cabrain.store.access`), holds the connections
it needs and runs a pipeline (:mod:`.dispatch`, :mod:`.queue`, :mod:`.learn`, :mod:`.report`)::

    flows = Workflows(brain.engine)
    result = await flows.dispatch("claude", {"namespace": "ops", "description": "...", "task_type": "json"})
    item = await flows.enqueue("claude", TaskRequest("ops", "..."), priority=7)

Every method is an operation the gate lets through first (:mod:`cabrain.gate`). ``by`` names the
agent asking where a method also serves the operator's command line (None: the operator, on the
database); registry changes are an admin's.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cabrain.clock import Clock, utc_now
from cabrain.egress import Egress
from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.gate import Read, field, operation, system
from cabrain.policy import Op
from cabrain.providers.embedders import Embedder
from cabrain.settings import Settings
from cabrain.store import access
from cabrain.store import namespaces as namespace_sql
from cabrain.workflows import clusters, queue, registry, report
from cabrain.workflows import learn as learning
from cabrain.workflows.dispatch import Dispatcher, DispatchResult, TaskRequest
from cabrain.workflows.registry import ModelAgent

MAX_REPORT_DAYS = 36_500  # a report reaches back a hundred years at most (date arithmetic stays in range)


class Workflows:
    """Every method is one operation of workflow learning."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def settings(self) -> Settings:
        return self.engine.settings

    # --- lifecycle (only for a facade that opened its own engine) ---------------------------------
    @classmethod
    async def open(
        cls, settings: Settings, *, dsn: str | None = None, embedder: Embedder | None = None, clock: Clock = utc_now
    ) -> Workflows:
        """Open an :class:`Engine` (see :meth:`Engine.open`) and the facade over it; :meth:`close`
        closes it. A facade made from another's engine (``Workflows(brain.engine)``) is not closed."""
        return cls(await Engine.open(settings, dsn=dsn, embedder=embedder, clock=clock))

    async def close(self) -> None:
        await self.engine.close()

    async def __aenter__(self) -> Workflows:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the model registry ---------------------------------------------------------------------
    @operation(Op.READ, operator=True, http="GET /v1/workflows/agents", cli="workflows agents list")
    async def list_models(
        self, *, layer: str | None = None, active_only: bool = False, agent: str | None = None
    ) -> list[ModelAgent]:
        """The registered models (any agent may read them)."""
        if layer is not None and layer not in registry.LAYERS:
            raise InputError(f"layer must be one of {', '.join(registry.LAYERS)}, got {layer!r}")
        async with self.engine.pool.acquire() as conn:
            return await registry.listed(conn, layer=layer, active_only=active_only)

    @operation(Op.READ, operator=True)
    async def get_model(self, name: str, *, agent: str | None = None) -> ModelAgent:
        async with self.engine.pool.acquire() as conn:
            return await registry.get(conn, name)

    @operation(Op.ADMIN, operator=True, admin=True, http="POST /v1/workflows/agents", cli="workflows agents add")
    async def add_model(self, fields: Mapping[str, Any], *, agent: str | None = None) -> ModelAgent:
        """Register a model (``name``, ``layer``, ``provider``, ``model``, ``endpoint``, and optionally
        ``api_key_env``, ``capabilities``, ``cost_in_per_1k``, ``cost_out_per_1k``, ``active``). Its
        endpoint passes the egress policy and its ``api_key_env`` is a name the operator allows."""
        self._egress_checked(fields)
        async with self.engine.pool.acquire() as conn:
            return await registry.add(conn, **fields)

    @operation(
        Op.ADMIN,
        operator=True,
        admin=True,
        http="PATCH /v1/workflows/agents/{name}",
        cli="workflows agents set",
    )
    async def update_model(self, name: str, fields: Mapping[str, Any], *, agent: str | None = None) -> ModelAgent:
        """Change a model's editable fields, or deactivate it (``active``: False); entries are
        never deleted."""
        self._egress_checked(fields)
        async with self.engine.pool.acquire() as conn:
            return await registry.update(conn, name, **fields)

    def _egress_checked(self, fields: Mapping[str, Any]) -> None:
        if not isinstance(fields, Mapping):
            raise InputError("a model's fields are a JSON object")
        egress = Egress.of(self.settings)
        if isinstance(fields.get("endpoint"), str) and fields["endpoint"].startswith(("http://", "https://")):
            egress.check_url(fields["endpoint"], "a model's endpoint")
        if fields.get("api_key_env") is not None:
            egress.check_secret(fields["api_key_env"], "a model's api_key_env")

    # --- tasks ----------------------------------------------------------------------------------
    @operation(
        Op.WORKFLOW,
        namespace=field("task", "namespace"),
        http="POST /v1/workflows/dispatch",
        client="dispatch",
        backend="dispatch",
        mcp="workflow_dispatch",
        cli="workflows dispatch",
    )
    async def dispatch(self, agent: str, task: TaskRequest | Mapping[str, Any]) -> DispatchResult:
        """Route and run a task now (a trusted local chain, else the frontier model); ``agent`` needs
        write access to the task's namespace."""
        return await Dispatcher(self.engine).dispatch(agent, _task(task))

    @operation(
        Op.WORKFLOW, namespace=field("task", "namespace"), http="POST /v1/workflows/queue", cli="workflows enqueue"
    )
    async def enqueue(self, agent: str, task: TaskRequest | Mapping[str, Any], *, priority: int = 5) -> dict[str, Any]:
        """Queue a task for a worker (higher ``priority`` runs sooner, -1000 to 1000); ``agent``
        needs write access to the task's namespace."""
        request = _task(task)
        async with self.engine.pool.acquire() as conn:
            return await queue.enqueue(
                conn,
                agent,
                request,
                priority=priority,
                max_chars=self.settings.workflow_max_task_chars,
                scrub=self.settings.redact_secrets,
            )

    @operation(Op.READ, reads=Read.NAMESPACE, http="GET /v1/workflows/queue/{queue_id}", cli="workflows queue")
    async def queued(self, agent: str, queue_id: uuid.UUID | str) -> dict[str, Any]:
        """A queued task with its status and result, for its submitter or an agent that may read
        its namespace (for any other, :class:`NotFound`)."""
        key = queue.queue_id(queue_id)
        async with self.engine.pool.acquire() as conn:
            return await queue.get(conn, agent, key)

    @system("the operator's command line and the workers: counts, no content")
    async def queue_counts(self, namespace: str | None = None) -> dict[str, int]:
        """How many queued tasks are pending, picked, done and failed (of ``namespace``, or all)."""
        async with self.engine.pool.acquire() as conn:
            return await queue.counts(conn, namespace)

    @system("a worker claims a task; it runs as its submitter, through dispatch's gate")
    async def claim(self, worker: str) -> dict[str, Any] | None:
        """Claim the most urgent pending task for ``worker`` (None: none is pending)."""
        s = self.settings
        async with self.engine.pool.acquire() as conn:
            return await queue.claim(conn, worker, lease_s=s.workflow_lease_s, max_tries=s.workflow_max_tries)

    @system("a worker's loop; each task runs as its submitter, through dispatch's gate")
    async def work(
        self,
        worker: str,
        *,
        stop: asyncio.Event | None = None,
        drain: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> int:
        """Claim and run queued tasks as ``worker`` until ``stop`` is set (``drain``: until none is
        pending); returns how many it ran."""
        if not worker:
            raise InputError("a worker needs a name")
        return await queue.work(self, worker, stop=stop, drain=drain, progress=progress)

    @operation(Op.READ, reads=Read.OWN)
    async def readable(self, agent: str) -> list[str] | None:
        """The namespaces whose workflows ``agent`` may see (None: every one, for an admin)."""
        async with self.engine.pool.acquire() as conn:
            return await _readable(conn, agent)

    @operation(Op.READ, reads=Read.NAMESPACE)
    async def clusters(self, agent: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The task clusters of the namespaces ``agent`` may see, with their best chains and confidence."""
        if not 1 <= limit <= 1000:
            raise InputError(f"limit must be between 1 and 1000, got {limit}")
        async with self.engine.pool.acquire() as conn:
            wanted = await _readable(conn, agent)
            return await clusters.overview(conn, wanted, limit)

    @operation(Op.READ, reads=Read.NAMESPACE)
    async def overview(self, agent: str, *, days: int = 30) -> dict[str, Any]:
        """What the console's workflows page shows ``agent``: the models, the clusters and queue of
        the namespaces it may read, and the report over the last ``days``."""
        async with self.engine.pool.acquire() as conn:
            readable = await _readable(conn, agent)
            counted = (
                {"all namespaces": await queue.counts(conn, None)}
                if readable is None
                else {name: await queue.counts(conn, name) for name in readable}
            )
        return {
            "models": await self.list_models(agent=agent),
            "clusters": await self.clusters(agent, limit=200),
            "queue": {name: counts for name, counts in counted.items() if any(counts.values())},
            "report": await self.report(agent, days=days),
        }

    # --- learning and the report ----------------------------------------------------------------
    @staticmethod
    @system("the operator's learning job (cabrain workflows learn, a Ray job)")
    async def learn(
        settings: Settings,
        dsn: str,
        *,
        namespaces: Sequence[str] | None = None,
        limit: int = 100,
        use_ray: bool = True,
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """The learning iterations for up to ``limit`` new references (of ``namespaces``, or all):
        one Ray task each, or here without ``use_ray``; each opens its own engine on ``dsn``."""
        if limit < 1:
            raise InputError(f"limit must be at least 1, got {limit}")
        return await learning.learn(
            settings, dsn, namespaces=namespaces, limit=limit, use_ray=use_ray, progress=progress
        )

    @operation(Op.READ, operator=True, reads=Read.NAMESPACE, http="GET /v1/workflows/report", cli="workflows report")
    async def report(
        self, agent: str | None = None, *, namespaces: Sequence[str] | None = None, days: int | None = None
    ) -> dict[str, Any]:
        """Local share, frontier cost saved, accuracy over time, per agent and model, over
        ``namespaces`` (all when none) and the last ``days``. For an ``agent`` that is not an
        admin, only the namespaces it owns or holds a grant on."""
        if days is not None and not 1 <= days <= MAX_REPORT_DAYS:
            raise InputError(f"days must be between 1 and {MAX_REPORT_DAYS}, got {days}")
        wanted = list(namespaces) if namespaces else None
        async with self.engine.pool.acquire() as conn:
            if agent is not None and not await access.is_admin(conn, agent):
                readable = [r["name"] for r in await namespace_sql.of_agent(conn, agent)]
                wanted = [n for n in wanted if n in readable] if wanted is not None else readable
            return await report.build(conn, self.settings, namespaces=wanted, days=days)

    @staticmethod
    def render_report(data: dict[str, Any]) -> str:
        """A :meth:`report` as lines of text."""
        return report.render(data)


async def _readable(conn: Any, agent: str) -> list[str] | None:
    """The namespaces whose workflows ``agent`` may see (None: every one, for an admin)."""
    if await access.is_admin(conn, agent):
        return None
    return [r["name"] for r in await namespace_sql.of_agent(conn, agent)]


def _task(task: TaskRequest | Mapping[str, Any]) -> TaskRequest:
    """A task as given, or read from its JSON form (unknown fields refused)."""
    if isinstance(task, TaskRequest):
        return task
    return TaskRequest.from_json(dict(task) if isinstance(task, Mapping) else task)


__all__ = ["DispatchResult", "ModelAgent", "TaskRequest", "Workflows"]
