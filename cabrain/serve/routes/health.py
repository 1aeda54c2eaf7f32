"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import hmac
from typing import cast

from fastapi.responses import JSONResponse, PlainTextResponse

from cabrain import __version__
from cabrain.serve import standbys
from cabrain.serve.deps import Credentials, Svc, caller
from cabrain.serve.responses import HealthOut, ReadyOut, ReplicaOut
from cabrain.serve.routing import answer, router

routes = router(tags=["health"])


@routes.get("/v1/health", summary="Liveness: the process answers (and the hot tier's read replicas' lag)")
async def health(svc: Svc) -> HealthOut:
    out: HealthOut = {"status": "ok", "version": __version__}
    if svc.settings.replica_dsns:
        out["replicas"] = cast(list[ReplicaOut], await standbys.health(svc))
    return out


@routes.get(
    "/v1/ready",
    response_model=ReadyOut,
    responses={503: {"model": ReadyOut, "description": "Not ready (yet): the reason says why"}},
    summary="Readiness: models loaded and the database reachable",
)
async def ready(svc: Svc) -> JSONResponse:
    out = await svc.ready()
    return answer(out, 200 if out["ready"] else 503)


@routes.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics of every replica on every node (an admin key, or CABRAIN_METRICS_KEY)",
)
async def metrics(svc: Svc, creds: Credentials) -> PlainTextResponse:
    token = creds.credentials if creds else None
    scrape_key = svc.settings.metrics_key.get_secret_value() if svc.settings.metrics_key else None
    if scrape_key and token and hmac.compare_digest(token.encode(), scrape_key.encode()):
        text = await svc.ops.scrape()
    else:  # otherwise an admin's key
        text = await svc.ops.metrics((await caller(svc, creds)).agent_id)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
