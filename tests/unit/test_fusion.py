import json
import uuid

import pytest

from cabrain.search.fusion import fuse
from cabrain.search.speakers import without_names


def row(importance=0.5, distance=None, score=None):
    data = {"id": uuid.uuid4(), "importance": importance}
    if distance is not None:
        data["distance"] = distance
    if score is not None:
        data["score"] = score
    return data


@pytest.mark.parametrize("method", ["score", "rrf"])
def test_agreement_between_lists_wins(method):
    a, b, c = row(distance=0.10), row(distance=0.12), row(distance=0.14)
    fused = fuse(
        [a, b, c], [dict(c, score=9.0), dict(b, score=5.0)], bm25_coverage=1.0, salience_weight=0, method=method
    )
    assert fused[0].row["id"] == c["id"]
    assert (fused[0].vector_rank, fused[0].bm25_rank) == (3, 1)
    assert fused[0].vector_similarity == pytest.approx(0.86)


def test_rrf_uses_ranks_with_k_60():
    a, b = row(distance=0.1), row(distance=0.2)
    [top, _] = fuse([a, b], [dict(b, score=1.0)], bm25_coverage=1.0, salience_weight=0, method="rrf")
    assert top.row["id"] == b["id"]
    assert top.fused == pytest.approx(1 / 62 + 1 / 61)


def test_score_fusion_normalises_each_list():
    a, b, c = row(distance=0.10), row(distance=0.30), row(distance=0.50)
    fused = fuse([a, b, c], [dict(c, score=4.0), dict(b, score=2.0)], bm25_coverage=1.0, salience_weight=0, alpha=0.4)
    by_id = {x.row["id"]: x.fused for x in fused}
    assert by_id[a["id"]] == pytest.approx(0.4 * 1.0)
    assert by_id[b["id"]] == pytest.approx(0.4 * 0.5 + 0.6 * 0.5)
    assert by_id[c["id"]] == pytest.approx(0.4 * 0.0 + 0.6 * 1.0)


@pytest.mark.parametrize("method", ["score", "rrf"])
def test_a_keyword_list_without_signal_does_not_reorder_the_vector_list(method):
    v = [row(distance=0.1 * i) for i in range(1, 6)]
    noise = [dict(r, score=float(i)) for i, r in enumerate(v, start=1)]
    fused = fuse(v, noise, bm25_coverage=0.0, salience_weight=0, method=method)
    assert [x.row["id"] for x in fused] == [r["id"] for r in v]


def test_partial_coverage_weighs_bm25_less_than_full_coverage():
    v = [row(distance=0.05 * i) for i in range(1, 11)]
    kw = [dict(v[8], score=3.0)]
    full = fuse(v, kw, bm25_coverage=1.0, salience_weight=0)
    weak = fuse(v, kw, bm25_coverage=0.3, salience_weight=0, coverage_power=2)
    assert full[0].row["id"] == v[8]["id"]
    assert weak[0].row["id"] == v[0]["id"]


@pytest.mark.parametrize("method", ["score", "rrf"])
def test_salience_breaks_near_ties_but_does_not_lift_unrelated_memories(method):
    important, plain = row(importance=1.0, distance=0.2001), row(importance=0.0, distance=0.2)
    tie = fuse([plain, important], [], bm25_coverage=0, salience_weight=0.5, method=method)
    assert tie[0].row["id"] == important["id"]
    far = [row(importance=0.0, distance=0.05 + 0.01 * i) for i in range(10)] + [row(importance=1.0, distance=0.9)]
    ranked = fuse(far, [], bm25_coverage=0, salience_weight=0.02, method=method)
    position = [c.row["importance"] for c in ranked].index(1.0)
    assert position >= len(far) - 3, "a nudge moves a memory a rank or two, not up the list"


# --- conversations (issue 19) ------------------------------------------------------------------
def turn(distance, thread=None, speaker=None, as_text=True, sitting=None):
    data = row(distance=distance)
    meta = {k: v for k, v in (("thread", thread), ("speaker", speaker), ("sitting", sitting)) if v is not None}
    data["metadata"] = json.dumps(meta) if as_text else meta
    return data


@pytest.mark.parametrize("method", ["score", "rrf"])
def test_without_threads_the_cohesion_term_leaves_the_order_alone(method):
    plain = [turn(0.1 + 0.03 * i) for i in range(8)]
    off = fuse(plain, [], bm25_coverage=0, method=method, salience_weight=0)
    on = fuse(plain, [], bm25_coverage=0, method=method, salience_weight=0, thread_cohesion=0.4)
    assert [c.row["id"] for c in on] == [c.row["id"] for c in off]


