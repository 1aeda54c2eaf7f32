"""The overview page: what the brain holds and did, at a glance (counts kept as memories change, never a scan)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.overview import size
from cabrain.serve.console import charts, filters
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, router
from cabrain.serve.deps import Svc

routes = router()
KINDS = ("retained", "recalled", "judged", "slept")


def activity_charts(found: dict[str, Any]) -> dict[str, Any]:
    """Per kind, a column chart over the last 7 days and one over the last 24 hours (UTC)."""
    days = {
        kind: charts.columns([(d["start"].strftime("%a %d"), float(d[kind])) for d in found["days"]]) for kind in KINDS
    }
    hours = {
        kind: charts.columns([(h["start"].strftime("%H:00"), float(h[kind])) for h in found["hours"]]) for kind in KINDS
    }
    return {"day_charts": days, "hour_charts": hours}


@routes.get("/overview")
async def overview(request: Request, svc: Svc, session: Current) -> Response:
    namespace = filters.field(request.query_params, "namespace") or None
    found = await svc.run(lambda b: b.overview(session.agent, namespace=namespace))
    return page(
        request,
        "overview.html",
        title="Overview",
        found=found,
        namespace=namespace or "",
        kinds=KINDS,
        hot_size=size(found["storage"]["hot_bytes"]),
        cold_size=size(found["storage"]["cold_bytes"]),
        type_bars=charts.bars({k: float(v) for k, v in found["totals"]["by_type"].items()}),
        source_bars=charts.bars({k: float(v) for k, v in found["totals"]["by_source"].items()}),
        **activity_charts(found),
    )
