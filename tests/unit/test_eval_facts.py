"""The matching of ``cabrain eval facts``: a shared turn and a close text, counted both ways."""

from pathlib import Path

import numpy as np
import pytest

from cabrain.errors import InputError
from cabrain.eval_facts import corpus_of, match, own_best


def unit(*rows: list[float]) -> np.ndarray:
    a = np.asarray(rows, dtype=np.float32)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def test_a_match_needs_a_shared_turn_and_a_close_text() -> None:
    produced = [("Caroline went to a support group.", {"t3"}), ("Melanie paints.", {"t9"}), ("Hi!", {"t1"})]
    annotated = [("Caroline attended an LGBTQ support group.", {"t3"}), ("Melanie painted a sunrise.", {"t12"})]
    vp = unit([1, 0.1, 0], [0, 1, 0], [0, 0, 1])
    va = unit([1, 0, 0], [0, 1, 0.05])
    m = match(produced, annotated, vp, va, 0.6)
    # the first matches (shared t3, close); the second is close to an annotated fact but shares no turn
    assert (m.produced, m.annotated, m.covered, m.precise) == (3, 2, 1, 1)
    assert (m.coverage, round(m.precision, 3)) == (0.5, 0.333)
    assert m.examples[0]["closest"].startswith("Caroline attended")
    assert match(produced, annotated, vp, va, 0.999).covered == 0  # not close enough


def test_the_conversations_are_the_sibling_set_unless_named(tmp_path: Path) -> None:
    facts = tmp_path / "locomo-dev-facts"
    facts.mkdir()
    assert corpus_of(facts, None) == (tmp_path / "locomo-dev").resolve()
    assert corpus_of(facts, tmp_path / "other") == tmp_path / "other"
    with pytest.raises(InputError, match="--corpus"):
        corpus_of(tmp_path, None)


def test_own_best_counts_summaries_closer_to_their_own_session_than_to_its_neighbours() -> None:
    sims = np.array(
        [
            [0.8, 0.7, 0.9],  # session a1's summary: closest to a1 among conversation a (b1 is another's)
            [0.75, 0.7, 0.1],  # a2's: closer to a1 than to its own
            [0.9, 0.9, 0.9],  # turns in two sessions: not scored
        ]
    )
    produced = [{"a1:1"}, {"a2:4"}, {"a1:1", "a2:4"}]
    wanted = [{"a1:1", "a1:2"}, {"a2:4"}, {"b1:1"}]
    assert own_best(["a", "a", "a"], ["a", "a", "b"], produced, wanted, sims) == 0.5
    assert own_best([], ["a"], [], wanted[:1], np.zeros((0, 1))) is None
