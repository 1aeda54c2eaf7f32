"""The sleep bench's synthetic workload has the similarity structure its docstring promises."""

from __future__ import annotations

from collections import Counter

import numpy as np

from cabrain.bench.sleep_workload import workload


def test_groups_duplicates_and_facts_sit_on_the_right_side_of_the_thresholds() -> None:
    rng = np.random.default_rng(3)
    mean = rng.normal(size=384).astype(np.float32)
    mean /= np.linalg.norm(mean)
    rows = list(workload(3000, ["big", "a", "b"], mean, seed=4))
    assert len(rows) == 3000
    share = Counter(r["namespace"] for r in rows)
    assert 0.45 < share["big"] / 3000 < 0.55  # the first namespace holds half
    kinds = Counter(r["memory_type"] for r in rows)
    assert 0.03 < kinds["semantic"] / 3000 < 0.12
    vectors = np.array([r["embedding"] for r in rows])
    sims = vectors @ vectors.T
    # consecutive rows of one group share their first words' source sentence and their time
    same_group = [
        (i, i + 1)
        for i in range(len(rows) - 1)
        if rows[i]["memory_type"] == "episodic"
        and rows[i + 1]["memory_type"] == "episodic"
        and (rows[i + 1]["valid_at"] - rows[i]["valid_at"]).total_seconds() == 600
    ]
    within = np.array([sims[i, j] for i, j in same_group])
    assert len(within) > 1000
    assert np.median(within) > 0.93  # paraphrases and duplicates cluster (threshold 0.92)
    unrelated = sims[np.triu_indices(len(rows), k=50)]
    assert np.percentile(unrelated, 99.9) < 0.9  # different groups do not
    facts = [i for i, r in enumerate(rows) if r["memory_type"] == "semantic"]
    pairs = [
        (i, i + 1)
        for i in facts
        if i + 1 in facts and rows[i]["content"].rsplit(" ", 1)[0] == rows[i + 1]["content"].rsplit(" ", 1)[0]
    ]
    assert pairs and min(sims[i, j] for i, j in pairs) > 0.95  # contradicting facts are about one subject
