"""The health page: whether each part answers now (the service and its models, the database, Redis,
the cold tier, the last sleep run) and, for admins, recall latency and the L1 cache's hit ratio from
the metrics every replica exports (the same families ``/metrics`` serves)."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from prometheus_client.parser import text_string_to_metric_families

from cabrain.errors import CabrainError
from cabrain.providers.cache import probe_redis
from cabrain.providers.cold_store import probe
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, router
from cabrain.serve.deps import Svc

routes = router()
LATENCY = "ray_cabrain_http_request_latency_ms"
LOOKUPS = "ray_cabrain_cache_lookups"
WATCHED = ("/v1/recall", "/v1/memories", "/console/memories", "/console/recall")


@dataclass(frozen=True)
class Part:
    name: str
    ok: bool
    detail: str
    ms: float | None = None


async def _timed(name: str, check: Any) -> Part:
    started = time.perf_counter()
    try:
        detail = await check()
    except (CabrainError, OSError, TimeoutError) as exc:
        return Part(name, False, str(exc).splitlines()[0], (time.perf_counter() - started) * 1000)
    return Part(name, True, detail, (time.perf_counter() - started) * 1000)


def quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile of a cumulative histogram ``[(upper bound, count)]``, interpolated in its bucket."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            width = count - lower_count
            return lower_bound + (bound - lower_bound) * ((rank - lower_count) / width if width else 1.0)
        lower_bound, lower_count = bound, count
    return lower_bound


def summarize(text: str) -> dict[str, Any]:
    """Per watched route (all replicas): requests, p50 and p95 in ms; and the cache's hits and lookups."""
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    cache: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{LATENCY}_bucket" and sample.labels.get("route") in WATCHED:
                buckets[sample.labels["route"]][float(sample.labels["le"])] += sample.value
            elif sample.name in (LOOKUPS, f"{LOOKUPS}_total"):
                cache[sample.labels.get("result", "")] += sample.value
    routes_out = {}
    for route, by_bound in sorted(buckets.items()):
        cumulative = sorted(by_bound.items())
        routes_out[route] = {
            "requests": int(cumulative[-1][1]) if cumulative else 0,
            "p50": quantile(cumulative, 0.5),
            "p95": quantile(cumulative, 0.95),
        }
    lookups = cache["hit"] + cache["miss"]
    return {
        "routes": routes_out,
        "cache_hits": int(cache["hit"]),
        "cache_lookups": int(lookups),
        "cache_ratio": cache["hit"] / lookups if lookups else None,
    }


@routes.get("/health")
async def health(request: Request, svc: Svc, session: Current) -> Response:
    settings = svc.settings

    async def service() -> str:
        ready = await svc.ready()
        if not ready["ready"]:
            raise CabrainError(ready.get("reason") or "not ready")
        models = ", ".join(f"{k}: {v.get('name') or v.get('model') or v}" for k, v in ready["models"].items())
        return f"ready; {models}" if models else "ready"

    async def database() -> str:
        await svc.run(lambda b: b.ping())
        return "answers"

    async def redis() -> str:
        if settings.redis_url is None:
            return "not configured: recall runs without the L1 cache"
        return f"Redis {await probe_redis(settings.redis_url.get_secret_value())}"

    async def cold() -> str:
        return await asyncio.to_thread(probe, settings)

    async def sleep() -> str:
        runs = await svc.run(lambda b: svc.sleep_runs(b).runs(session.agent, limit=1))
        if not runs:
            return "no run yet over the namespaces this key may read"
        last = runs[0]
        if last["status"] in ("failed", "partial"):
            raise CabrainError(f"the last run ended {last['status']} ({last['started_at']:%Y-%m-%d %H:%M} UTC)")
        return f"last run {last['status']}, started {last['started_at']:%Y-%m-%d %H:%M} UTC"

    parts = await asyncio.gather(
        _timed("service and models", service),
        _timed("database (hot tier)", database),
        _timed("Redis (L1 cache)", redis),
        _timed("cold tier (Iceberg)", cold),
        _timed("sleep", sleep),
    )
    metrics = None
    if session.principal.is_admin:
        try:
            metrics = summarize(await svc.ops.metrics(session.agent))
        except Exception as exc:  # noqa: BLE001 - the page still shows the parts
            metrics = {"error": f"{type(exc).__name__}: {exc}"}
    return page(request, "health.html", title="Health", parts=parts, metrics=metrics)
