"""The write decision (SPEC §4.1 step 3): ADD, UPDATE, INVALIDATE or NOOP against neighbours.

The deterministic default compares the new text with its most similar readable, current
neighbours in the namespace:

- UPDATE (supersede the neighbour) when it is about the same subject - cosine similarity at least
  ``revision_similarity`` and at least a third of its words shared - and carries a contradiction
  or revision signal: negation on one side only, different numbers, or a revision cue ("now",
  "instead", "no longer", "switched to", "أصبح", "بدلا", "لم يعد", ...);
- NOOP (reinforce the neighbour) when it is a near-duplicate: the same words, or similarity at
  least ``duplicate_similarity`` with no such signal;
- ADD otherwise.

Visibility is never narrowed by a decision: a write is only absorbed (NOOP) by a neighbour at
least as widely visible as it, and only supersedes (UPDATE) a neighbour at most as widely visible,
so nobody loses sight of a memory because someone else wrote a similar one.

INVALIDATE (a pure retraction that stores nothing new) is left to the LLM decision, which can
tell "forget that" from a correction; explicit retraction is ``Brain.forget``.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from cabrain.search.tokenizer import normalize, tokenize
from cabrain.types import Decision

_NEGATION = re.compile(
    r"\b(not|no|never|none|nobody|nothing|cannot|can't|don't|doesn't|didn't|won't|isn't|aren't|"
    r"wasn't|weren't|shouldn't|no longer)\b|\bلا\b|\bلم\b|\bلن\b|\bليس|\bغير\b|\bما عاد|\bلم يعد",
    re.I,
)
_REVISION = re.compile(
    r"\b(now|instead|anymore|no longer|changed|switched|moved to|replaced|actually|correction|"
    r"updated?|from now on|as of)\b|الان|بدلا|اصبح|صار|لم يعد|تغير|انتقلنا|استبدلنا|تصحيح",
    re.I,
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


_WIDTH = {"private": 0, "team": 1, "global": 2}


@dataclass(frozen=True)
class Neighbour:
    id: uuid.UUID
    content: str
    similarity: float
    visibility: str = "private"


@dataclass(frozen=True)
class WriteDecision:
    decision: Decision
    target: uuid.UUID | None  # the neighbour reinforced (NOOP) or superseded (UPDATE/INVALIDATE)
    reason: str


def _signals(new: str, old: str) -> list[str]:
    a, b = normalize(new), normalize(old)
    signals = []
    if len(_NEGATION.findall(a)) != len(_NEGATION.findall(b)):
        signals.append("negation differs")
    na, nb = set(_NUMBER.findall(a)), set(_NUMBER.findall(b))
    if na and nb and na != nb:
        signals.append("numbers differ")
    if _REVISION.search(a) and not _REVISION.search(b):
        signals.append("revision cue")
    return signals


def _overlap(a: str, b: str) -> float:
    ta, tb = set(tokenize(a)), set(tokenize(b))
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def decide(
    text: str,
    neighbours: list[Neighbour],
    *,
    duplicate_similarity: float,
    revision_similarity: float,
    visibility: str = "private",
) -> WriteDecision:
    """The deterministic decision (see the module docstring). ``neighbours``: most similar first."""
    new_tokens = tokenize(text)
    width = _WIDTH[visibility]
    for n in neighbours:
        if n.similarity < revision_similarity:
            break
        overlap = _overlap(text, n.content)
        signals = _signals(text, n.content)
        if signals and overlap >= 1 / 3 and _WIDTH[n.visibility] <= width:
            return WriteDecision(
                Decision.UPDATE, n.id, f"revises a memory about the same subject ({', '.join(signals)})"
            )
        if not signals and _WIDTH[n.visibility] >= width and (
            (new_tokens and new_tokens == tokenize(n.content)) or n.similarity >= duplicate_similarity
        ):
            return WriteDecision(
                Decision.NOOP, n.id, f"near-duplicate of an existing memory (similarity {n.similarity:.3f})"
            )
    return WriteDecision(Decision.ADD, None, "new information")