@pytest.mark.parametrize("method", ["score", "rrf"])
def test_a_sitting_lifts_its_turns_over_a_lone_better_match(method):
    lone = turn(0.20, thread="other")
    sitting = [turn(0.21, thread="s"), turn(0.22, thread="s"), turn(0.23, thread="s")]
    rest = [turn(0.3 + 0.05 * i) for i in range(6)]  # the list's tail, singletons
    ranked = fuse([lone, *sitting, *rest], [], bm25_coverage=0, method=method, salience_weight=0, thread_cohesion=0.4)
    assert ranked[0].row["id"] == sitting[0]["id"]
    boosts = {c.row["id"]: c.thread_boost for c in ranked}
    assert min(boosts[t["id"]] for t in sitting) > boosts[lone["id"]] > 0
    alone = fuse([lone, *sitting, *rest], [], bm25_coverage=0, method=method, salience_weight=0)
    assert alone[0].row["id"] == lone["id"] and alone[0].thread_boost == 0


@pytest.mark.parametrize("as_text", [True, False])
def test_the_one_speaker_named_is_nudged(as_text):
    mel, caro = turn(0.30, speaker="Melanie", as_text=as_text), turn(0.29, speaker="Caroline", as_text=as_text)
    rest = [turn(0.4 + 0.05 * i, speaker="Caroline", as_text=as_text) for i in range(8)]
    ranked = fuse(
        [caro, mel, *rest],
        [],
        bm25_coverage=0,
        salience_weight=0,
        query="What did Melanie's kids paint?",
        speaker_weight=0.1,
    )
    assert ranked[0].row["id"] == mel["id"] and ranked[0].speaker_boost == pytest.approx(0.1)
    both = fuse(
        [caro, mel, *rest],
        [],
        bm25_coverage=0,
        salience_weight=0,
        query="What did Melanie and Caroline paint?",
        speaker_weight=0.1,
    )
    assert both[0].row["id"] == caro["id"] and all(c.speaker_boost == 0 for c in both)
    nobody = fuse(
        [caro, mel, *rest], [], bm25_coverage=0, salience_weight=0, query="What was painted?", speaker_weight=0.1
    )
    assert all(c.speaker_boost == 0 for c in nobody)


def test_the_query_is_embedded_without_the_speakers_it_names():
    assert without_names("What did Melanie's kids paint, Melanie?", [("melanie",)]) == "What did kids paint, ?"
    assert without_names("When did John Smith call?", [("john", "smith")]) == "When did call?"
    assert without_names("ماذا قال أحمد عن المشروع؟", [("احمد",)]) == "ماذا قال عن المشروع؟"
    assert without_names("Melanie", [("melanie",)]) == "Melanie"  # nothing would be left: kept whole
    assert without_names("Who is Mel?", [("melanie",)]) == "Who is Mel?"


def test_a_found_sitting_is_the_cohesion_key_and_an_old_thread_still_is():
    # turns of one whole-chat thread in two found sittings: only the sitting's own turns cohere
    lone = turn(0.20, thread="chat", sitting="chat@2023-05-12T19:02:00Z")
    sitting = [turn(0.21 + 0.01 * i, thread="chat", sitting="chat") for i in range(3)]
    old = turn(0.5, thread="chat")  # kept before sittings were found: its thread is its sitting
    rest = [turn(0.3 + 0.05 * i) for i in range(6)]
    ranked = fuse(
        [lone, *sitting, old, *rest], [], bm25_coverage=0, salience_weight=0, thread_cohesion=0.4, method="score"
    )
    boosts = {c.row["id"]: c.thread_boost for c in ranked}
    assert ranked[0].row["id"] == sitting[0]["id"]
    assert boosts[old["id"]] == boosts[sitting[0]["id"]] > boosts[lone["id"]] > 0


def test_a_dialogue_names_the_speaker_when_the_latest_turn_does_not():
    mel, caro = turn(0.30, speaker="Melanie"), turn(0.29, speaker="Caroline")
    rest = [turn(0.4 + 0.05 * i, speaker="Caroline") for i in range(8)]

    def nudged(query, context):
        ranked = fuse(
            [caro, mel, *rest], [], bm25_coverage=0, salience_weight=0, query=query, speaker_weight=0.1, context=context
        )
        return {c.row["id"] for c in ranked if c.speaker_boost}

    assert nudged("What did they paint?", ["Hi!", "Tell me about Melanie."]) == {mel["id"]}
    # the nearest turn that names one decides; the latest turn's own name comes first
    assert nudged("What did they paint?", ["Tell me about Melanie.", "And about Caroline?"]) == {
        caro["id"],
        *(r["id"] for r in rest),
    }
    assert nudged("What did Melanie paint?", ["Tell me about Caroline."]) == {mel["id"]}
    assert nudged("What did they paint?", ["Hi!", "Hello."]) == set()
