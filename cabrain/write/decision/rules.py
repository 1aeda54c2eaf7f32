"""The decisions: ADD, UPDATE, INVALIDATE or NOOP for a write, and sleep's dedup and reconsolidation tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from cabrain.types import Decision
from cabrain.write.decision.comparison import Comparison, compare
from cabrain.write.decision.origin import PLAIN, Origin, compatible, explicit_revision, without_speaker

WIDTH = {"private": 0, "team": 1, "global": 2}
RETRACTION_MARGIN = 0.1  # a retraction restates less of what it withdraws: it may be this much less similar


@dataclass(frozen=True)
class Neighbour:
    id: uuid.UUID
    content: str
    similarity: float
    visibility: str = "private"
    origin: Origin = PLAIN  # a turn's speaker, a record's identity (cabrain.write.decision.origin)


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
    new_origin: Origin = PLAIN,
    old_origin: Origin = PLAIN,
) -> tuple[Decision, str]:
    """The decision for one pair (no visibility rules): what :func:`decide` applies per neighbour."""
    decision, reason, _ = _pair(new, old, similarity, duplicate_similarity, revision_similarity, new_origin, old_origin)
    return decision, reason


def _pair(
    new: str,
    old: str,
    similarity: float,
    duplicate_similarity: float,
    revision_similarity: float,
    new_origin: Origin,
    old_origin: Origin,
) -> tuple[Decision, str, bool]:
    """:func:`judge`, and whether where the two come from is what kept them apart."""
    if new_origin.speaker is not None and new_origin.speaker == old_origin.speaker:
        # two turns of one speaker: what they said, not the "Name:" both open with
        new, old = without_speaker(new, new_origin.speaker), without_speaker(old, old_origin.speaker)
    c = compare(new, old)
    decision, reason = _judge(c, similarity, duplicate_similarity, revision_similarity)
    refused = origin_refusal(decision, c, new_origin, old_origin, new)
    return (Decision.ADD, refused, True) if refused else (decision, reason, False)


def origin_refusal(decision: Decision, c: Comparison, new: Origin, old: Origin, new_text: str) -> str | None:
    """Why where the two statements come from forbids ``decision`` between them (see
    :mod:`cabrain.write.decision.origin`), or None. ``new_text``: the newer statement."""
    if decision is Decision.ADD or (new.plain and old.plain):
        return None
    why = compatible(new, old)
    if why:
        return why
    if new.speaker is not None:  # two turns of one speaker
        if decision is Decision.NOOP:
            return "a turn is its own utterance: said again, it is another moment of the conversation"
        if not explicit_revision(new_text):
            return "a speaker's turn is revised or retracted only by that speaker's explicit correction"
        if decision is Decision.UPDATE and not (c.shared_predicate and (c.replaced or c.negation_differs)):
            return "a speaker's correction revises a turn only where it gives the same thing a new value"
    if new.record is not None or old.record is not None:
        if decision in (Decision.UPDATE, Decision.INVALIDATE):
            return "records of a source are distinct: only a later version of the same record revises one"
        if decision is Decision.NOOP and (c.changed or c.negation_differs):
            return "records of a source are distinct: one absorbs another only when both say the same"
    return None


def _judge(
    c: Comparison, similarity: float, duplicate_similarity: float, revision_similarity: float
) -> tuple[Decision, str]:
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
    origin: Origin = PLAIN,
) -> WriteDecision:
    """The deterministic decision (see :mod:`cabrain.write.decision`). ``neighbours``: most similar
    first. ``origin``: where ``text`` comes from (a turn's speaker, a record's identity)."""
    width = WIDTH[visibility]
    if origin.record is not None:  # a later version of the same record revises it, whatever it says
        for n in neighbours:
            if n.origin.record == origin.record and WIDTH[n.visibility] <= width:
                c = compare(text, n.content)
                if not c.changed and not c.negation_differs:
                    return WriteDecision(Decision.NOOP, n.id, "the same record, saying the same", n.similarity)
                return WriteDecision(Decision.UPDATE, n.id, "a later version of the same record", n.similarity)
    floor = revision_similarity - RETRACTION_MARGIN
    kept_apart: str | None = None  # the first judgment where the two came from forbade
    for n in neighbours:
        if n.similarity < floor:
            break
        decision, reason, apart = _pair(
            text, n.content, n.similarity, duplicate_similarity, revision_similarity, origin, n.origin
        )
        if apart and kept_apart is None:
            kept_apart = f"kept apart from a similar memory: {reason}"
        if decision in (Decision.UPDATE, Decision.INVALIDATE) and WIDTH[n.visibility] <= width:
            return WriteDecision(decision, n.id, reason, n.similarity)
        if decision is Decision.NOOP and WIDTH[n.visibility] >= width:
            return WriteDecision(decision, n.id, reason, n.similarity)
    return WriteDecision(Decision.ADD, None, kept_apart or "new information")


def check_decision(
    text: str, choice: WriteDecision, neighbours: list[Neighbour], origin: Origin = PLAIN
) -> WriteDecision:
    """Hold a decision made elsewhere (the chat model's) to the subject check and to where the two
    come from: it may only supersede (UPDATE) a neighbour about the same subject, and only retract
    (INVALIDATE) one it restates; neither, nor absorbing (NOOP), across turns of different speakers
    or records of a source (:mod:`cabrain.write.decision.origin`)."""
    if choice.decision is Decision.ADD or choice.target is None:
        return choice
    target = next((n for n in neighbours if n.id == choice.target), None)
    if target is None:
        return WriteDecision(Decision.ADD, None, "new information (the decision named no neighbour)")
    c = compare(text, target.content)
    refused = origin_refusal(choice.decision, c, origin, target.origin, text)
    if refused:
        return WriteDecision(Decision.ADD, None, f"{choice.decision.value} refused: {refused}")
    if choice.decision is Decision.NOOP:  # the model's call: absorbing loses nothing already stored
        return choice
    if choice.decision is Decision.INVALIDATE and (c.same_subject or c.restates):
        return choice
    if choice.decision is Decision.UPDATE and c.same_subject:
        return choice
    why = c.subject_change or "it restates nothing of it"
    return WriteDecision(Decision.ADD, None, f"{choice.decision.value} refused: about another subject ({why})")


def duplicates(
    a: str, b: str, similarity: float, threshold: float, origin_a: Origin = PLAIN, origin_b: Origin = PLAIN
) -> bool:
    """Sleep's dedup: ``a`` and ``b`` say the same thing, read either way round (a merge keeps one
    of them, so neither may carry a subject, a value, a negation or a cue the other lacks), and
    where they come from lets one absorb the other (never two turns; records only saying the same)."""
    if similarity < threshold:
        return False
    for (new, new_origin), (old, old_origin) in (((a, origin_a), (b, origin_b)), ((b, origin_b), (a, origin_a))):
        c = compare(new, old)
        if not c.same_subject or c.signals:
            return False
        if origin_refusal(Decision.NOOP, c, new_origin, old_origin, new):
            return False
    return True


def contradiction(
    newer: str,
    older: str,
    similarity: float,
    *,
    revision_similarity: float,
    duplicate_similarity: float,
    newer_origin: Origin = PLAIN,
    older_origin: Origin = PLAIN,
) -> str | None:
    """Sleep's reconsolidation: why ``newer`` supersedes ``older`` (the same subject, a new value
    or a retraction, between statements whose origins allow it), or None."""
    decision, reason = judge(
        newer,
        older,
        similarity,
        duplicate_similarity=duplicate_similarity,
        revision_similarity=revision_similarity,
        new_origin=newer_origin,
        old_origin=older_origin,
    )
    return reason if decision in (Decision.UPDATE, Decision.INVALIDATE) else None
