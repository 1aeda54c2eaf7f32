"""A dialogue as the query (issue 34): recall asked with the latest turn and the turns before it.

A chat agent, or the capture hook, holds the last few messages when it asks; the latest says what
is wanted now ("and when was that?"), the earlier ones what it is about ("what did Caroline
paint?"). Recall weighs them so that the latest counts most and greetings and filler do not dilute
it. The earlier turns have a **say** only as far as the latest turn says less than they do: with
``own`` the idf mass of the latest turn's words the namespace knows and ``earlier`` that of the
earlier turns' (each turn's words weighted as below), the say is ``max(0, 1 - own / earlier)``. A
question that says what it wants says at least as much as the greetings before it (their words are
common, their idf small; an unknown word says nothing), so they have no say; "could you look that
up?" after a question says almost nothing, so the question has its full say. With that say:

- keyword side: the latest turn's words weigh 1; the previous turn's ``CABRAIN_RECALL_CONTEXT_WEIGHT``
  (0.5) times the say, each turn before it half the one after it, only the latest
  ``CABRAIN_RECALL_CONTEXT_TURNS`` (3) turns. Their words never count in the query's coverage;
- vector side: ``(1 - v) * own + v * dialogue``, normalised, where ``own`` is the latest turn's
  embedding, ``dialogue`` that of the counted turns and the latest read as one text (embedded only
  when the say is above 0), and ``v`` the say times ``CABRAIN_RECALL_CONTEXT_VECTOR_WEIGHT`` (1:
  a latest turn that says nothing is searched by the whole dialogue);
- speaker: when the latest turn names none of the candidates' speakers, the nearest earlier turn
  that names one does (cabrain.search.fusion).

Measured on locomo-dev-chat with each question asked after filler, with the person it asks about
named only in an earlier turn, and as a follow-up to itself (``cabrain eval --dialogue``;
docs/EVAL.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from cabrain.settings import Settings
from cabrain.store.keyword import QueryTerms, idf


def counted(context: Sequence[str], settings: Settings) -> list[str]:
    """The earlier turns that count, oldest first."""
    n = settings.recall_context_turns
    return [t for t in context if t.strip()][-n:] if n else []


def keyword_context(turns: Sequence[str], settings: Settings) -> list[tuple[str, float]]:
    """Each counted turn with the weight of its words: the previous turn's the setting, each before
    it half the one after it."""
    w = settings.recall_context_weight
    return [(t, w * 0.5**age) for age, t in enumerate(reversed(turns))] if w > 0 else []


def dialogue_text(turns: Sequence[str], query: str) -> str:
    return "\n".join([*turns, query])


def combine(own: list[float], dialogue: list[float], weight: float) -> list[float]:
    """``(1 - weight) * own + weight * dialogue``, normalised (both are unit vectors)."""
    mixed = [(1 - weight) * a + weight * b for a, b in zip(own, dialogue, strict=True)]
    norm = math.sqrt(sum(x * x for x in mixed)) or 1.0
    return [x / norm for x in mixed]


def say(terms: QueryTerms | None) -> float:
    """The earlier turns' say (see the module docstring), in [0, 1]; 0 without them."""
    if terms is None or not terms.context or not terms.rows:
        return 0.0
    n_docs = float(terms.rows[0]["doc_count"] or 0)
    if n_docs <= 0:
        return 0.0
    mass = {True: 0.0, False: 0.0}  # earlier turns' / the latest's own
    for r in terms.rows:
        if r["df"] and (r["term"] in terms.context or r["term"] not in terms.expansion):
            mass[r["term"] in terms.context] += float(r["qtf"]) * idf(n_docs, r["df"])
    return max(0.0, 1.0 - mass[False] / mass[True]) if mass[True] > 0 else 0.0


def scaled(terms: QueryTerms, factor: float) -> QueryTerms:
    """``terms`` with the earlier turns' words weighted by ``factor`` (left out at 0)."""
    rows = [
        {**dict(r), "qtf": float(r["qtf"]) * factor} if r["term"] in terms.context else r
        for r in terms.rows
        if factor > 0 or r["term"] not in terms.context
    ]
    return replace(terms, rows=rows)
