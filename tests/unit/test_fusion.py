import uuid

import pytest

from cabrain.search.fusion import fuse


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
