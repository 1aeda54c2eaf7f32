import uuid

from cabrain.search.fusion import fuse


def row(importance=0.5, distance=None, score=None):
    data = {"id": uuid.uuid4(), "importance": importance}
    if distance is not None:
        data["distance"] = distance
    if score is not None:
        data["score"] = score
    return data


def test_rrf_rewards_agreement_between_lists():
    a, b, c = row(distance=0.1), row(distance=0.2), row(distance=0.3)
    fused = fuse([a, b, c], [dict(c, score=9.0), dict(b, score=5.0)], bm25_coverage=1.0, salience_weight=0)
    assert [x.row["id"] for x in fused] == [c["id"], b["id"], a["id"]]
    top = fused[0]
    assert (top.vector_rank, top.bm25_rank) == (3, 1)
    assert abs(top.fused - (1 / 63 + 1 / 61)) < 1e-12
    assert abs(top.vector_similarity - 0.7) < 1e-9


def test_a_keyword_list_without_signal_does_not_reorder_the_vector_list():
    v = [row(distance=0.1 * i) for i in range(1, 6)]
    noise = [dict(r, score=1.0) for r in reversed(v)]
    fused = fuse(v, noise, bm25_coverage=0.0, salience_weight=0)
    assert [x.row["id"] for x in fused] == [r["id"] for r in v]


def test_partial_coverage_weighs_bm25_less_than_full_coverage():
    v = [row(distance=0.05 * i) for i in range(1, 11)]
    kw = [dict(v[8], score=3.0)]
    full = fuse(v, kw, bm25_coverage=1.0, salience_weight=0)
    weak = fuse(v, kw, bm25_coverage=0.3, salience_weight=0)
    assert full[0].row["id"] == v[8]["id"]
    assert weak[0].row["id"] == v[0]["id"]
    assert [c.row["id"] for c in weak].index(v[8]["id"]) < 8, "still lifted, a little"


def test_salience_breaks_near_ties_but_does_not_lift_unrelated_memories():
    important, plain = row(importance=1.0, distance=0.2), row(importance=0.0, distance=0.1)
    tie = fuse([plain, important], [], bm25_coverage=0, salience_weight=0.5)
    assert tie[0].row["id"] == important["id"]
    far = [row(importance=0.0, distance=0.01 * i) for i in range(10)] + [row(importance=1.0, distance=0.9)]
    ranked = fuse(far, [], bm25_coverage=0, salience_weight=0.02)
    position = [c.row["importance"] for c in ranked].index(1.0)
    assert position >= len(far) - 3, "a nudge moves a memory a rank or two, not up the list"
