"""The cold index's word counts (cold_index_terms): a build merges the batches' counts as it goes,
so that its memory grows with the words and clusters, not the rows; merged in any grouping, they
are the counts of all the rows at once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cabrain.store.cold_words import merge_pairs, word_pairs, words_of

WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), max_size=5)


def _terms(rows: list[list[str]]) -> pa.Array:
    return pa.array([(" " + "  ".join(words) + " ") if words else "" for words in rows], pa.string())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(WORDS, st.integers(0, 3)), min_size=1, max_size=40), st.integers(1, 7), st.integers(1, 4))
def test_merged_as_it_goes_the_counts_are_those_of_all_rows(rows: list, size: int, every: int) -> None:
    words = [w for w, _ in rows]
    clusters = np.asarray([c for _, c in rows], dtype=np.int32)
    whole = words_of([word_pairs(_terms(words), clusters)])
    pairs: list[pa.Table] = []
    for start in range(0, len(rows), size):
        pairs.append(word_pairs(_terms(words[start : start + size]), clusters[start : start + size]))
        if len(pairs) >= every:
            pairs = [merge_pairs(pairs)]
    assert sorted(words_of(pairs)) == sorted(whole)
    for term, df, found in whole:  # each word: the rows holding it, and their clusters
        holding = [i for i, w in enumerate(words) if term in w]
        assert df == len(holding) and found == sorted({int(clusters[i]) for i in holding})
