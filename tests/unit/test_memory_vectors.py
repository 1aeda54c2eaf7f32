"""A long memory's own vector is its passages' vectors pooled, as the embedder pools a text longer
than its window: the length-weighted mean, made unit length."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cabrain.write.vectors import pooled


def test_longer_passages_weigh_more_and_the_result_is_unit_length() -> None:
    vector = pooled(["a" * 300, "b" * 100], [[1.0, 0.0], [0.0, 1.0]])
    assert math.isclose(np.linalg.norm(vector), 1.0, rel_tol=1e-6)
    assert math.isclose(vector[0], 3 * vector[1], rel_tol=1e-6)


@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=40), st.lists(st.floats(-1, 1), min_size=4, max_size=4)),
        min_size=1,
        max_size=8,
    )
)
def test_any_passages_pool_to_a_finite_vector_of_their_width(parts: list[tuple[str, list[float]]]) -> None:
    vector = pooled([p for p, _ in parts], [v for _, v in parts])
    assert len(vector) == 4 and all(math.isfinite(x) for x in vector)
    norm = float(np.linalg.norm(vector))
    assert norm == 0 or math.isclose(norm, 1.0, rel_tol=1e-4)
