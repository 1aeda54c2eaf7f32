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


def _terms(own: dict[str, int], earlier: dict[str, int], n_docs: int = 100):
    from cabrain.store.keyword import QueryTerms

    rows = [
        {"term": t, "qtf": 1.0 if t in own else 0.5, "df": df, "doc_count": n_docs, "total_len": 10 * n_docs}
        for t, df in {**own, **earlier}.items()
    ]
    return QueryTerms("q", "ns", rows, frozenset(earlier), frozenset(earlier))


def test_earlier_turns_have_a_say_only_where_the_latest_says_less():
    # a question with rare words after common greetings: no say
    assert d.say(_terms({"adoption": 2, "agency": 3}, {"hi": 60, "day": 40, "good": 50})) == 0
    # "could you look that up?" (nothing the namespace knows) after a question: its full say
    assert d.say(_terms({"look": None}, {"adoption": 2, "agency": 3})) == pytest.approx(1.0)
    # in between: the say grows as the latest turn says less
    some = d.say(_terms({"kids": 30}, {"camping": 3, "beach": 4}))
    assert 0 < some < 1
    assert d.say(_terms({"kids": 30}, {})) == 0 and d.say(None) == 0
    scaled = d.scaled(_terms({"kids": 30}, {"camping": 3}), 0.5)
    assert {r["term"]: r["qtf"] for r in scaled.rows} == {"kids": 1.0, "camping": 0.25}
    assert [r["term"] for r in d.scaled(_terms({"kids": 30}, {"camping": 3}), 0).rows] == ["kids"]
