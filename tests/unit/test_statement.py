"""Named SQL parameters (cabrain/store/statement.py): numbered once, casts and literals left alone,
and a call that names a parameter wrongly is refused instead of binding values to the wrong places."""

from __future__ import annotations

import pytest

from cabrain.store import access
from cabrain.store.statement import Statement


def test_names_are_numbered_in_order_of_first_use_and_reused() -> None:
    s = Statement("SELECT :b::int + :a, :b, '12:30'::time, x::text FROM t WHERE y = :a")
    assert s.names == ("b", "a")
    assert s.sql == "SELECT $1::int + $2, $1, '12:30'::time, x::text FROM t WHERE y = $2"
    assert s.args(a=1, b=2) == (2, 1)
    assert s.args({"a": 1, "b": 0}, b=2) == (2, 1)  # named values win over the mapping


def test_a_missing_or_unknown_name_is_refused() -> None:
    s = Statement("SELECT :a, :b")
    with pytest.raises(TypeError, match=r"missing \['b'\]"):
        s.args(a=1)
    with pytest.raises(TypeError, match=r"unknown \['c'\]"):
        s.args(a=1, b=2, c=3)


def test_positional_and_named_parameters_do_not_mix() -> None:
    with pytest.raises(ValueError, match="cannot also use"):
        Statement("SELECT $1, :a")


def test_the_shared_access_fragments_take_the_same_names_wherever_they_are_included() -> None:
    wrapped = Statement(f"SELECT 1 FROM t WHERE :limit > 0 AND EXISTS (WITH {access.ACCESS_CTE} SELECT 1)")
    assert set(wrapped.names) == {"limit", "agent", "namespace"}
    recall = Statement(f"WITH {access.ACCESS_CTE} SELECT 1 FROM memories m WHERE {access.RECALL_FILTER}")
    filters = {"include_invalid", "networks", "memory_types", "source_kinds", "valid_from", "valid_to"}
    filters |= {"sitting_summaries", "as_of"}
    assert set(recall.names) == {"namespace", "agent"} | filters
