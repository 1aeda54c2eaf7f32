"""Recall as a debugger: the very recall an agent makes (:func:`cabrain.search.recall.recall`), run
with its bookkeeping off - no hit's use is counted, no recall event written, the L1 cache neither
read nor written - and each hit taken apart: where it stood in the vector list, the keyword (BM25)
list and after fusion, then each term of its fused score with the formula of
:mod:`cabrain.search.fusion` and the actual numbers in it, and what its final score is.

"Why not this memory?" takes a memory id and says where it stood in each list and what cut it: a
filter of the query, its validity, the cold tier, the cut-off at k, the rerank, or the answer it was
folded into. A memory the agent may not read is only "not found", as an unknown id is.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from pydantic import with_config

from cabrain.engine import Engine
from cabrain.search import recall as pipeline
from cabrain.search.fusion import Candidate, Scales
from cabrain.store import generations
from cabrain.store import memories as sql
from cabrain.types import JSON_FORM, EntitySummary, Memory, RecallMode, RecallQuery

NOT_FOUND = "not found"


@with_config(JSON_FORM)
@dataclass(frozen=True)
class Place:
    """Where a memory stood in one ranked list: its rank (1 = first) and its score there; rank
    None: not in the list's top ``candidates``."""

    rank: int | None
    score: float | None


@with_config(JSON_FORM)
@dataclass(frozen=True)
class Term:
    """One term of a fused score: ``expression`` is its formula with the actual numbers (× and −
    as printed), which evaluates to ``value``; ``label`` says what it is."""

    name: str  # vector | keyword | cohesion | speaker | salience
    label: str
    expression: str
    value: float


@with_config(JSON_FORM)
@dataclass(frozen=True)
class ExplainedHit:
    rank: int
    memory: Memory
    score: float
    dense: Place  # the vector list: rank and similarity
    keyword: Place  # the BM25 list: rank and BM25 score
    fused: Place  # the fused list (before any rerank): rank and fused score
    terms: tuple[Term, ...]  # fused = the sum of these
    formula: str  # "fused = vector 0.4000 + keyword 0.3000 + salience 0.0100 = 0.7100"
    score_formula: str  # how the score follows from fused (or the rerank)
    rerank: float | None
    covers: tuple[uuid.UUID, ...] = ()


@with_config(JSON_FORM)
@dataclass(frozen=True)
class WhyNot:
    """Why a memory was (not) among the hits."""

    memory_id: uuid.UUID
    found: bool  # False: unknown, or not readable by the caller (the two are not told apart)
    namespace: str | None
    returned: int | None  # its rank among the hits, when it was one
    dense: Place | None  # None: that list was not searched (the mode)
    keyword: Place | None
    fused: Place | None
    cutoff: float | None  # the score of the k-th hit (None: fewer than k hits)
    reasons: tuple[str, ...]
    filtered: bool = False  # a filter (or its validity, or the cold tier) kept it out of both lists


@with_config(JSON_FORM)
@dataclass(frozen=True)
class Explanation:
    hits: list[ExplainedHit]
    candidates: int  # N: each list's top N was fused
    fusion: str  # the method and its constants, in words
    rerank: str  # applied, not asked, or why not applied
    timings_ms: dict[str, float]
    related: list[Memory]  # one hop through entities, as recall answers it
    entities: list[EntitySummary]
    why_not: WhyNot | None = None


async def explain(engine: Engine, agent: str, query: RecallQuery, *, why_not: uuid.UUID | None = None) -> Explanation:
    """Run ``query`` (validated by the caller) as ``agent`` without counting it, and take it apart."""
    trace = pipeline.Trace()
    result = await pipeline.recall(engine, agent, query, count=False, trace=trace)
    s = engine.settings
    fused_place = {c.row["id"]: i for i, c in enumerate(trace.fused, 1)}
    by_id = {c.row["id"]: c for c in trace.fused}
    scales = Scales.of(
        trace.vector_rows, trace.bm25_rows, bm25_coverage=trace.coverage, coverage_power=s.bm25_coverage_power
    )
    hits = []
    for rank, h in enumerate(result.hits, 1):
        c = by_id[h.memory.id]
        terms = tuple(_terms(c, scales, engine))
        formula = f"fused = {' + '.join(f'{t.name} {t.value:.4f}' for t in terms)} = {c.fused:.4f}"
        if h.breakdown.rerank is not None:
            how = f"score = rerank {h.score:.4f} (the cross-encoder's score replaces fused {c.fused:.4f})"
        else:
            how = f"score = fused = {h.score:.4f}"
        hits.append(
            ExplainedHit(
                rank=rank,
                memory=h.memory,
                score=h.score,
                dense=Place(c.vector_rank, c.vector_similarity),
                keyword=Place(c.bm25_rank, c.bm25_score),
                fused=Place(fused_place[c.row["id"]], c.fused),
                terms=terms,
                formula=formula,
                score_formula=how,
                rerank=h.breakdown.rerank,
                covers=h.covers,
            )
        )
    if s.fusion == "rrf":
        fusion = f"reciprocal rank fusion: 1 / ({s.rrf_k} + rank) per list"
    else:
        fusion = f"score fusion: vector weight {s.fusion_alpha:g}, keyword weight {1 - s.fusion_alpha:g}"
    fusion += f"; keyword list's coverage of the query {trace.coverage:.2f}"
    if not query.rerank:
        rerank = "not asked"
    elif engine.reranker is None:
        rerank = "not applied: no reranker configured (CABRAIN_RERANKER_PROVIDER is none)"
    else:
        rerank = (
            f"applied to the fused top {max(s.rerank_candidates, query.k)}" if trace.rerank else "nothing to rerank"
        )
    answer = None
    if why_not is not None:
        answer = await _why_not(engine, agent, query, why_not, trace, hits)
    timings = dict(result.timings_ms)
    return Explanation(hits, trace.candidates, fusion, rerank, timings, result.related, result.entities, answer)


