"""What ``cabrain bench`` measures: the sizes, namespaces, queries and levels of one run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cabrain.bench.corpus import NAMESPACE
from cabrain.bench.load import Corpus


@dataclass
class ScaleSpec:
    sizes: list[int]
    namespaces: int = 20
    queries: int = 200
    concurrency: list[int] = field(default_factory=lambda: [1, 8, 32])
    retain_texts: int = 512
    http: bool = True
    keep: bool = False
    real_vectors: int = 2000
    noise: float = 0.02
    seed: int = 7
    maintenance_work_mem: str = "auto"
    app_args: dict[str, Any] | None = None
    out: Path = Path("bench-results")
    plot: bool = True
    quiet: bool = False


def corpus_for(size: int, spec: ScaleSpec) -> Corpus:
    """N in the large namespace, N/100 in each of the others."""
    sizes = {NAMESPACE: size}
    for i in range(2, spec.namespaces + 1):
        sizes[f"{NAMESPACE}-{i}"] = max(1, size // 100)
    return Corpus(sizes, real=spec.real_vectors, noise=spec.noise, seed=spec.seed)
