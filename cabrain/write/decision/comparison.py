"""Two statements side by side: the same subject or another, and what changed (see the package docstring)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from cabrain.write.decision.clauses import copula_slot, opening, predicates
from cabrain.write.decision.lexicon import (
    DEICTIC,
    NEGATIONS,
    RETRACTION_CONTEXT,
    RETRACTION_CUES,
    RETRACTION_PREFIXES,
    REVISION_CUES,
    TRUTH,
)
from cabrain.write.decision.tokens import Token, statement_tokens, stem


@dataclass(frozen=True)
class Comparison:
    """What differs between a new statement and an older one (see :mod:`cabrain.write.decision`)."""

    same_subject: bool
    subject_change: str  # the words that name another subject ("alpha -> beta"), "" when the same
    changed: bool  # a substantive word, number or name differs
    replaced: bool  # ... and the old statement loses one (not only words added)
    shared_predicate: bool  # the predicates keep a substantive word (the same attribute)
    revision_cue: bool  # the new statement says it changes something
    retraction: bool  # the new statement withdraws the old one, bringing no new value
    restates: bool  # the new statement repeats what the old one is about and adds little (see retraction)
    negation_differs: bool
    numbers_differ: bool
    names_differ: bool = False  # a name or code in place of another ("Rebecca" / "Victor")

    @property
    def signals(self) -> list[str]:
        out = []
        if self.negation_differs:
            out.append("negation differs")
        if self.numbers_differ:
            out.append("numbers differ")
        if self.names_differ:
            out.append("names differ")
        if self.revision_cue:
            out.append("revision cue")
        if self.retraction:
            out.append("retraction")
        return out


def _retracts(tokens: tuple[Token, ...]) -> bool:
    return any(t.text in RETRACTION_CUES or t.text.startswith(RETRACTION_PREFIXES) for t in tokens)


def _loose(t: Token) -> str:
    """A word's light stem (Arabic suffixes too), for comparing what two statements mention."""
    if t.number or t.capital:
        return t.key
    return stem(t.text) or t.key


def compare(new: str, old: str) -> Comparison:
    """Align ``new`` with ``old`` and say what differs (pure; both languages)."""
    a, b = statement_tokens(new), statement_tokens(old)
    matcher = difflib.SequenceMatcher(a=[t.key for t in a], b=[t.key for t in b], autojunk=False)
    pa, pb = predicates(a, b, matcher.get_matching_blocks())
    oa, ob = opening(a), opening(b)
    subject_change: list[str] = []
    elaborated: list[str] = []  # words only one side's subject has ("The doctor increased the dose")
    changed = replaced = names = False
    predicate_shared = False
    opcodes = matcher.get_opcodes()
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            if any(a[i].substantive and i >= pa and j >= pb for i, j in zip(range(i1, i2), range(j1, j2), strict=True)):
                predicate_shared = True
            continue
        new_words = [t for t in a[i1:i2] if t.substantive]
        old_words = [t for t in b[j1:j2] if t.substantive]
        if not new_words and not old_words:
            continue
        changed = True
        replaced = replaced or bool(old_words)
        names = names or (any(t.capital for t in new_words) and any(t.capital for t in old_words))
        if i2 <= oa and j2 <= ob:
            continue  # the verb that opens a verb-subject sentence
        if (i2 > i1 and oa <= i1 < pa) or (j2 > j1 and ob <= j1 < pb):
            what = f"{' '.join(t.text for t in old_words) or '-'} -> {' '.join(t.text for t in new_words) or '-'}"
            (subject_change if new_words and old_words else elaborated).append(what)
    if not predicate_shared and copula_slot(a, b, pa, pb, opcodes):
        predicate_shared = True
    na = {t.key for t in a if t.number}
    nb = {t.key for t in b if t.number}
    neg_a = sum(t.text in NEGATIONS for t in a)
    neg_b = sum(t.text in NEGATIONS for t in b)
    cue = any(t.text in REVISION_CUES for t in a) and not any(t.text in REVISION_CUES for t in b)
    # "cancelled", "ignore ...", "ألغي"; or a negation of its truth: "not true", "not ... after all", "ليس صحيحاً"
    retract_cue = (_retracts(a) or (neg_a > neg_b and any(t.text in TRUTH for t in a))) and not _retracts(b)
    # a retraction restates (part of) what it withdraws and brings nothing new: no new number or name
    loose_old = {_loose(t) for t in b if t.substantive}
    novel = {_loose(t) for t in a if t.substantive and _loose(t) not in loose_old and t.text not in RETRACTION_CONTEXT}
    allowed = 2 if retract_cue else 1  # an explicit "cancelled" may carry a word or two more than a bare "not"
    restates = bool({_loose(t) for t in a if t.substantive} & loose_old) and len(novel) <= allowed and na <= nb
    retraction = retract_cue and restates and not any(t.capital and t.key in novel for t in a)
    if elaborated and not cue:  # without a revision cue, words only one subject has make it another
        subject_change += elaborated
    when_a = {t.key for t in a if t.text in DEICTIC}
    when_b = {t.key for t in b if t.text in DEICTIC}
    if when_a != when_b and not cue and not subject_change:  # "this month" / "last month": another time
        subject_change.append(f"{' '.join(sorted(when_b)) or '-'} -> {' '.join(sorted(when_a)) or '-'}")
    return Comparison(
        same_subject=not subject_change,
        subject_change="; ".join(subject_change),
        changed=changed,
        replaced=replaced,
        shared_predicate=predicate_shared,
        revision_cue=cue,
        retraction=retraction,
        restates=restates,
        negation_differs=neg_a != neg_b,
        numbers_differ=bool(na - nb and nb - na),
        names_differ=names,
    )
