"""The cold index's codes (cabrain.store.cold_clusters): a probe's first pass ranks its rows by them
(8 or 16 bits a dimension of each row's residual from its centroid), so their similarities must track
the embeddings' closely, rows without one (or of another dimension, or no cluster) must score NaN as
they do with embeddings, and the column must read back what was written whatever rows lack a code."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cabrain.search.archive_rank import column_similarities
from cabrain.store.cold_clusters import (
    code_column,
    code_similarities,
    encode,
    kmeans,
    nearest,
    quantizer,
    residuals,
    unit,
)


def _vectors(seed: int, n: int, dim: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(8, dim)).astype(np.float32)
    return unit(base[rng.integers(0, 8, n)] + rng.normal(0, 0.3, (n, dim)).astype(np.float32))


def _coded(vectors: np.ndarray, k: int, bits: int, sample: int | None = None):
    centroids = kmeans(vectors, k)
    cluster = nearest(vectors, centroids)
    chosen = vectors[: sample or len(vectors)]
    quantized = quantizer(residuals(chosen, centroids, nearest(chosen, centroids)), bits)
    codes = encode(residuals(vectors, centroids, cluster), quantized, bits)
    return centroids, cluster, quantized, codes


@pytest.mark.parametrize(("bits", "error", "among"), [(8, 0.005, 20), (16, 1e-4, 10)])
def test_code_similarities_track_the_embeddings_and_keep_the_order_of_the_nearest(
    bits: int, error: float, among: int
) -> None:
    vectors = _vectors(1, 4000, 384)
    centroids, cluster, quantized, codes = _coded(vectors, 60, bits, sample=1000)  # a sample, as a build takes
    column = code_column(codes, np.ones(len(vectors), dtype=bool))
    blobs = pa.array([v.astype("<f4").tobytes() for v in vectors], pa.binary())
    for q in _vectors(2, 5, 384):
        exact = column_similarities(blobs, q)
        approx = code_similarities(column, q, quantized, centroids @ q, cluster)
        # residuals beyond the sample's range (and its margin) are clipped: a few rows off by more
        assert np.quantile(np.abs(exact - approx), 0.99) < error and np.max(np.abs(exact - approx)) < 0.01
        top = set(np.argsort(-exact)[:10])
        assert len(top & set(np.argsort(-approx)[:among])) == 10


@settings(max_examples=60, deadline=None)
@given(
    has=st.lists(st.booleans(), min_size=1, max_size=40),
    offset=st.integers(min_value=0, max_value=5),
    chunks=st.integers(min_value=1, max_value=3),
    bits=st.sampled_from([8, 16]),
)
def test_the_code_column_reads_back_what_was_written_whatever_rows_lack_one(
    has: list[bool], offset: int, chunks: int, bits: int
) -> None:
    mask = np.asarray(has, dtype=bool)
    vectors = _vectors(3, len(mask), 16)
    centroids, cluster, quantized, codes = _coded(vectors, min(3, len(mask)), bits)
    column = code_column(codes, mask)
    assert column.null_count == int((~mask).sum())
    assert [b is None for b in column.to_pylist()] == list(~mask)
    assert all(b == c.tobytes() for b, c, h in zip(column.to_pylist(), codes, mask, strict=True) if h)
    q = vectors[0]
    near = centroids @ q
    whole = code_similarities(column, q, quantized, near, cluster)
    assert np.array_equal(np.isnan(whole), ~mask)
    # a slice (a batch's view of a column) and a chunked column answer the same (to float32's last
    # bits: BLAS rounds a row by its place in the matrix)
    at = min(offset, len(mask) - 1)
    sliced = code_similarities(column.slice(at), q, quantized, near, cluster[at:])
    np.testing.assert_allclose(sliced, whole[at:], rtol=1e-5, atol=1e-6)
    bounds = np.linspace(0, len(mask), chunks + 1).astype(int)
    chunked = pa.chunked_array([column.slice(a, b - a) for a, b in itertools.pairwise(bounds)], pa.binary())
    np.testing.assert_allclose(code_similarities(chunked, q, quantized, near, cluster), whole, rtol=1e-5, atol=1e-6)


def test_a_query_of_another_dimension_codes_of_another_length_or_no_cluster_score_nan() -> None:
    vectors = _vectors(4, 10, 16)
    centroids, cluster, quantized, codes = _coded(vectors, 2, 8)
    column = code_column(codes, np.ones(10, dtype=bool))
    other = _vectors(5, 1, 8)[0]
    assert np.isnan(code_similarities(column, other, quantized, np.zeros(2), cluster)).all()
    odd = pa.array([b"\x01" * 16, b"\x02" * 15, None, b"\x03" * 16], pa.binary())
    sims = code_similarities(odd, vectors[0], quantized, centroids @ vectors[0], np.array([0, 0, 0, -1]))
    assert not np.isnan(sims[0]) and np.isnan(sims[1:]).all()
    assert len(code_similarities(pa.array([], pa.binary()), vectors[0], quantized, np.zeros(2), cluster[:0])) == 0
    with pytest.raises(ValueError, match="8 or 16"):
        quantizer(codes.astype(np.float32), 12)


def test_residuals_outside_the_samples_range_are_clipped_not_wrapped() -> None:
    sample = _vectors(6, 200, 16) * 0.1
    for bits in (8, 16):
        quantized = quantizer(sample, bits)
        far = np.zeros((1, 16), dtype=np.float32)
        far[0, 0], far[0, 1] = 1.0, -1.0  # beyond the sample's range, on both sides
        codes = encode(far, quantized, bits)
        assert codes[0, 0] == 2**bits - 1 and codes[0, 1] == 0


def test_the_setting_takes_8_or_16_bits_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from cabrain.settings import Settings

    monkeypatch.setenv("CABRAIN_COLD_INDEX_CODE_BITS", "8")
    assert Settings().cold_index_code_bits == 8
    for bad in ("12", "4", "32", "sixteen"):
        monkeypatch.setenv("CABRAIN_COLD_INDEX_CODE_BITS", bad)
        with pytest.raises(ValidationError):
            Settings()
