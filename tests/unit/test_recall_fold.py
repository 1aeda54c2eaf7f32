"""Recall's fold (cabrain.search.recall.fold): a distilled fact and a turn it came from are one answer."""

from __future__ import annotations

import uuid

from cabrain.search.fusion import Candidate
from cabrain.search.recall import fold


def _candidates(n: int) -> list[Candidate]:
    return [Candidate(row={"id": uuid.UUID(int=i + 1)}) for i in range(n)]


def _ids(kept) -> list[tuple[int, tuple[int, ...]]]:
    return [(c.row["id"].int, tuple(x.int for x in covers)) for c, covers in kept]


def _pair(fact: int, turn: int) -> dict[str, uuid.UUID]:
    return {"memory_id": uuid.UUID(int=fact), "source_id": uuid.UUID(int=turn)}


def test_without_links_the_top_k_are_kept_in_order() -> None:
    assert _ids(fold(_candidates(5), [], 3)) == [(1, ()), (2, ()), (3, ())]


def test_a_lower_turn_folds_into_its_fact_and_frees_a_place() -> None:
    # 1 is a fact distilled from turn 3: the answer is 1 (covering 3), 2, 4
    assert _ids(fold(_candidates(5), [_pair(1, 3)], 3)) == [(1, (3,)), (2, ()), (4, ())]


def test_a_lower_fact_folds_into_its_turn() -> None:
    assert _ids(fold(_candidates(4), [_pair(2, 1)], 2)) == [(1, (2,)), (3, ())]


def test_two_facts_of_one_turn_are_one_answer_with_it() -> None:
    assert _ids(fold(_candidates(4), [_pair(1, 3), _pair(2, 3)], 3)) == [(1, (2, 3)), (4, ())]


def test_candidates_below_k_still_fold_into_a_kept_answer() -> None:
    assert _ids(fold(_candidates(6), [_pair(1, 6)], 2)) == [(1, (6,)), (2, ())]


def test_a_fact_whose_turn_is_no_candidate_stands_alone() -> None:
    assert _ids(fold(_candidates(3), [_pair(1, 99)], 3)) == [(1, ()), (2, ()), (3, ())]


def test_sum_ranks_a_turn_and_its_fact_together_above_a_single_better_one() -> None:
    ranked = _candidates(4)
    for c, score in zip(ranked, (0.5, 0.4, 0.3, 0.2), strict=True):
        c.fused = score
    # 2 (0.4) and its fact 3 (0.3) sum to 0.7 > 0.5: first, shown as the better of the two
    assert _ids(fold(ranked, [_pair(3, 2)], 3, pool="sum")) == [(2, (3,)), (1, ()), (4, ())]
    assert _ids(fold(ranked, [_pair(3, 2)], 3, pool="best")) == [(1, ()), (2, (3,)), (4, ())]
    # blend: 0.4 + 0.5 x 0.3 = 0.55 > 0.5; with a weight of 0.25, 0.475 < 0.5
    assert _ids(fold(ranked, [_pair(3, 2)], 3, pool="blend", weight=0.5)) == [(2, (3,)), (1, ()), (4, ())]
    assert _ids(fold(ranked, [_pair(3, 2)], 3, pool="blend", weight=0.25)) == [(1, ()), (2, (3,)), (4, ())]
    # a reranked list keeps the reranker's order whatever the pool
    assert _ids(fold(ranked, [_pair(3, 2)], 3, pool="sum", reranked=True)) == [(1, ()), (2, (3,)), (4, ())]


def test_fewer_candidates_than_k() -> None:
    assert _ids(fold(_candidates(2), [_pair(1, 2)], 5)) == [(1, (2,))]