def _terms(c: Candidate, scales: Scales, engine: Engine) -> list[Term]:
    """The terms :func:`cabrain.search.fusion.fuse` added up to ``c.fused``, in its order."""
    s = engine.settings
    rrf = s.fusion == "rrf"
    unit = f"1/({s.rrf_k} + 1)" if rrf else "1"
    terms = []
    if c.vector_rank is not None:
        sim = c.vector_similarity or 0.0
        if rrf:
            expression, label = f"1 / ({s.rrf_k} + {c.vector_rank})", f"vector rank {c.vector_rank}"
        elif scales.highest - scales.lowest > 1e-9:
            expression = (
                f"{s.fusion_alpha:g} × ({sim:.6f} − {scales.lowest:.6f}) / ({scales.highest:.6f} − {scales.lowest:.6f})"
            )
            label = "vector weight × (similarity − the list's lowest) / (its highest − its lowest)"
        else:
            expression, label = f"{s.fusion_alpha:g} × 1", "vector weight (one similarity in the list)"
        terms.append(Term("vector", label, expression, c.vector_term))
    if c.bm25_rank is not None:
        if rrf:
            expression = f"{scales.bm25_weight:.6f} / ({s.rrf_k} + {c.bm25_rank})"
            label = f"keyword coverage weight / ({s.rrf_k} + keyword rank {c.bm25_rank})"
        else:
            expression = (
                f"{1 - s.fusion_alpha:g} × {scales.bm25_weight:.6f} × {c.bm25_score or 0.0:.6f} / {scales.best_bm25:.6f}"
                if scales.best_bm25 > 0
                else f"{1 - s.fusion_alpha:g} × 0"
            )
            label = "keyword weight × coverage weight × BM25 score / the list's best"
        terms.append(Term("keyword", label, expression, c.bm25_term))
    if c.thread_boost:
        whose = f"sitting {c.sitting}" if c.sitting else "no sitting: a sitting of its own"
        terms.append(
            Term(
                "cohesion",
                f"cohesion × unit × its sitting's score / the best sitting's ({whose})",
                f"{s.thread_cohesion:g} × {unit} × {c.sitting_share:.6f}",
                c.thread_boost,
            )
        )
    if c.speaker_boost:
        terms.append(
            Term(
                "speaker",
                f"speaker weight × unit ({c.speaker} is named)",
                f"{s.speaker_weight:g} × {unit}",
                c.speaker_boost,
            )
        )
    importance = float(c.row["importance"])
    terms.append(
        Term(
            "salience",
            "salience weight × importance × unit",
            f"{s.salience_weight:g} × {importance:.6f} × {unit}",
            c.salience_term,
        )
    )
    return terms


async def _why_not(
    engine: Engine,
    agent: str,
    query: RecallQuery,
    memory_id: uuid.UUID,
    trace: pipeline.Trace,
    hits: list[ExplainedHit],
) -> WhyNot:
    memory: Memory | None = None
    archived = False
    async with engine.pool.acquire() as conn:
        scope = await generations.of_memory(conn, memory_id)
        if scope is not None:
            row = await sql.get_readable(conn, scope["namespace"], agent, memory_id)
            if row is not None:
                memory = sql.to_memory(row)
            else:
                archived = await sql.cold_readable(conn, scope["namespace"], agent, memory_id) is not None
    if scope is None or (memory is None and not archived):
        return WhyNot(memory_id, False, None, None, None, None, None, None, (NOT_FOUND,))
    k = query.k
    cutoff = hits[k - 1].score if len(hits) >= k else None
    returned = next((h.rank for h in hits if h.memory.id == memory_id), None)
    dense = None if query.mode is RecallMode.BM25 else _place(trace.vector_rows, memory_id, "distance")
    keyword = None if query.mode is RecallMode.VECTOR else _place(trace.bm25_rows, memory_id, "score")
    candidate = next(((i, c) for i, c in enumerate(trace.fused, 1) if c.row["id"] == memory_id), None)
    fused = Place(candidate[0], candidate[1].fused) if candidate else Place(None, None)
    reasons: list[str] = []
    filtered = False
    if returned is not None:
        reasons.append(f"it was returned, at rank {returned}")
    elif archived or memory is None:
        reasons.append("it is archived (in the cold tier): hot recall does not search it; search the archive")
        filtered = True
    else:
        reasons += _filtered(memory, query, engine)
        filtered = bool(reasons)
        if not reasons:
            reasons += _ranked(memory_id, query, trace, hits, fused, cutoff, dense, keyword)
    return WhyNot(
        memory_id, True, scope["namespace"], returned, dense, keyword, fused, cutoff, tuple(reasons), filtered
    )


