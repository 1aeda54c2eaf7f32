"""The latency plot of ``cabrain bench`` (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cabrain.errors import ConfigError


def require_matplotlib() -> None:
    """Fail before the measuring starts (it can take hours) when the plot could not be drawn."""
    try:
        import matplotlib  # noqa: F401 - lazy: an optional extra, only for the plot
    except ImportError as exc:
        raise ConfigError(
            "the latency plot needs matplotlib", hint="pip install 'cabrain[bench]', or pass --no-plot"
        ) from exc


def plot(results: dict[str, Any], path: Path) -> None:
    """Recall p50 and p95 against corpus size: in process, over HTTP, and the floor."""
    import matplotlib  # lazy: an optional extra (cabrain[bench]), checked by require_matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["memories"] for r in results["sizes"]]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    series = [
        ("in process", lambda r: r["recall"].get(1, {}), "-o"),
        ("HTTP", lambda r: r.get("http", {}).get("recall", {}).get(1, {}), "-s"),
    ]
    for label, pick, style in series:
        for p, alpha in (("p50", 1.0), ("p95", 0.55)):
            ys = [pick(r).get(p) for r in results["sizes"]]
            if all(y is not None for y in ys):
                ax.plot(sizes, ys, style, alpha=alpha, label=f"recall {p}, {label}, concurrency 1")
    floor = [r["overhead"].get("floor_p95_ms") for r in results["sizes"]]
    if all(f is not None for f in floor):
        ax.plot(sizes, floor, "--x", color="grey", label="floor p95 (query embedding + bare probes)")
    ax.set_xscale("log")
    ax.set_xlabel("memories in the namespace")
    ax.set_ylabel("latency (ms)")
    ax.set_title("CaBrain recall latency (hybrid, k=10, no rerank, no cache)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
