"""The workflows page: the model registry, task clusters and their trusted chains, the queue, and the
report (local share, frontier and local cost, savings, accuracy by day) as charts. An agent sees the
namespaces it may read; an admin every one."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from cabrain.serve.console import charts, filters
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, router
from cabrain.serve.deps import Svc

routes = router()


@routes.get("/workflows")
async def workflows(request: Request, svc: Svc, session: Current) -> Response:
    days = int(filters.number(request.query_params, "days", low=1, high=3650, integer=True) or 30)

    found = await svc.run(lambda b: svc.workflows(b).overview(session.agent, days=days))
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
                "audits": cost["audits"],
                "frontier cost avoided": cost["frontier_cost_avoided"],
                "saved": cost["saved"],
            }
        ),
    )
