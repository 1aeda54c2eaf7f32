"""Prometheus metrics, through Ray's metrics system so they add up across replicas and nodes.

Each replica records into ``ray.serve.metrics`` (Serve adds ``deployment``, ``replica`` and
``application`` labels); each Ray node's metrics agent exports them, prefixed ``ray_``, on its
metrics port, next to Serve's own (``ray_serve_*``: per-replica queue length, request counts).
Prometheus can scrape those ports directly (Ray writes a service-discovery file); ``GET /metrics``
on the API gathers the CaBrain and Serve families from every alive node into one page. A local Ray
opens no such port (it has no key) unless ``CABRAIN_RAY_METRICS_EXPORT`` is on: the page is empty.
"""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import ray
from prometheus_client.parser import text_string_to_metric_families
from ray.serve.metrics import Counter, Gauge, Histogram

log = logging.getLogger(__name__)

LATENCY_MS: list[float] = [1, 2, 5, 10, 20, 35, 50, 75, 100, 150, 250, 500, 1000, 2500, 5000, 10000]
BATCH_SIZES: list[float] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
EXPORTED_PREFIXES = ("ray_cabrain_", "ray_serve_")
# Ray keeps a gauge's value for two export intervals after it was last set, then drops the series: a
# replica that is idle (its cache ratio and queue depth unchanged) would vanish from /metrics. Each
# replica sets its gauges again once per export interval (RAY_metrics_report_interval_ms, at least
# 1 s, as Ray clamps it), whether or not they moved.


class _FreshGauges:
    """Sets a replica's gauges again every export interval, from the first call inside its event loop."""

    _refresher: asyncio.Task[None] | None = None

    def gauge_values(self) -> list[tuple[Gauge, float]]:
        raise NotImplementedError

    def publish(self) -> None:
        for gauge, value in self.gauge_values():
            gauge.set(value)

    def keep_fresh(self) -> None:
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._refresh())

    async def _refresh(self) -> None:
        every_s = _export_interval_s()
        while True:
            await asyncio.sleep(every_s)
            try:
                self.publish()
            except Exception:  # a metrics hiccup never stops the replica's work
                log.warning("gauges not refreshed", exc_info=True)


class IngressMetrics(_FreshGauges):
    def __init__(self) -> None:
        self.latency = Histogram(
            "cabrain_http_request_latency_ms",
            description="HTTP request latency per route, in milliseconds.",
            boundaries=LATENCY_MS,
            tag_keys=("route", "method", "status"),  # type: ignore[arg-type]  # Ray annotates it tuple[str]
        )
        self.cache = Counter(
            "cabrain_cache_lookups",
            description="L1 cache lookups for recall, by result.",
            tag_keys=("result",),
        )
        self.cache_ratio = Gauge(
            "cabrain_cache_hit_ratio",
            description="Share of this replica's recalls answered from the L1 cache.",
        )
        self.in_flight = Gauge(
            "cabrain_http_in_flight",
            description="HTTP requests being handled by this replica.",
        )
        self._hits = self._lookups = 0
        self._in_flight = 0
        self.last_request_at = 0.0  # monotonic time the latest request started

    @property
    def in_flight_now(self) -> int:
        return self._in_flight

    def gauge_values(self) -> list[tuple[Gauge, float]]:
        values: list[tuple[Gauge, float]] = [(self.in_flight, self._in_flight)]
        if self._lookups:
            values.append((self.cache_ratio, self._hits / self._lookups))
        return values

    def started(self) -> None:
        self.keep_fresh()
        self.last_request_at = time.monotonic()
        self._in_flight += 1
        self.in_flight.set(self._in_flight)

    def finished(self, route: str, method: str, status: int, ms: float) -> None:
        self._in_flight -= 1
        self.in_flight.set(self._in_flight)
        self.latency.observe(ms, tags={"route": route, "method": method, "status": str(status)})

    def recall_cache(self, hit: bool) -> None:
        self._lookups += 1
        self._hits += int(hit)
        self.cache.inc(tags={"result": "hit" if hit else "miss"})
        self.cache_ratio.set(self._hits / self._lookups)


class EmbedderMetrics(_FreshGauges):
    def __init__(self) -> None:
        self.batch_texts = Histogram(
            "cabrain_embedding_batch_size",
            description="Texts per model call after batching (documents: at most one chunk).",
            boundaries=BATCH_SIZES,
            tag_keys=("kind",),
        )
        self.batch_calls = Histogram(
            "cabrain_embedding_batch_requests",
            description="Embedding requests merged into one batch.",
            boundaries=BATCH_SIZES,
            tag_keys=("kind",),
        )
        self.latency = Histogram(
            "cabrain_embedding_latency_ms",
            description="Model time per call, in milliseconds.",
            boundaries=LATENCY_MS,
            tag_keys=("kind",),
        )
        self.queue = Gauge(
            "cabrain_embedding_queue_depth",
            description="Embedding requests waiting or running.",
        )
        self.waiting = 0

    def gauge_values(self) -> list[tuple[Gauge, float]]:
        return [(self.queue, self.waiting)]

    def queue_depth(self, waiting: int) -> None:
        self.keep_fresh()
        self.waiting = waiting
        self.queue.set(waiting)


def _export_interval_s() -> float:
    return max(int(ray._config.metrics_report_interval_ms()), 1000) / 1000


async def collect(timeout_s: float = 2.0) -> str:
    """The CaBrain and Serve metric families of every alive Ray node, merged into one page."""
    targets = [
        f"http://{n['NodeManagerAddress']}:{n['MetricsExportPort']}/metrics"
        for n in await asyncio.to_thread(ray.nodes)
        if n.get("Alive") and (n.get("MetricsExportPort") or 0) > 0  # -1: the node exports none
    ]
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        pages = await asyncio.gather(*(client.get(url) for url in targets), return_exceptions=True)
    families: dict[str, tuple[str, str, list[str]]] = {}
    for url, page in zip(targets, pages, strict=True):
        if isinstance(page, BaseException) or page.status_code != 200:
            log.warning("metrics unreachable", extra={"url": url, "error": str(page)})
            continue
        for family in text_string_to_metric_families(page.text):
            if not family.name.startswith(EXPORTED_PREFIXES):
                continue
            kind = "untyped" if family.type == "unknown" else family.type
            entry = families.setdefault(family.name, (kind, family.documentation, []))
            entry[2].extend(_render_sample(s) for s in family.samples)
    out = []
    for name in sorted(families):
        kind, doc, samples = families[name]
        out.append(f"# HELP {name} {doc}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(samples)
    return "\n".join(out) + "\n"


def _render_sample(sample) -> str:
    labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(sample.labels.items()))
    return f"{sample.name}{{{labels}}} {sample.value!r}" if labels else f"{sample.name} {sample.value!r}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
