"""A dialogue as the query (cabrain.search.dialogue) and the eval's dialogue shapes (cabrain.eval_dialogue)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cabrain.eval_dialogue import FILLER, dialogue, speakers_by_namespace
from cabrain.search import dialogue as d
from cabrain.settings import load_settings


@pytest.fixture
def settings(tmp_path):
    return load_settings(home=tmp_path)


def test_only_the_latest_turns_count_and_the_latest_weighs_most(settings):
    turns = d.counted(["one", "two", " ", "three", "four"], settings)
    assert turns == ["two", "three", "four"]  # the latest 3 that say something, oldest first
    assert d.keyword_context(turns, settings) == [("four", 0.5), ("three", 0.25), ("two", 0.125)]
    off = settings.model_copy(update={"recall_context_turns": 0})
    assert d.counted(["one"], off) == []
    assert d.keyword_context(["x"], settings.model_copy(update={"recall_context_weight": 0})) == []


@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=4, max_size=4), st.floats(0, 1))
def test_the_mixed_vector_is_a_unit_vector_leaning_to_the_query(raw, weight):
    own = [1.0, 0.0, 0.0, 0.0]
    norm = math.sqrt(sum(x * x for x in raw))
    other = [x / norm for x in raw] if norm > 1e-6 else [0.0, 1.0, 0.0, 0.0]
    mixed = d.combine(own, other, weight)
    length = math.sqrt(sum(x * x for x in mixed))
    assert length == pytest.approx(1.0) or length == 0
    # never further from the query's own direction than the dialogue's
    assert (
        sum(a * b for a, b in zip(mixed, own, strict=True))
        >= sum(a * b for a, b in zip(other, own, strict=True)) - 1e-9
    )


def test_the_eval_asks_after_filler_or_with_the_person_in_an_earlier_turn():
    assert dialogue("What did Caroline paint?", "filler", ["Caroline"]) == (FILLER, "What did Caroline paint?")
    context, latest = dialogue(
        "What did Caroline's mum and Mel paint for Melanie?", "referent", ["Caroline", "Mel", "Melanie"]
    )
    assert latest == "What did their mum and they paint for they?"
    assert context[-1] == "I want to ask you something about Caroline and Mel and Melanie."
    assert dialogue("When is it?", "referent", ["Caroline"]) == (FILLER, "When is it?")
    with pytest.raises(ValueError, match="unknown dialogue shape"):
        dialogue("q", "nope", [])
    rows = [{"namespace": "a", "speaker": "X"}, {"namespace": "a"}, {"namespace": "b", "speaker": "Y"}]
    assert speakers_by_namespace(rows) == {"a": {"X"}, "b": {"Y"}}