def _place(rows: list, memory_id: uuid.UUID, key: str) -> Place:
    for rank, row in enumerate(rows, 1):
        if row["id"] == memory_id:
            value = float(row[key])
            return Place(rank, 1.0 - value if key == "distance" else value)
    return Place(None, None)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _filtered(m: Memory, query: RecallQuery, engine: Engine) -> list[str]:
    """The filters of the recall (``cabrain.store.access.RECALL_FILTER``, in its order) that ``m``
    fails."""
    found = []
    if m.namespace != query.namespace:
        found.append(f"it is in namespace {m.namespace}, the query searched {query.namespace}")
    as_of = query.as_of
    if m.invalid_at is not None and not query.include_invalid and (as_of is None or m.invalid_at <= as_of):
        if m.superseded_by is not None:
            found.append(f"it was superseded by {m.superseded_by} on {_when(m.invalid_at)}: tick 'with history'")
        else:
            found.append(f"it was forgotten (invalid) on {_when(m.invalid_at)}: tick 'with history'")
    if as_of is not None and m.valid_at > as_of:
        found.append(f"it became valid on {_when(m.valid_at)}, after 'as of' {_when(as_of)}")
    if query.networks and m.network not in query.networks:
        found.append(
            f"its network is {m.network.value}, the query asked for {', '.join(n.value for n in query.networks)}"
        )
    summaries = engine.settings.recall_sitting_summaries
    if not summaries and not query.networks and m.network.value == "observation" and "sitting" in m.metadata:
        found.append(
            "it is a sitting's summary: these compete only when the observation network is asked for "
            "(or with CABRAIN_RECALL_SITTING_SUMMARIES)"
        )
    if query.memory_types and m.memory_type not in query.memory_types:
        found.append(
            f"its type is {m.memory_type.value}, the query asked for {', '.join(t.value for t in query.memory_types)}"
        )
    if query.source_kinds and m.source_kind not in query.source_kinds:
        found.append(f"its source is {m.source_kind or 'none'}, the query asked for {', '.join(query.source_kinds)}")
    if query.valid_from is not None and m.valid_at < query.valid_from:
        found.append(f"it became valid on {_when(m.valid_at)}, before 'from' {_when(query.valid_from)}")
    if query.valid_to is not None and m.valid_at >= query.valid_to:
        found.append(f"it became valid on {_when(m.valid_at)}, not before 'to' {_when(query.valid_to)}")
    return found


def _ranked(
    memory_id: uuid.UUID,
    query: RecallQuery,
    trace: pipeline.Trace,
    hits: list[ExplainedHit],
    fused: Place,
    cutoff: float | None,
    dense: Place | None,
    keyword: Place | None,
) -> list[str]:
    """Why a memory that passed every filter is not among the hits."""
    n = trace.candidates
    folded = next((h for h in hits if memory_id in h.covers), None)
    if folded is not None:
        return [f"it is folded into hit {folded.rank}: a distilled fact and the turn it came from are one answer"]
    if fused.rank is None:
        searched = [name for name, place in (("vector", dense), ("keyword", keyword)) if place is not None]
        return [f"not in the top {n} of the {' or the '.join(searched)} search: too far from the query"]
    if trace.rerank:
        if memory_id not in trace.rerank:
            return [f"fused rank {fused.rank}: below the {len(trace.rerank)} candidates the reranker scored"]
        rank = trace.reranked.index(memory_id) + 1
        return [
            f"the reranker put it at rank {rank} (score {trace.rerank[memory_id]:.4f}), below the cut-off at k = {query.k}"
        ]
    against = f"the k-th hit's {cutoff:.4f}" if cutoff is not None else "the last hit's"
    return [f"below the cut-off: fused rank {fused.rank}, score {fused.score or 0.0:.4f} < {against} (k = {query.k})"]


__all__ = ["NOT_FOUND", "ExplainedHit", "Explanation", "Place", "Term", "WhyNot", "explain"]
