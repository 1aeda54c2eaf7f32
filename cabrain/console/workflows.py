"""The workflows page: the model registry, task clusters and their trusted chains, the queue, and the
report (local share, frontier and local cost, savings, accuracy by day) as charts. An agent sees the
namespaces it may read; an admin every one."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import Brain
from cabrain.console import charts, filters
from cabrain.console.render import page
from cabrain.console.routing import Current, router
from cabrain.serve.deps import Svc
from cabrain.workflows.facade import Workflows

routes = router()


@routes.get("/workflows")
async def workflows(request: Request, svc: Svc, session: Current) -> Response:
    days = int(filters.number(request.query_params, "days", low=1, high=3650, integer=True) or 30)

    async def gather(b: Brain) -> dict[str, Any]:
        flows = Workflows(b.engine)
        readable = await flows.readable(session.agent)
        queue = (
            {"all namespaces": await flows.queue_counts(None)}
            if readable is None
            else {name: await flows.queue_counts(name) for name in readable}
        )
        return {
            "models": await flows.list_models(),
            "clusters": await flows.clusters(session.agent, limit=200),
            "queue": {name: counts for name, counts in queue.items() if any(counts.values())},
            "report": await flows.report(session.agent, days=days),
        }

    found = await svc.run(gather)
    report = found["report"]
    cost = report["cost_usd"]
    return page(
        request,
        "workflows.html",
        title="Workflows",
        days=days,
        **found,
        accuracy=charts.line([(d["day"], d["mean_score"]) for d in report["accuracy_by_day"]], top=1.0),
        passing=charts.line([(d["day"], d["pass_rate"]) for d in report["routed_by_day"]], top=1.0),
        costs=charts.bars(
            {
                "frontier spent": cost["frontier"],
                "local spent": cost["local"],
                "learning": cost["learning"],
                "frontier cost avoided": cost["frontier_cost_avoided"],
                "saved": cost["saved"],
            }
        ),
    )
