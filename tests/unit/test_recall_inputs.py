"""A recall's ``as_of`` and ``context`` (issue 34) as every face hands them to the core: one form
(aware times, tuples of turns), the rules they meet, and the L1 cache keyed on both."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cabrain import edge
from cabrain.errors import InputError
from cabrain.search.recall import cache_digest, validate
from cabrain.serve.console import filters
from cabrain.serve.schemas import CaptureRecallIn, RecallIn
from cabrain.store.browse import BrowseFilters
from cabrain.types import MAX_CONTEXT_TURNS, RecallQuery, to_json

LIMITS = {"max_k": 50, "max_chars": 100}
WHEN = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)


def check(**fields: object) -> None:
    validate(RecallQuery("what changed?", "proj", **fields), **LIMITS)  # type: ignore[arg-type]


def test_a_naive_as_of_is_utc_and_a_list_of_turns_a_tuple_whichever_face_built_the_query() -> None:
    query = RecallQuery("q", "proj", as_of=datetime(2026, 3, 1, 12, 30), context=["hi", "about billing"])  # type: ignore[arg-type]
    assert query.as_of == WHEN and query.as_of.tzinfo is UTC
    assert query.context == ("hi", "about billing")
    body = RecallIn(query="q", namespace="proj", as_of="2026-03-01T14:30:00+02:00", context=["hi", "about billing"])
    from_http = body.to_query()
    assert from_http.as_of == WHEN and from_http.context == ("hi", "about billing")
    # and back: the client sends the query as JSON the route reads into the same query
    assert RecallIn(**to_json(query)).to_query() == query


def test_turns_meet_the_querys_rules_and_at_most_twenty_are_taken() -> None:
    check(context=("fine", "  ", "x" * 100))  # a blank turn says nothing and is passed over
    for turns, message in (
        (("x" * 101,), "context turn 1 is 101 characters, the limit is 100"),
        (("ok", "a\x00b"), "context turn 2 contains a NUL character"),
        (("\ud800",), "context turn 1 is not valid UTF-8"),
        ((3,), "context turn 1 must be text, got int"),
        (("t",) * (MAX_CONTEXT_TURNS + 1), f"at most {MAX_CONTEXT_TURNS} are taken"),
    ):
        with pytest.raises(InputError, match=message.replace("(", r"\(")):
            check(context=turns)
    with pytest.raises(InputError, match="context must be a list"):
        check(context="one turn as a string")
    check(context=("t",) * MAX_CONTEXT_TURNS)


def test_as_of_is_a_time_the_brain_keeps() -> None:
    check(as_of=WHEN)
    check(as_of=datetime(1, 1, 2, tzinfo=UTC))
    check(as_of=datetime(9999, 12, 30, tzinfo=UTC))
    for bad in (datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 12, tzinfo=UTC)):
        with pytest.raises(InputError, match=r"as_of: .* is outside the times CaBrain keeps"):
            check(as_of=bad)
    with pytest.raises(InputError, match="as_of must be a date and time"):
        check(as_of="2026-03-01")


@given(st.datetimes(timezones=st.none() | st.timezones()))
def test_any_datetime_as_of_is_taken_as_an_aware_time_or_refused_clearly(moment: datetime) -> None:
    try:
        aware = edge.check_moment(moment, "as_of")
    except InputError as exc:
        assert exc.message.startswith("as_of: ") and "outside the times CaBrain keeps" in exc.message
        with pytest.raises(InputError):
            BrowseFilters(as_of=moment)
        return
    assert aware.tzinfo is not None
    assert aware == (moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    assert BrowseFilters(as_of=moment).as_of == aware
    validate(RecallQuery("q", "proj", as_of=moment), **LIMITS)


def test_the_cache_key_tells_apart_every_as_of_and_every_dialogue() -> None:
    base = RecallQuery("which host?", "proj")
    variants = [
        base,
        dataclasses.replace(base, as_of=WHEN),
        dataclasses.replace(base, as_of=WHEN + timedelta(microseconds=1)),
        dataclasses.replace(base, context=("about staging",)),
        dataclasses.replace(base, context=("about production",)),
        dataclasses.replace(base, context=("about staging", "and the database")),
    ]
    assert len({cache_digest("alice", q) for q in variants}) == len(variants)
    # one moment written in two zones, or naive, is one key
    east = RecallQuery("which host?", "proj", as_of=WHEN.astimezone(timezone(timedelta(hours=3))))
    naive = RecallQuery("which host?", "proj", as_of=WHEN.replace(tzinfo=None))
    assert cache_digest("alice", naive) == cache_digest("alice", dataclasses.replace(base, as_of=WHEN))
    assert east.as_of == WHEN


def test_the_capture_routes_recall_takes_turns_as_a_bounded_list() -> None:
    assert CaptureRecallIn(query="q").context == []
    assert CaptureRecallIn(query="q", context=["a", "b"]).context == ["a", "b"]
    with pytest.raises(ValueError, match="at most 20 items"):
        CaptureRecallIn(query="q", context=["t"] * (MAX_CONTEXT_TURNS + 1))
    with pytest.raises(ValueError, match="at most 20 items"):
        RecallIn(query="q", namespace="proj", context=["t"] * (MAX_CONTEXT_TURNS + 1))


def test_the_consoles_as_of_is_a_moment_or_the_end_of_a_day_in_utc() -> None:
    assert filters.as_of({}) is None
    assert filters.as_of({"as_of": "2026-03-01"}) == datetime(2026, 3, 2, tzinfo=UTC)
    assert filters.as_of({"as_of": "2026-03-01T12:30"}) == WHEN  # a datetime-local field: UTC
    assert filters.as_of({"as_of": "2026-03-01T14:30:00+02:00"}) == WHEN
    assert filters.browse_filters({"as_of": "2026-03-01T12:30"}).as_of == WHEN
    with pytest.raises(InputError, match="as_of: 'soon' is not a date"):
        filters.as_of({"as_of": "soon"})
