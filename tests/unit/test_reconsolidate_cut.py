"""The first cut of reconsolidate: each fact is weighed against its nearest older facts only."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cabrain.sleep import reconsolidate as module
from cabrain.sleep.reconsolidate import nearest_older
from cabrain.sleep.rows import unit_rows


def _every_pair(unit: np.ndarray, rank: np.ndarray, floor: float) -> list[list[tuple[int, float]]]:
    sims = unit @ unit.T
    return [
        sorted(
            ((j, float(sims[i, j])) for j in range(len(unit)) if rank[j] < rank[i] and sims[i, j] >= floor),
            key=lambda pair: rank[pair[0]],
        )
        for i in range(len(unit))
    ]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=40),
    seed=st.integers(min_value=0, max_value=2**31),
    floor=st.floats(min_value=-1.0, max_value=1.0),
)
def test_without_a_limit_every_older_pair_above_the_floor_is_weighed_oldest_first(
    n: int, seed: int, floor: float
) -> None:
    rng = np.random.default_rng(seed)
    unit = unit_rows(rng.normal(size=(n, 6)).astype(np.float32))
    rank = rng.permutation(n)
    got = nearest_older(unit, rank, floor=floor, limit=n)
    want = _every_pair(unit, rank, floor)
    assert [[j for j, _ in row] for row in got] == [[j for j, _ in row] for row in want]
    for row_got, row_want in zip(got, want, strict=True):
        assert np.allclose([s for _, s in row_got], [s for _, s in row_want], atol=1e-5)


def test_a_limit_keeps_the_nearest_older_rows_and_blocks_change_nothing(monkeypatch) -> None:
    rng = np.random.default_rng(7)
    unit = unit_rows(rng.normal(size=(50, 8)).astype(np.float32))
    rank = np.arange(50)
    whole = nearest_older(unit, rank, floor=-1.0, limit=3)
    sims = unit @ unit.T
    for i, row in enumerate(whole):
        assert len(row) == min(3, i)  # only older rows, never the row itself
        if i > 3:
            nearest = sorted(range(i), key=lambda j: -sims[i, j])[:3]
            assert sorted(j for j, _ in row) == sorted(nearest)
        assert [j for j, _ in row] == sorted(j for j, _ in row)  # oldest first
    monkeypatch.setattr(module, "BLOCK_CELLS", 7)  # a row at a time
    rowwise = nearest_older(unit, rank, floor=-1.0, limit=3)
    assert [[j for j, _ in row] for row in rowwise] == [[j for j, _ in row] for row in whole]
    assert np.allclose([s for row in rowwise for _, s in row], [s for row in whole for _, s in row], atol=1e-5)
