"""Importance at write time (the amygdala, SPEC §4.1 step 4): never a flat 0.5.

    importance = clamp(0.10 + 0.30 * novelty + 0.25 * cue + 0.15 * source + 0.10 * recency
                       + 0.20 * revision + 0.30 * flagged, 0, 1)

- novelty: distance to the nearest existing memory in the namespace, rescaled so that a
  near-duplicate scores 0 and anything at or below ``novelty_floor`` similarity scores 1
  (embedding models rarely give unrelated texts a similarity near 0);
- cue: the strongest content cue - a decision, a rejected approach, an error, a preference, a
  learning - in English or Arabic, each with its weight;
- source: the source kind's weight (settings ``source_weights``), 0.5 when unknown;
- recency: how recent the memory's own time is, ``exp(-age_days / 30)``;
- revision: the memory corrects or supersedes an earlier one (a change of fact is news, even
  though it is close to what was known);
- flagged: the caller said it matters.

An explicit importance from the caller wins over all of this.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime

from cabrain.text.tokenizer import normalize

CUES: list[tuple[str, float, re.Pattern[str]]] = [
    (
        "decision",
        1.0,
        re.compile(
            r"\b(decided|decision|we will|we'll|agreed|going with|chose|settled on|from now on)\b"
            r"|قررنا|قرار|اتفقنا|سنعتمد|اخترنا",
            re.I,
        ),
    ),
    (
        "rejected",
        0.9,
        re.compile(
            r"\b(rejected|ruled out|won't work|doesn't work|abandoned|instead of|gave up on|do not use|don't use)\b"
            r"|رفضنا|استبعدنا|لا يعمل|بدلا من|لا تستخدم",
            re.I,
        ),
    ),
    (
        "error",
        0.8,
        re.compile(
            r"\b(error|exception|failed|failure|bug|crash|traceback|broken|regression)\b"
            r"|خطا|فشل|عطل|مشكله",
            re.I,
        ),
    ),
    (
        "preference",
        0.7,
        re.compile(
            r"\b(prefer|prefers|always|never|likes?|dislikes?|favou?rite|must)\b"
            r"|افضل|يفضل|نفضل|دائما|ابدا|يجب",
            re.I,
        ),
    ),
    (
        "learning",
        0.7,
        re.compile(
            r"\b(learned|lesson|turns out|realized|remember that|note that|important)\b"
            r"|تعلمنا|درس|اتضح|تذكر|ملاحظه|مهم",
            re.I,
        ),
    ),
]


def content_cue(text: str) -> tuple[str | None, float]:
    """The strongest cue in ``text`` and its weight (None, 0 when there is none)."""
    folded = normalize(text)
    best: tuple[str | None, float] = (None, 0.0)
    for name, weight, pattern in CUES:
        if weight > best[1] and pattern.search(folded):
            best = (name, weight)
    return best


def importance(
    *,
    text: str,
    nearest_similarity: float | None,
    source_kind: str | None,
    valid_at: datetime,
    flagged: bool,
    revision: bool = False,
    source_weights: Mapping[str, float],
    novelty_floor: float = 0.6,
    now: datetime | None = None,
) -> float:
    if nearest_similarity is None:
        novelty = 1.0
    else:
        novelty = min(1.0, max(0.0, (1.0 - nearest_similarity) / (1.0 - novelty_floor)))
    _, cue = content_cue(text)
    source = source_weights.get(source_kind or "", 0.5)
    age_days = max(0.0, ((now or datetime.now(UTC)) - valid_at).total_seconds() / 86400)
    recency = math.exp(-age_days / 30)
    score = 0.10 + 0.30 * novelty + 0.25 * cue + 0.15 * source + 0.10 * recency
    score += (0.20 if revision else 0.0) + (0.30 if flagged else 0.0)
    return round(min(1.0, max(0.0, score)), 4)
