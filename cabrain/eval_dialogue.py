"""``cabrain eval --dialogue``: each question asked as the latest turn of a dialogue.

A chat agent or the capture hook recalls with the last few messages it holds, not a tidy question.
Two shapes of dialogue, built from a set's own questions so that every set can be measured the same
way (gold ids unchanged):

- ``filler``: the question after a greeting and a reply, as a chat opens: the earlier turns carry
  nothing to find, and must not dilute the question;
- ``referent``: as ``filler``, then a turn that names the people the question asks about (the set's
  speakers it names), and the question with them named no more ("What did Caroline paint?" ->
  "What did they paint?"): what the question is about is only in an earlier turn. A question that
  names no speaker is asked as in ``filler``;
- ``followup``: the question as an earlier turn (after the filler), and as the latest a request
  that says nothing of its own (``FOLLOW_UP``): what is wanted is only in an earlier turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

DIALOGUES = ("filler", "referent", "followup")
FILLER = ("Hi there! Hope your day is going well.", "Hello! Good to hear from you. How can I help today?")
FOLLOW_UP = "Sorry, could you look that up for me?"


def _pattern(name: str, suffix: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}{suffix}(?!\w)")


def dialogue(query: str, shape: str, speakers: Iterable[str]) -> tuple[tuple[str, ...], str]:
    """``(earlier turns, latest turn)`` of the question asked in this shape of dialogue."""
    if shape == "filler":
        return FILLER, query
    if shape == "followup":
        return (*FILLER, query), FOLLOW_UP
    if shape != "referent":
        raise ValueError(f"unknown dialogue shape {shape!r}")
    named = sorted({s for s in speakers if s and _pattern(s, "").search(query)}, key=lambda s: (-len(s), s))
    if not named:
        return FILLER, query
    latest = query
    for name in named:  # the longest first: "Mel" is not taken out of "Melanie"
        latest = _pattern(name, "'s").sub("their", latest)
        latest = _pattern(name, "").sub("they", latest)
    return (*FILLER, f"I want to ask you something about {' and '.join(sorted(named))}."), latest


def speakers_by_namespace(corpus: Sequence[dict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for row in corpus:
        if row.get("speaker"):
            out.setdefault(row["namespace"], set()).add(str(row["speaker"]))
    return out
