"""The decisions: ADD, UPDATE, INVALIDATE or NOOP for a write, and sleep's dedup and reconsolidation tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from cabrain.types import Decision
from cabrain.write.decision.comparison import compare

WIDTH = {"private": 0, "team": 1, "global": 2}
RETRACTION_MARGIN = 0.1  # a retraction restates less of what it withdraws: it may be this much less similar


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
    similarity: float | None = None  # to the target


def judge(
    new: str,
    old: str,
    similarity: float,
    *,
    duplicate_similarity: float,
    revision_similarity: float,
) -> tuple[Decision, str]:
    """The decision for one pair (no visibility rules): what :func:`decide` applies per neighbour."""
    c = compare(new, old)
    if c.retraction and similarity >= revision_similarity - RETRACTION_MARGIN:
        return (
            Decision.INVALIDATE,
            f"retracts a memory about the same subject ({', '.join(c.signals)})",
        )
    if not c.same_subject:
        return Decision.ADD, f"about another subject ({c.subject_change})"
    if not c.changed and not c.negation_differs:
        return (
            Decision.NOOP,
            f"says the same as an existing memory (similarity {similarity:.3f})",
        )
    if similarity < revision_similarity:
        return Decision.ADD, "new information"
    valued = c.numbers_differ or c.names_differ or c.negation_differs or c.revision_cue
    if not valued and similarity >= duplicate_similarity:
        return (
            Decision.NOOP,
            f"near-duplicate of an existing memory (similarity {similarity:.3f})",
        )
    if c.revision_cue or (c.shared_predicate and (c.replaced or c.negation_differs)):
        return (
            Decision.UPDATE,
            f"revises a memory about the same subject ({', '.join(c.signals) or 'a new value'})",
        )
    return Decision.ADD, "new information about the same subject (another attribute)"


def decide(
    text: str,
    neighbours: list[Neighbour],
    *,
    duplicate_similarity: float,
    revision_similarity: float,
    visibility: str = "private",
) -> WriteDecision:
    """The deterministic decision (see :mod:`cabrain.write.decision`). ``neighbours``: most similar first."""
    width = WIDTH[visibility]
    floor = revision_similarity - RETRACTION_MARGIN
    for n in neighbours:
        if n.similarity < floor:
            break
        decision, reason = judge(
            text,
            n.content,
            n.similarity,
            duplicate_similarity=duplicate_similarity,
            revision_similarity=revision_similarity,
        )
        if decision in (Decision.UPDATE, Decision.INVALIDATE) and WIDTH[n.visibility] <= width:
            return WriteDecision(decision, n.id, reason, n.similarity)
        if decision is Decision.NOOP and WIDTH[n.visibility] >= width:
            return WriteDecision(decision, n.id, reason, n.similarity)
    return WriteDecision(Decision.ADD, None, "new information")


def check_decision(text: str, choice: WriteDecision, neighbours: list[Neighbour]) -> WriteDecision:
    """Hold a decision made elsewhere (the chat model's) to the subject check: it may only
    supersede (UPDATE) a neighbour about the same subject, and only retract (INVALIDATE) one it
    restates. NOOP is the model's call: absorbing a write loses nothing that is not already stored."""
    if choice.decision not in (Decision.UPDATE, Decision.INVALIDATE) or choice.target is None:
        return choice
    target = next((n for n in neighbours if n.id == choice.target), None)
    if target is None:
        return WriteDecision(Decision.ADD, None, "new information (the decision named no neighbour)")
    c = compare(text, target.content)
    if choice.decision is Decision.INVALIDATE and (c.same_subject or c.restates):
        return choice
    if choice.decision is Decision.UPDATE and c.same_subject:
        return choice
    why = c.subject_change or "it restates nothing of it"
    return WriteDecision(Decision.ADD, None, f"{choice.decision.value} refused: about another subject ({why})")


def duplicates(a: str, b: str, similarity: float, threshold: float) -> bool:
    """Sleep's dedup: ``a`` and ``b`` say the same thing, read either way round (a merge keeps one
    of them, so neither may carry a subject, a value, a negation or a cue the other lacks)."""
    if similarity < threshold:
        return False
    for new, old in ((a, b), (b, a)):
        c = compare(new, old)
        if not c.same_subject or c.signals:
            return False
    return True


def contradiction(
    newer: str, older: str, similarity: float, *, revision_similarity: float, duplicate_similarity: float
) -> str | None:
    """Sleep's reconsolidation: why ``newer`` supersedes ``older`` (the same subject, a new value
    or a retraction), or None."""
    decision, reason = judge(
        newer, older, similarity, duplicate_similarity=duplicate_similarity, revision_similarity=revision_similarity
    )
    return reason if decision in (Decision.UPDATE, Decision.INVALIDATE) else None
