"""Fusing the vector and BM25 lists, knowing when a list carries no signal.

Two methods (``CABRAIN_FUSION``):

- ``score`` (default): each list's scores are brought to [0, 1] - vector similarities by min-max
  over the list, BM25 scores as a fraction of the list's best - and added with weights
  ``alpha`` (vector) and ``1 - alpha`` (BM25). Unlike ranks, scores keep how much better the
  first hit is than the fifth, which is what separates near-identical passages.
- ``rrf``: Reciprocal Rank Fusion, ``sum w / (k + rank)`` with k = 60.

In both, the BM25 list's weight is multiplied by ``coverage ** coverage_power``, where coverage is
the share of the query's idf mass that exists in the namespace's vocabulary (1 when every query
term is known there, 0 when none is). When the keyword list shares (almost) no words with the
query - an Arabic question over English memories - its order is noise, and this leaves ranking to
the vectors (measured outside the product on xquad-ar2en: e5-small alone hit@5 0.89, plain RRF
with such a BM25 list 0.41). Measurements of both methods are in docs/BENCHMARKS.md.

Conversations (turns whose ``metadata.sitting`` - given, or found from time on the write path
(cabrain.write.threads) - or, kept before sittings were found, ``metadata.thread`` names their
sitting) get two more terms, both computed over the candidates alone, with no query of their own:

- thread cohesion (``thread_cohesion``, 0.4): the turns that answer a question cluster in one
  sitting, so each candidate adds that share of its sitting's score - the sum of the sitting's best
  ``cohesion_top`` fused scores - relative to the best sitting's. A memory in no sitting is a
  sitting of its own, so where no memory has one every score is scaled by the same factor
  and the order is unchanged;
- speaker (``speaker_weight``, 0.1): when the query names exactly one of the candidates' speakers
  (``metadata.speaker``, matched word for word after the tokenizer's normalisation), that
  speaker's turns are nudged up by the weight (in units of one list's largest contribution). A
  query that names none, asked with a dialogue's earlier turns (cabrain.search.dialogue), takes
  the speakers the nearest earlier turn names.

The salience nudge adds ``salience_weight * importance`` times the largest contribution one list
can make (1 for ``score``, ``1 / (k + 1)`` for ``rrf``): with the default 0.02 it orders near-ties
and moves a memory a rank or two, never up a list.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cabrain.text.tokenizer import name_tokens, tokenize


@dataclass
class Candidate:
    row: Any
    vector_rank: int | None = None
    vector_similarity: float | None = None
    bm25_rank: int | None = None
    bm25_score: float | None = None
    fused: float = 0.0
    thread_boost: float = 0.0
    speaker_boost: float = 0.0
    # each term of ``fused`` as :func:`fuse` added it (the recall playground shows them,
    # cabrain.search.explain): fused = vector_term + bm25_term + thread_boost + speaker_boost + salience_term
    vector_term: float = 0.0
    bm25_term: float = 0.0
    salience_term: float = 0.0
    sitting: str | None = None  # the sitting whose cohesion it shares (None: a sitting of its own)
    sitting_share: float = 0.0  # its sitting's score over the best sitting's
    speaker: str | None = None  # the speaker the query named, when the speaker term applied


@dataclass(frozen=True)
class Scales:
    """What each list's scores are brought to [0, 1] by (``score``) and the BM25 list's weight."""

    lowest: float  # the vector list's lowest similarity
    highest: float  # and its highest
    best_bm25: float  # the BM25 list's best score
    bm25_weight: float  # coverage ** coverage_power

    @classmethod
    def of(cls, vector_rows: list, bm25_rows: list, *, bm25_coverage: float, coverage_power: float) -> Scales:
        sims = [1.0 - float(row["distance"]) for row in vector_rows]
        return cls(
            min(sims, default=0.0),
            max(sims, default=0.0),
            max((float(row["score"]) for row in bm25_rows), default=0.0),
            max(0.0, min(1.0, bm25_coverage)) ** coverage_power,
        )


def conversation_fields(row: Any) -> tuple[str | None, str | None]:
    """A candidate row's sitting (``metadata.sitting``, given or found on the write path; else its
    ``metadata.thread``, a sitting kept before sittings were found) and speaker (``metadata.speaker``
    of a turn, ``said_by`` of a fact sleep distilled from one speaker's turns), strings or None."""
    metadata = row["metadata"]
    if isinstance(metadata, str):
        if (
            '"thread"' not in metadata
            and '"speaker"' not in metadata
            and '"said_by"' not in metadata
            and ('"sitting"' not in metadata)
        ):
            return None, None
        metadata = json.loads(metadata)
    if not isinstance(metadata, dict):
        return None, None
    sitting = metadata.get("sitting") or metadata.get("thread")
    speaker = metadata.get("speaker") or metadata.get("said_by")
    return (sitting if isinstance(sitting, str) else None), (speaker if isinstance(speaker, str) else None)


def conversation(
    candidates: list[Candidate],
    query: str,
    *,
    cohesion: float,
    top: int,
    speaker_weight: float,
    unit: float,
    same: Mapping[uuid.UUID, uuid.UUID] | None = None,
    context: Sequence[str] = (),
) -> None:
    """Add the thread cohesion and speaker terms (see the module docstring) to ``candidates``' scores.
    ``same`` maps a candidate to the one it is the same answer as (a distilled fact to its turn): a
    sitting's score counts such a pair once. ``context``: a dialogue's earlier turns, oldest first:
    when ``query`` names no speaker, the nearest of them that names one does."""
    if not candidates or (cohesion <= 0 and speaker_weight <= 0):
        return
    fields = [conversation_fields(c.row) for c in candidates]
    if all(sitting is None and speaker is None for sitting, speaker in fields):
        return  # nothing conversational: the cohesion term would scale every score alike
    if cohesion > 0:
        keys = [
            ("sitting", sitting) if sitting is not None else ("memory", c.row["id"])
            for c, (sitting, _) in zip(candidates, fields, strict=True)
        ]
        answers: dict[Any, dict[uuid.UUID, float]] = defaultdict(dict)
        for c, key in zip(candidates, keys, strict=True):
            answer = (same or {}).get(c.row["id"], c.row["id"])
            answers[key][answer] = max(answers[key].get(answer, 0.0), c.fused)
        score = {key: sum(sorted(values.values(), reverse=True)[:top]) for key, values in answers.items()}
        best = max(score.values())
        if best > 0:
            for c, key, (sitting, _) in zip(candidates, keys, fields, strict=True):
                c.sitting, c.sitting_share = sitting, score[key] / best
                c.thread_boost = cohesion * unit * score[key] / best
    if speaker_weight > 0:
        speaking = {s: set(name) for _, s in fields if s and (name := tokenize(s))}
        named: set[str] = set()
        for text in (query, *reversed(context)):
            words = set(name_tokens(text))
            named = {s for s, name in speaking.items() if name <= words}
            if named:
                break
        if len(named) == 1:
            for c, (_, s) in zip(candidates, fields, strict=True):
                if s in named:
                    c.speaker, c.speaker_boost = s, speaker_weight * unit
    for c in candidates:
        c.fused += c.thread_boost + c.speaker_boost


def fuse(
    vector_rows: list,
    bm25_rows: list,
    *,
    bm25_coverage: float,
    method: str = "score",
    alpha: float = 0.4,
    k: int = 60,
    salience_weight: float = 0.02,
    coverage_power: float = 1.0,
    query: str = "",
    thread_cohesion: float = 0.0,
    cohesion_top: int = 3,
    speaker_weight: float = 0.0,
    same: Mapping[uuid.UUID, uuid.UUID] | None = None,
    context: Sequence[str] = (),
) -> list[Candidate]:
    """Fuse the two ranked lists (each best first); best first. ``same``: see :func:`conversation`."""
    candidates: dict[uuid.UUID, Candidate] = {}
    scales = Scales.of(vector_rows, bm25_rows, bm25_coverage=bm25_coverage, coverage_power=coverage_power)
    lo, hi, best_bm25, bm25_weight = scales.lowest, scales.highest, scales.best_bm25, scales.bm25_weight
    for rank, row in enumerate(vector_rows, start=1):
        c = candidates.setdefault(row["id"], Candidate(row))
        sim = 1.0 - float(row["distance"])
        c.vector_rank, c.vector_similarity = rank, sim
        if method == "rrf":
            c.vector_term = 1.0 / (k + rank)
        else:
            c.vector_term = alpha * ((sim - lo) / (hi - lo) if hi - lo > 1e-9 else 1.0)
        c.fused += c.vector_term
    for rank, row in enumerate(bm25_rows, start=1):
        c = candidates.setdefault(row["id"], Candidate(row))
        c.bm25_rank, c.bm25_score = rank, float(row["score"])
        if method == "rrf":
            c.bm25_term = bm25_weight / (k + rank)
        else:
            c.bm25_term = (1.0 - alpha) * bm25_weight * (c.bm25_score / best_bm25 if best_bm25 > 0 else 0.0)
        c.fused += c.bm25_term
    unit = 1.0 / (k + 1) if method == "rrf" else 1.0
    conversation(
        list(candidates.values()),
        query,
        cohesion=thread_cohesion,
        top=cohesion_top,
        speaker_weight=speaker_weight,
        unit=unit,
        same=same,
        context=context,
    )
    for c in candidates.values():
        c.salience_term = salience_weight * float(c.row["importance"]) * unit
        c.fused += c.salience_term
    return sorted(candidates.values(), key=lambda c: (-c.fused, str(c.row["id"])))
