"""Workflow learning (``/v1/workflows``): the model registry (reading it: any agent; changing it:
admins), dispatching and queueing tasks, and the report. Each route is one call of the
:class:`cabrain.workflows.facade.Workflows` facade over the replica's engine."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from pydantic import Field

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router
from cabrain.serve.schemas import Body
from cabrain.workflows.dispatch import TaskRequest

routes = router(tags=["workflows"])


class ModelAgentIn(Body):
    name: str = Field(description="1-64 letters, digits, '.', '_', ':' or '-'.", examples=["qwen3-8b"])
    layer: str = Field(description="frontier | local", examples=["local"])
    provider: str = Field(description="openai (any OpenAI-compatible server) | anthropic", examples=["openai"])
    model: str = Field(examples=["qwen3:8b"])
    endpoint: str = Field(examples=["http://127.0.0.1:11434/v1"])
    api_key_env: str | None = Field(
        default=None, description="The environment variable holding its key; never the key."
    )
    capabilities: list[str] = Field(default_factory=list)
    cost_in_per_1k: float | None = Field(default=None, ge=0, description="USD per 1k input tokens.")
    cost_out_per_1k: float | None = Field(default=None, ge=0, description="USD per 1k output tokens.")
    active: bool = True


class ModelAgentPatch(Body):
    layer: str | None = None
    provider: str | None = None
    model: str | None = None
    endpoint: str | None = None
    api_key_env: str | None = None
    capabilities: list[str] | None = None
    cost_in_per_1k: float | None = Field(default=None, ge=0)
    cost_out_per_1k: float | None = Field(default=None, ge=0)
    active: bool | None = None


class TaskIn(Body):
    namespace: str
    description: str = Field(examples=["Extract the invoice number, total and currency as JSON: ..."])
    context: str = ""
    task_type: str = Field(default="text", description="text | json | code (Python) | label | markdown | javascript")
    destructive: bool = Field(default=False, description="Always the frontier model.")
    needs_review: bool = Field(default=False, description="Flagged for review: always the frontier model.")
    frontier_agent: str | None = Field(
        default=None, description="A registered frontier model (default: the first active)."
    )

    def to_request(self) -> TaskRequest:
        return TaskRequest(**self.model_dump(exclude={"priority"}))


class QueuedTaskIn(TaskIn):
    priority: int = Field(default=5, ge=-1000, le=1000, description="Higher runs sooner.")


@routes.get("/v1/workflows/agents", summary="The registered models")
async def list_model_agents(svc: Svc, p: Caller) -> dict[str, Any]:
    agents = await svc.run(lambda b: svc.workflows(b).list_models(agent=p.agent_id))
    return {"agents": [a.to_json() for a in agents]}


@routes.post("/v1/workflows/agents", status_code=201, summary="Register a model (admin)")
async def add_model_agent(body: ModelAgentIn, svc: Svc, p: Caller) -> dict[str, Any]:
    return (await svc.run(lambda b: svc.workflows(b).add_model(body.model_dump(), agent=p.agent_id))).to_json()


@routes.patch("/v1/workflows/agents/{name}", summary="Change or deactivate a model (admin)")
async def update_model_agent(name: str, body: ModelAgentPatch, svc: Svc, p: Caller) -> dict[str, Any]:
    fields = body.model_dump(exclude_unset=True)
    return (await svc.run(lambda b: svc.workflows(b).update_model(name, fields, agent=p.agent_id))).to_json()


@routes.post(
    "/v1/workflows/dispatch",
    summary="Route and run a task now: a trusted local chain, else the frontier model",
)
async def dispatch(body: TaskIn, svc: Svc, p: Caller) -> dict[str, Any]:
    return (await svc.run(lambda b: svc.workflows(b).dispatch(p.agent_id, body.to_request()))).to_json()


@routes.post("/v1/workflows/queue", status_code=202, summary="Queue a task for a worker")
async def enqueue(body: QueuedTaskIn, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: svc.workflows(b).enqueue(p.agent_id, body.to_request(), priority=body.priority))


@routes.get("/v1/workflows/queue/{queue_id}", summary="A queued task: its status and result")
async def queued(queue_id: str, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: svc.workflows(b).queued(p.agent_id, queue_id))


@routes.get(
    "/v1/workflows/report",
    summary="Local share, frontier cost saved, accuracy over time, per agent (the namespaces you can read)",
)
async def workflow_report(
    svc: Svc,
    p: Caller,
    namespace: Annotated[list[str] | None, Query()] = None,
    days: Annotated[int | None, Query(ge=1, le=36_500)] = None,
) -> dict[str, Any]:
    return await svc.run(lambda b: svc.workflows(b).report(p.agent_id, namespaces=namespace, days=days))
