import math

import pytest

from cabrain.errors import InputError
from cabrain.eval import load_set, metrics, percentiles


def test_metrics_on_a_hand_made_fixture():
    ranked = [["a", "b", "c"], ["x", "y", "g1"], ["n1", "n2", "n3"], ["g2", "z", "g3"]]
    gold = [["a"], ["g1"], ["missing"], ["g2", "g3"]]
    m = metrics(ranked, gold, [1, 3])
    assert m["recall_any@1"] == pytest.approx(2 / 4)
    assert m["recall_any@3"] == pytest.approx(3 / 4)
    assert m["recall_all@1"] == pytest.approx((1 + 0 + 0 + 0.5) / 4)
    assert m["recall_all@3"] == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert m["mrr"] == pytest.approx((1 + 1 / 3 + 0 + 1) / 4)
    ndcg_q4 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert m["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4) + 0 + ndcg_q4) / 4)


def test_percentiles_use_the_nearest_rank():
    p = percentiles([float(i) for i in range(1, 101)])
    assert (p["p50"], p["p95"], p["p99"]) == (50.0, 95.0, 99.0)


def test_a_set_with_unknown_gold_ids_is_refused(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"id": "m1", "namespace": "n", "text": "hello"}\n')
    (tmp_path / "queries.jsonl").write_text('{"id": "q1", "namespace": "n", "query": "hi", "gold": ["m2"]}\n')
    with pytest.raises(InputError, match="not in the corpus: m2"):
        load_set(tmp_path)


def test_malformed_lines_are_reported_with_their_location(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"id": "m1", "namespace": "n", "text": "hello"}\n{oops\n')
    (tmp_path / "queries.jsonl").write_text("")
    with pytest.raises(InputError, match=r"corpus.jsonl:2 is not valid JSON"):
        load_set(tmp_path)


def test_a_conversation_turn_is_loaded_as_a_chat_source_loads_it():
    """No thread is invented for a turn that has none: its sitting is found from time on the write path."""
    from cabrain.eval import _metadata

    turn = {"id": "c:D1:3", "namespace": "c", "text": "A: hi", "speaker": "A", "time": "2023-05-08T13:56:00"}
    assert _metadata(turn) == {"eval_id": "c:D1:3", "speaker": "A"}
    assert _metadata({**turn, "thread": "t9"})["thread"] == "t9"
    assert _metadata({"id": "p1", "namespace": "c", "text": "a passage", "time": "2023-05-08"}) == {"eval_id": "p1"}
