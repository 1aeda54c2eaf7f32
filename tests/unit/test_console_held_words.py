"""How the console says held actions and an agent's usage (issue 36, item 12): every operation a
role holds has its words (an acceptance of a grant is no "share"), a held call's arguments are said
without ids or Python's spellings, a failure's reason without the API's or the CLI's fix, and a
week of usage is drawn with every day, the quiet ones included."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from cabrain import actions, gate
from cabrain.brain import Brain  # noqa: F401 - registers every operation of the Brain facade
from cabrain.serve.console.actions import details, memory_of, message_of
from cabrain.serve.console.admin import usage_charts


def test_every_held_operation_is_said_in_words() -> None:
    held = {spec.name.split(".")[-1] for spec in gate.REGISTRY.values() if spec.held}
    assert {"forget", "share", "accept_grant", "decline_grant", "reconsolidate"} <= held
    for method in held:
        words = actions.label(method)
        assert words and "_" not in words, method
    assert actions.label("accept_grant") == "accept grant" != actions.label("share") == "share"
    assert actions.label("reconsolidate") == "correct"


def test_a_held_calls_arguments_are_said_without_ids() -> None:
    memory = uuid.uuid4()
    said = details({"memory_id": str(memory), "reason": "stale", "can_write": True, "content": None})
    assert said == [("reason", "stale"), ("can write", "yes")]
    assert memory_of({"args": {"args": {"memory_id": str(memory)}}}) == memory
    assert memory_of({"args": {"args": {"old_id": str(memory)}}}) == memory  # a call kept from before issue 33
    assert memory_of({"args": {"args": {"namespace": "notes"}}}) is None
    assert memory_of({"args": {"args": {"memory_id": "not-a-uuid"}}}) is None


def test_a_failures_reason_is_its_message_without_the_other_faces_fix() -> None:
    stored = "agent 'scout' may not write namespace 'team'\n  fix: ask its owner (POST /v1/grants ...)"
    assert message_of(stored) == "agent 'scout' may not write namespace 'team'"
    assert message_of(None) == ""


@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from(["recall", "read", "embed"]), st.integers(0, 50))))
def test_a_week_of_usage_is_drawn_with_every_day(rows: list[tuple[int, str, int]]) -> None:
    report = {
        "since": "2026-11-01",
        "until": "2026-11-07",
        "rows": [{"day": f"2026-11-0{day + 1}", "op": op, "calls": calls} for day, op, calls in rows],
    }
    drawn = usage_charts(report)
    per_kind: dict[str, int] = {}
    for _, op, calls in rows:
        per_kind[op] = per_kind.get(op, 0) + calls
    assert {b.label: b.value for b in drawn["kinds"]} == per_kind
    assert drawn["usage_range"] == ("2026-11-01", "2026-11-07")
    if rows:
        assert drawn["calls"] is not None and len(drawn["calls"].dots) == 7
        assert drawn["calls"].first == "2026-11-01" and drawn["calls"].last == "2026-11-07"
    else:
        assert drawn["calls"] is None
