"""HTTP routes of workflow learning (``/v1/workflows``): the model registry (reading it: any agent;
changing it: admins), dispatching and queueing tasks, and the report. (No postponed annotations:
FastAPI resolves the route signatures' dependency types, which are local to ``add_routes``.)"""

from typing import Annotated, Any

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse
from pydantic import Field

from cabrain.workflows import queue, registry, report
from cabrain.workflows.dispatch import Dispatcher, TaskRequest
from serve_apps.schemas import Body


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
    task_type: str = Field(default="text", description="text | json | code")
    destructive: bool = Field(default=False, description="Always the frontier model.")
    needs_review: bool = Field(default=False, description="Flagged for review: always the frontier model.")
    frontier_agent: str | None = Field(
        default=None, description="A registered frontier model (default: the first active)."
    )


class QueuedTaskIn(TaskIn):
    priority: int = Field(default=5, ge=-1000, le=1000, description="Higher runs sooner.")


def _request(body: TaskIn) -> TaskRequest:
    data = body.model_dump(exclude={"priority"})
    return TaskRequest(**data)


def add_routes(app: FastAPI, svc: Any, Caller: Any, Admin: Any) -> None:
    @app.get("/v1/workflows/agents", tags=["workflows"], summary="The registered models")
    async def list_model_agents(p: Caller) -> JSONResponse:
        async def op(b: Any) -> list:
            async with b.pool.acquire() as conn:
                return await registry.listed(conn)

        return JSONResponse({"agents": [a.to_json() for a in await svc.run(op)]})

    @app.post("/v1/workflows/agents", tags=["workflows"], status_code=201, summary="Register a model (admin)")
    async def add_model_agent(body: ModelAgentIn, p: Admin) -> JSONResponse:
        async def op(b: Any) -> registry.ModelAgent:
            async with b.pool.acquire() as conn:
                return await registry.add(conn, **body.model_dump())

        return JSONResponse((await svc.run(op)).to_json(), status_code=201)

    @app.patch("/v1/workflows/agents/{name}", tags=["workflows"], summary="Change or deactivate a model (admin)")
    async def update_model_agent(name: str, body: ModelAgentPatch, p: Admin) -> JSONResponse:
        async def op(b: Any) -> registry.ModelAgent:
            async with b.pool.acquire() as conn:
                return await registry.update(conn, name, **body.model_dump(exclude_unset=True))

        return JSONResponse((await svc.run(op)).to_json())

    @app.post(
        "/v1/workflows/dispatch",
        tags=["workflows"],
        summary="Route and run a task now: a trusted local chain, else the frontier model",
    )
    async def dispatch(body: TaskIn, p: Caller) -> JSONResponse:
        result = await svc.run(lambda b: Dispatcher(b).dispatch(p.agent_id, _request(body)))
        return JSONResponse(result.to_json())

    @app.post("/v1/workflows/queue", tags=["workflows"], status_code=202, summary="Queue a task for a worker")
    async def enqueue(body: QueuedTaskIn, p: Caller) -> JSONResponse:
        item = await svc.run(
            lambda b: queue.enqueue(
                b.pool, p.agent_id, _request(body), priority=body.priority, max_chars=b.settings.workflow_max_task_chars
            )
        )
        return JSONResponse(item, status_code=202)

    @app.get("/v1/workflows/queue/{queue_id}", tags=["workflows"], summary="A queued task: its status and result")
    async def queued(queue_id: str, p: Caller) -> JSONResponse:
        return JSONResponse(await svc.run(lambda b: queue.get(b.pool, p.agent_id, queue_id)))

    @app.get(
        "/v1/workflows/report",
        tags=["workflows"],
        summary="Local share, frontier cost saved, accuracy over time, per agent (the namespaces you can read)",
    )
    async def workflow_report(
        p: Caller,
        namespace: Annotated[list[str] | None, Query()] = None,
        days: Annotated[int | None, Query(ge=1)] = None,
    ) -> JSONResponse:
        async def op(b: Any) -> dict:
            readable = None if p.is_admin else [r["name"] for r in await b.list_namespaces(p.agent_id)]
            wanted = namespace if namespace else readable
            if readable is not None and wanted is not None:
                wanted = [n for n in wanted if n in readable]
            async with b.pool.acquire() as conn:
                return await report.build(conn, namespaces=wanted, days=days, accept=b.settings.workflow_accept_score)

        return JSONResponse(await svc.run(op))
