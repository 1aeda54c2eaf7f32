"""The write decision (SPEC §4.1 step 3): ADD, UPDATE, INVALIDATE or NOOP against neighbours.

One implementation of every automatic judgment about two statements, used by retain, by the
chat-model decider (whose answer goes through the same subject check) and by sleep's dedup and
reconsolidation. Its public interface:

- :func:`compare` reads two statements side by side and says what differs between them;
- :func:`decide` is the deterministic write decision against a write's nearest neighbours;
- :func:`check_decision` holds any decision (the chat model's) to the subject check;
- :func:`duplicates` and :func:`contradiction` are sleep's dedup and reconsolidation tests.

It is read in layers: :mod:`.lexicon` (the word lists), :mod:`.tokens` (a statement as normalised
tokens), :mod:`.clauses` (subject and predicate), :mod:`.comparison` (two statements side by side)
and :mod:`.rules` (the decisions).

**What a statement is about.** Two statements are aligned word by word (after the tokenizer's
Arabic/English normalisation and light stemming). Each sentence is split into its *subject* - the
words before its predicate (a verb, an auxiliary, ``has``/``لديه``, a number read as a value, "to"
after an opening change verb such as ``تم نقل``; in two nominal sentences, where they part at the
end, else the last word) - and its predicate; an opening verb (Arabic verb-subject order) is skipped. Where the two statements *replace* a word of the
subject by another (``Server alpha``/``Server beta``, ``Invoice 1001``/``Invoice 1002``,
``staging``/``production``, ``Ahmed's``/``Mona's``, ``last year's``/``this year's``), they are
about different subjects, and whatever their similarity both are kept (ADD). Only a statement
about the same subject may revise it:

- UPDATE: the same subject with a new value of the same attribute - the predicate keeps some of
  its words, or the new statement carries a revision cue ("now", "moved to", "no longer ... but",
  "أصبح", "انتقل", ...) - and something substantive changed (a number, a name, a word);
- INVALIDATE: the new statement retracts the old one ("cancelled", "not true", "ignore ...",
  "ألغي", "ليس صحيحاً"), restates what it withdraws and brings no new value; a plain negation
  ("we no longer use X", "Khalid will not attend") is itself a fact, so it is an UPDATE;
- NOOP: the same thing again: no substantive word differs (fillers, stop words, number words
  and formatting aside), or, with nothing substantive in the way, similarity at least
  ``duplicate_similarity``;
- ADD otherwise - a different subject, a different attribute, or nothing close enough.

Visibility is never narrowed by a decision: a write is only absorbed (NOOP) by a neighbour at
least as widely visible as it, and only supersedes (UPDATE/INVALIDATE) a neighbour at most as
widely visible, so nobody loses sight of a memory because someone else wrote a similar one.
"""

from cabrain.write.decision.comparison import Comparison, compare
from cabrain.write.decision.rules import (
    RETRACTION_MARGIN,
    Neighbour,
    WriteDecision,
    check_decision,
    contradiction,
    decide,
    duplicates,
    judge,
    origin_refusal,
)

__all__ = [
    "RETRACTION_MARGIN",
    "Comparison",
    "Neighbour",
    "WriteDecision",
    "check_decision",
    "compare",
    "contradiction",
    "decide",
    "duplicates",
    "judge",
    "origin_refusal",
]
