"""``cabrain bench``: performance, measured on synthetic corpora in scratch databases.

One module per measurement, on shared parts:

- :mod:`.scale` - ``cabrain bench``: the whole picture at one or more corpus sizes (its spec in
  :mod:`.scale_spec`, its measurements in :mod:`.scale_measure`, its plot in :mod:`.plot`);
- :mod:`.recall`, :mod:`.http`, :mod:`.capture`, :mod:`.sleep` - ``cabrain bench recall``,
  ``http``, ``capture`` and ``sleep`` (the sleep bench's workload in :mod:`.sleep_workload`);
- :mod:`.corpus` (synthetic text), :mod:`.load` (the bulk loader), :mod:`.measure` (the floor,
  timed calls, a local service, the machine's facts) and :mod:`.progress` (stderr lines).

The names below are those of ``recall``, ``http`` and ``capture``, for ``from cabrain import bench``.
"""

from cabrain.bench.capture import render_capture, run_capture_bench
from cabrain.bench.corpus import synthetic_queries, synthetic_text
from cabrain.bench.http import HttpBenchResult, render_http, run_http_bench
from cabrain.bench.recall import BenchResult, main_json, render, run_recall_bench

__all__ = [
    "BenchResult",
    "HttpBenchResult",
    "main_json",
    "render",
    "render_capture",
    "render_http",
    "run_capture_bench",
    "run_http_bench",
    "run_recall_bench",
    "synthetic_queries",
    "synthetic_text",
]
