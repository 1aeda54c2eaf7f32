"""The health page: whether each part answers now (the service and its models, the database, Redis,
the cold tier, the last sleep run), what the brain holds (counts kept as memories change, and the
tiers' sizes for admins) and, for admins, request latency and the L1 cache's hit ratio from the
metrics every replica exports (the same families ``/metrics`` serves).

The page answers in milliseconds: the cold tier's check (opening the Iceberg catalog and writing a
probe file: about 2 s) runs once per process and then in the background at most once a
:data:`COLD_TTL_S`, each view showing the last result and its age. Latency is read from histograms:
with fewer than :data:`MIN_REQUESTS` requests no percentile is shown ("too few requests"), and a
percentile is the upper bound of the bucket it falls in ("at most 50 ms"), never a value
interpolated inside a bucket that its few requests may all sit at one end of."""

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
from cabrain.overview import size
from cabrain.providers.cache import probe_redis
from cabrain.providers.cold_store import probe
from cabrain.serve import standbys
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, router
from cabrain.serve.deps import Svc

routes = router()
LATENCY = "ray_cabrain_http_request_latency_ms"
LOOKUPS = "ray_cabrain_cache_lookups"
WATCHED = ("/v1/recall", "/v1/memories", "/console/memories", "/console/recall", "/console/overview")


COLD_TTL_S = 60.0
MIN_REQUESTS = 20


@dataclass(frozen=True)
class Part:
    name: str
    ok: bool
    detail: str
    ms: float | None = None
    checked_at: float | None = None  # monotonic time of a cached check (None: checked for this view)


class Cached:
    """One slow check, run once per process and then again in the background when its result is
    older than ``ttl`` seconds; every view answers with the last result."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.result: Part | None = None
        self.task: asyncio.Task[Part] | None = None

    async def get(self, check: Any, *, now: float | None = None) -> Part:
        moment = time.monotonic() if now is None else now
        fresh = self.result is not None and moment - (self.result.checked_at or 0.0) <= self.ttl
        if not fresh and self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run(check))
        if self.result is None:  # the first check in this process: wait for it
            assert self.task is not None
            return await asyncio.shield(self.task)
        return self.result

    async def _run(self, check: Any) -> Part:
        try:
            part = await check()
            self.result = Part(part.name, part.ok, part.detail, part.ms, time.monotonic())
            return self.result
        finally:
            self.task = None


_cold = Cached(COLD_TTL_S)


async def _timed(name: str, check: Any) -> Part:
    started = time.perf_counter()
    try:
        detail = await check()
    except (CabrainError, OSError, TimeoutError) as exc:
        return Part(name, False, str(exc).splitlines()[0], (time.perf_counter() - started) * 1000)
    return Part(name, True, detail, (time.perf_counter() - started) * 1000)


def bound(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The upper bound of the bucket of cumulative histogram ``[(upper bound, count)]`` that holds
    its ``q`` quantile (``inf``: above the last bound); ``None`` with fewer than :data:`MIN_REQUESTS`."""
    if not buckets or buckets[-1][1] < MIN_REQUESTS:
        return None
    rank = q * buckets[-1][1]
    return next(upper for upper, count in buckets if count >= rank)


def summarize(text: str) -> dict[str, Any]:
    """Per watched route (all replicas): requests, and the bucket bounds of p50 and p95 in ms (none
    for fewer than :data:`MIN_REQUESTS` requests); and the cache's hits and lookups."""
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
            "p50": bound(cumulative, 0.5),
            "p95": bound(cumulative, 0.95),
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
        _cold.get(lambda: _timed("cold tier (Iceberg)", cold)),
        _timed("sleep", sleep),
    )
    started = time.perf_counter()
    replicas = await standbys.health(svc)
    ms = (time.perf_counter() - started) * 1000
    shown = [
        *parts,
        *(Part(f"database replica {r['url']}", r["state"] == "ok", standbys.summary(r), ms) for r in replicas),
    ]
    held = await svc.run(lambda b: b.overview(session.agent, runs=0))
    metrics = None
    if session.principal.is_admin:
        try:
            metrics = summarize(await svc.ops.metrics(session.agent))
        except Exception as exc:  # noqa: BLE001 - the page still shows the parts
            metrics = {"error": f"{type(exc).__name__}: {exc}"}
    return page(
        request,
        "health.html",
        title="Health",
        parts=shown,
        metrics=metrics,
        held=held,
        hot_size=size(held["storage"]["hot_bytes"]),
        cold_size=size(held["storage"]["cold_bytes"]),
        now=time.monotonic(),
        min_requests=MIN_REQUESTS,
        inf=float("inf"),
    )
