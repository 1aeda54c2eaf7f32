"""The cold index's clusters (:mod:`cabrain.store.cold_index`): a spherical k-means over a seeded
sample of a namespace's embeddings, and each row's nearest centroid."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cabrain.store.cold_stream import stream

MAX_CLUSTERS = 8192
SAMPLE_PER_CLUSTER = 40  # k-means runs on at most this many rows per centroid (and at least 20,000)
KMEANS_ROUNDS = 10


def cluster_count(rows: int) -> int:
    return max(1, min(MAX_CLUSTERS, round(math.sqrt(rows))))


def unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def nearest(vectors: np.ndarray, centroids: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Each row's most similar centroid (inner product: both sides of unit length)."""
    out = np.empty(len(vectors), dtype=np.int32)
    for start in range(0, len(vectors), chunk):
        out[start : start + chunk] = np.argmax(vectors[start : start + chunk] @ centroids.T, axis=1)
    return out


def kmeans(vectors: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Spherical k-means (unit centroids) of ``vectors``' rows on a seeded sample; k x dim float32."""
    rng = np.random.default_rng(seed)
    points = unit(vectors.astype(np.float32, copy=False))
    sample_size = min(len(points), max(20_000, SAMPLE_PER_CLUSTER * k))
    sample = points[rng.choice(len(points), sample_size, replace=False)] if sample_size < len(points) else points
    k = min(k, len(sample))
    centroids = sample[rng.choice(len(sample), k, replace=False)].copy()
    for _ in range(KMEANS_ROUNDS):
        assigned = nearest(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assigned, sample)
        filled = np.bincount(assigned, minlength=k) > 0
        centroids[filled] = unit(sums[filled])
    return centroids


def embeddings(column: pa.ChunkedArray | pa.Array, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``embedding`` column as an n x dim float32 matrix and a mask of the rows that have one of
    that dimension (the others are zero)."""
    blobs = column.to_pylist()
    has = np.fromiter((b is not None and len(b) == 4 * dim for b in blobs), dtype=bool, count=len(blobs))
    out = np.zeros((len(blobs), dim), dtype=np.float32)
    if has.any():
        out[has] = np.frombuffer(b"".join(b for b, h in zip(blobs, has, strict=True) if h), dtype="<f4").reshape(
            -1, dim
        )
    return out, has


def sample_embeddings(scan: Any, upper: int, seed: int) -> tuple[int | None, int, np.ndarray, float]:
    """The namespace's embedding dimension (the most common), how many rows have one of it, a
    seeded sample of those embeddings, enough for k-means over :func:`cluster_count` of them, and
    the rows' mean length in tokens (of those whose tokens are stored)."""
    rng = np.random.default_rng(seed)
    want = max(20_000, SAMPLE_PER_CLUSTER * cluster_count(max(upper, 1)))
    keep = min(1.0, want / max(upper, 1))
    counts: dict[int, int] = {}
    kept: dict[int, list[np.ndarray]] = {}
    tokens, measured = 0, 0
    for batch in stream(scan):
        lengths = batch.column("term_count")
        measured += len(lengths) - lengths.null_count
        tokens += int(pc.sum(lengths).as_py() or 0)
        dims = batch.column("embedding_dim").to_pylist()
        for d in {d for d in dims if d}:
            vectors, has = embeddings(batch.column("embedding"), d)
            counts[d] = counts.get(d, 0) + int(has.sum())
            chosen = has & (rng.random(len(has)) < keep) if keep < 1.0 else has
            if chosen.any():
                kept.setdefault(d, []).append(vectors[chosen])
    avgdl = max(tokens / measured, 1.0) if measured else 1.0
    if not counts:
        return None, 0, np.zeros((0, 0), dtype=np.float32), avgdl
    dim = max(sorted(counts), key=lambda d: counts[d])
    return dim, counts[dim], np.concatenate(kept.get(dim, [np.zeros((0, dim), dtype=np.float32)])), avgdl
