"""Archive recall's first pass keeps its rows as columns: the newest copy of each id is chosen by
sorting, as the old loop over Python rows chose it (the latest ``demoted_at``; the first read of
equals), whatever the batches."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cabrain.search.archive_rank import Pass
from cabrain.types import ArchiveQuery

T0 = datetime(2026, 1, 1, tzinfo=UTC)
QUERY = ArchiveQuery("x", "p")


def _batch(rows: list[tuple[str, int | None]]) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": pa.array([i for i, _ in rows], pa.string()),
            "demoted_at": pa.array(
                [None if d is None else T0 + timedelta(days=d) for _, d in rows], pa.timestamp("us", tz="UTC")
            ),
            "importance": pa.array([0.5] * len(rows), pa.float32()),
        }
    )


def _reference(rows: list[tuple[str, int | None]]) -> list[int]:
    newest: dict[str, int] = {}
    for i, (memory_id, day) in enumerate(rows):
        seen = newest.get(memory_id)
        if seen is None:
            newest[memory_id] = i
            continue
        before = rows[seen][1]
        if day is not None and (before is None or day > before):
            newest[memory_id] = i
    return sorted(newest.values())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcde"), st.one_of(st.none(), st.integers(0, 3))), max_size=30),
    st.integers(1, 5),
)
def test_the_newest_copy_of_each_id_as_the_row_loop_chose_it(rows: list[tuple[str, int | None]], size: int) -> None:
    state = Pass(Counter(), None)
    for start in range(0, len(rows), size):
        state.add(_batch(rows[start : start + size]), QUERY)
    state.finish()
    assert state.newest().tolist() == _reference(rows)
    assert len(state.ids) == len(rows) and state.importance is not None and len(state.importance) == len(rows)


def test_a_pass_of_no_rows_keeps_none() -> None:
    state = Pass(Counter(), None)
    state.finish()
    assert state.newest().tolist() == [] and len(state.ids) == 0
