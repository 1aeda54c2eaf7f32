"""The cold index's clusters (:mod:`cabrain.store.cold_index`): a spherical k-means over a seeded
sample of a namespace's embeddings, each row's nearest centroid, and the codes of its residual from it."""

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


# --- codes -------------------------------------------------------------------------------------------
# A probe's first pass ranks the rows of its clusters by codes of their embeddings and reads the
# embeddings of its hits only: each row's residual (its unit embedding less its cluster's centroid),
# each dimension's range over the build's sample of residuals cut into 2^bits - 1 steps, one byte a
# dimension (8 bits) or two (16: little-endian). A residual's range is a fraction of the embedding's,
# so its steps are as fine. ``QUANTIZER_MARGIN`` widens the range on each side, so that rows outside
# the sample's range are rarely clipped (a sample of 20,000 spans about 4 standard deviations each
# side of a dimension's mean, ten million rows about 5.5; a quarter more on each side covers 6).
QUANTIZER_MARGIN = 0.25
CODE_BITS = (8, 16)


def residuals(units: np.ndarray, centroids: np.ndarray, cluster: np.ndarray) -> np.ndarray:
    """Each unit row less its cluster's centroid."""
    return units - centroids[cluster]


def quantizer(residual: np.ndarray, bits: int = 8) -> np.ndarray:
    """The 2 x dim float32 ``[low, step]`` of ``bits``-bit codes of residuals like ``residual``'s."""
    if bits not in CODE_BITS:
        raise ValueError(f"codes are of 8 or 16 bits, not {bits}")
    low, high = residual.min(axis=0), residual.max(axis=0)
    spread = np.maximum(high - low, 1e-6)
    low, high = low - QUANTIZER_MARGIN * spread, high + QUANTIZER_MARGIN * spread
    return np.stack([low, (high - low) / (2**bits - 1)]).astype(np.float32)


def encode(residual: np.ndarray, quantized: np.ndarray, bits: int = 8) -> np.ndarray:
    """The codes (n x dim, uint8 or little-endian uint16) of residuals under ``quantized``."""
    low, step = quantized
    kind = np.uint8 if bits == 8 else np.dtype("<u2")
    return np.clip(np.rint((residual - low) / step), 0, 2**bits - 1).astype(kind)


def code_column(codes: np.ndarray, has: np.ndarray) -> pa.Array:
    """The ``code`` column: each row's codes as bytes, null where ``has`` is false."""
    n = len(has)
    raw = np.ascontiguousarray(codes).view(np.uint8).reshape(n, -1) if n else np.zeros((0, 0), np.uint8)
    lengths = np.where(has, raw.shape[1], 0).astype(np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    validity = pa.array(has, type=pa.bool_()).buffers()[1] if not has.all() else None
    data = pa.py_buffer(np.ascontiguousarray(raw[has]).tobytes())
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets.tobytes()), data])


def code_similarities(
    column: Any, qvec: np.ndarray, quantized: np.ndarray, near: np.ndarray, cluster: np.ndarray
) -> np.ndarray:
    """Each row's approximate cosine with the unit ``qvec`` from its code (NaN where there is none):
    the query's similarity to the row's centroid (``near``: per cluster; ``cluster``: per row), plus
    the codes' dot product with the query scaled by each dimension's step, plus the query's dot
    product with the lows."""
    low, step = quantized
    dim = qvec.shape[0]
    out = np.full(len(column), np.nan, dtype=np.float32)
    if dim != len(low) or len(column) == 0:
        return out
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    width = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(column.buffers()[1], dtype=width)[column.offset : column.offset + len(column) + 1]
    sizes = np.diff(offsets)
    size = dim if (sizes == dim).sum() >= (sizes == 2 * dim).sum() else 2 * dim  # one build: one width
    valid = (sizes == size) & (cluster >= 0) & (cluster < len(near))
    if column.null_count:
        valid &= np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if not valid.any():
        return out
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)
    if valid.all():
        raw = data[offsets[0] : offsets[-1]].reshape(len(column), size)
    else:
        raw = data[offsets[:-1][valid][:, None] + np.arange(size)]
    codes = raw.view(np.uint8 if size == dim else np.dtype("<u2"))
    q = qvec.astype(np.float32)
    out[valid] = codes.astype(np.float32) @ (q * step) + float(q @ low) + near[cluster[valid]]
    return out
