"""The read path (SPEC §4.2). Never calls an LLM, never touches the cold tier.

1. The caller's access, the query terms' statistics and the namespace's sizes are read, then
   the query is embedded with the cores to itself (with a remote embedder, all of that and BM25
   run while the query is away: ``CABRAIN_RECALL_BM25_DURING_EMBEDDING``).
2. Vector top-N and BM25 top-N, both scoped and filtered in SQL.
3. Fusion (:mod:`cabrain.search.fusion`), salience nudge, top k.
4. Optional cross-encoder rerank of the fused top candidates.
5. One hop through ``memory_entities``: memories sharing entities with the hits, as ``related``,
   and beside it (one more query) the summaries sleep wrote of the entities the hits mention most,
   each only when the caller may read every memory it was made from.
6. After answering: ``access_count`` / ``last_accessed_at`` bumped and a ``memory_events`` row,
   in the background, off the response path - unless the recall is the playground's
   (``count=False``, :mod:`cabrain.search.explain`): a recall looked at is not a use.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field

from cabrain import edge
from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.search import dialogue, speakers, vector
from cabrain.search.fusion import Candidate, fuse
from cabrain.store import access
from cabrain.store import entities as entity_sql
from cabrain.store import memories as sql
from cabrain.store.keyword import KeywordResult, QueryTerms, SearchFilters
from cabrain.text.dates import relative_terms
from cabrain.types import (
    MAX_CONTEXT_TURNS,
    ArchiveQuery,
    EntitySummary,
    Hit,
    RecallMode,
    RecallQuery,
    RecallResult,
    ScoreBreakdown,
)


def validate(query: RecallQuery | ArchiveQuery, *, max_k: int, max_chars: int) -> None:
    """The rules every recall's query meets, hot or archive: text, k and time range; a hot recall's
    earlier turns (``context``: each as its query is) and ``as_of`` too."""
    check_text(query.query, "the query", max_chars)
    if not isinstance(query.k, int) or not 1 <= query.k <= max_k:
        raise InputError(f"k must be between 1 and {max_k}, got {query.k!r}")
    if query.valid_from and query.valid_to and query.valid_from >= query.valid_to:
        raise InputError("valid_from must be before valid_to")
    if isinstance(query, RecallQuery):
        if not isinstance(query.context, tuple):
            raise InputError("context must be a list of the dialogue's earlier turns (texts), oldest first")
        if len(query.context) > MAX_CONTEXT_TURNS:
            raise InputError(
                f"context holds {len(query.context)} turns, at most {MAX_CONTEXT_TURNS} are taken",
                hint="send the latest ones",
            )
        for i, turn in enumerate(query.context, 1):  # a blank turn says nothing, and is passed over
            check_text(turn, f"context turn {i}", max_chars, blank=True)
        if query.as_of is not None:
            edge.check_moment(query.as_of, "as_of")


def check_text(text: object, what: str, max_chars: int, *, blank: bool = False) -> None:
    """A recall's text (its query, a turn of its context): text, not blank (unless ``blank``), at
    most ``max_chars``, no NUL, valid UTF-8."""
    if not isinstance(text, str):
        raise InputError(f"{what} must be text, got {type(text).__name__}")
    if not blank and not text.strip():
        raise InputError(f"{what} is empty")
    if len(text) > max_chars:
        raise InputError(
            f"{what} is {len(text)} characters, the limit is {max_chars}",
            hint="shorten it, or raise CABRAIN_MAX_QUERY_CHARS",
        )
    if "\x00" in text:
        raise InputError(f"{what} contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what} is not valid UTF-8 (unpaired surrogate at position {exc.start})") from None


def filters_for(agent: str, query: RecallQuery, *, sitting_summaries: bool = False) -> SearchFilters:
    return SearchFilters(
        namespace=query.namespace,
        agent=agent,
        include_invalid=query.include_invalid,
        networks=[n.value for n in query.networks] if query.networks else None,
        memory_types=[t.value for t in query.memory_types] if query.memory_types else None,
        source_kinds=list(query.source_kinds) if query.source_kinds else None,
        valid_from=query.valid_from,
        valid_to=query.valid_to,
        as_of=query.as_of,
        sitting_summaries=sitting_summaries,
    )


@dataclass
class Trace:
    """What one recall saw on its way (filled in by :func:`recall`): each list as it was searched,
    the fused candidates before the rerank, and what the rerank scored."""

    candidates: int = 0  # N: how many each list was searched for
    vector_rows: list = field(default_factory=list)
    bm25_rows: list = field(default_factory=list)
    coverage: float = 1.0  # the BM25 list's coverage of the query (cabrain.search.fusion)
    fused: list[Candidate] = field(default_factory=list)  # best first, before the rerank
    rerank: dict[uuid.UUID, float] = field(default_factory=dict)  # empty: not reranked
    reranked: list[uuid.UUID] = field(default_factory=list)  # the rerank's order of what it scored


async def recall(
    engine: Engine, agent: str, query: RecallQuery, *, count: bool = True, trace: Trace | None = None
) -> RecallResult:
    """Run one recall; ``query`` was validated by the caller (``Brain.recall``, before its cache).
    ``count``: queue the hits' use and the recall's event (the bookkeeping), as every recall an agent
    makes does; off for a recall that is only looked at. ``trace``: filled in with what it saw."""
    settings = engine.settings
    started = time.perf_counter()
    timings: dict[str, float] = {}
    filters = filters_for(agent, query, sitting_summaries=settings.recall_sitting_summaries)
    n = max(settings.recall_candidates, query.k)
    earlier = dialogue.counted(query.context, settings)  # a dialogue's earlier turns (cabrain.search.dialogue)

    async def caller() -> None:
        async with engine.read_pool().acquire() as conn:
            (await access.caller(conn, agent, query.namespace)).require_namespace()

    async def terms() -> tuple[QueryTerms | None, float]:
        """The query's terms (their earlier turns' words weighted by their say), and that say
        (cabrain.search.dialogue); read for the vector side too when there are earlier turns."""
        if query.mode is RecallMode.VECTOR and not earlier:
            return None, 0.0
        # the dates the query's relative time words name ("last month"), in the words memories'
        # dates are indexed by (cabrain.text.dates)
        expansion = relative_terms(query.query, engine.clock()) if settings.index_dates else ""
        async with engine.read_pool().acquire() as conn:
            read = await engine.keyword.read_terms(
                conn,
                query.query,
                query.namespace,
                expansion=expansion,
                context=dialogue.keyword_context(earlier, settings),
            )
        if not read.context:
            return read, 0.0
        say = dialogue.say(read)
        return dialogue.scaled(read, say), say

    async def named() -> list[tuple[str, ...]]:
        if query.mode is RecallMode.BM25 or not settings.recall_embed_without_speakers:
            return []
        async with engine.read_pool().acquire() as conn:
            return await speakers.named(conn, dialogue.dialogue_text(earlier, query.query), query.namespace, agent)

    async def sizes() -> tuple | None:
        return (
            None if query.mode is RecallMode.BM25 else await vector.namespace_sizes(engine.read_pool(), query.namespace)
        )

    async def embed(names: list[tuple[str, ...]], say: float) -> list[float] | None:
        if query.mode is RecallMode.BM25:
            return None
        t0 = time.perf_counter()
        try:  # the question without the speakers it names (cabrain.search.speakers)
            own = await engine.embed_query(speakers.without_names(query.query, names))
            weight = settings.recall_context_vector_weight * say
            if weight <= 0:
                return own
            text = speakers.without_names(dialogue.dialogue_text(earlier, query.query), names)
            return dialogue.combine(own, await engine.embed_query(text), weight)
        finally:
            timings["embed_ms"] = (time.perf_counter() - t0) * 1000

    async def keyword(terms: QueryTerms | None) -> KeywordResult:
        if terms is None or query.mode is RecallMode.VECTOR:
            return KeywordResult([], 0.0)
        t0 = time.perf_counter()
        async with engine.read_pool().acquire() as conn:
            result = await engine.keyword.search(conn, query.query, filters, n, terms=terms)
        timings["bm25_ms"] = (time.perf_counter() - t0) * 1000
        return result

    async def dense(vec: list[float] | None, sizes: tuple | None) -> list:
        if vec is None:
            return []
        t0 = time.perf_counter()
        rows = await vector.search_with_passages(
            engine.read_pool(),
            vec,
            filters,
            n,
            exact_max=settings.vector_exact_max,
            skip_cost=settings.vector_skip_cost,
            sizes=sizes,
        )
        timings["vector_ms"] = (time.perf_counter() - t0) * 1000
        return rows

    if settings.recall_bm25_during_embedding:
        # A remote embedder: the lookups and BM25 run while the query is away being embedded.
        read = asyncio.ensure_future(terms())

        async def lexical() -> KeywordResult:
            return await keyword((await read)[0])

        async def semantic() -> list:
            async def embedded() -> list[float] | None:
                names = await named()
                # a dialogue's earlier turns are weighed by their words' statistics (cabrain.search.dialogue)
                return await embed(names, (await read)[1] if earlier else 0.0)

            return await dense(*await asyncio.gather(embedded(), sizes()))

        _, bm25, vec_rows = await asyncio.gather(caller(), lexical(), semantic())
    else:
        # In process the embedder needs the cores to itself: the light lookups first (together,
        # about a millisecond), then the embedding, then both searches at once.
        t0 = time.perf_counter()
        _, (query_terms, say), namespace_sizes, names = await asyncio.gather(caller(), terms(), sizes(), named())
        timings["lookups_ms"] = (time.perf_counter() - t0) * 1000
        vec = await embed(names, say)
        bm25, vec_rows = await asyncio.gather(keyword(query_terms), dense(vec, namespace_sizes))
    coverage = 1.0 if query.mode is RecallMode.BM25 else bm25.coverage
    # a distilled fact and the turn it came from are one answer (CABRAIN_RECALL_FOLD_DISTILLED): known
    # before fusion, so a sitting's cohesion counts them once, and folded after it
    pairs: list = []
    if settings.recall_fold_distilled != "off" and any(r["network"] == "fact" for r in (*vec_rows, *bm25.rows)):
        async with engine.read_pool().acquire() as conn:
            pairs = await conn.fetch(sql.DISTILLED_PAIRS, list({r["id"] for r in (*vec_rows, *bm25.rows)}))
    fused = fuse(
        vec_rows,
        bm25.rows,
        bm25_coverage=coverage,
        method=settings.fusion,
        alpha=settings.fusion_alpha,
        k=settings.rrf_k,
        salience_weight=settings.salience_weight,
        coverage_power=settings.bm25_coverage_power,
        query=query.query,
        context=earlier,
        thread_cohesion=settings.thread_cohesion,
        cohesion_top=settings.thread_cohesion_top,
        speaker_weight=settings.speaker_weight,
        same={p["memory_id"]: p["source_id"] for p in pairs},
    )
    if trace is not None:
        trace.candidates, trace.vector_rows, trace.bm25_rows = n, vec_rows, bm25.rows
        trace.coverage, trace.fused = coverage, list(fused)
    rerank_scores: dict = {}
    if query.rerank and engine.reranker is not None and fused:
        t0 = time.perf_counter()
        pool = fused[: max(settings.rerank_candidates, query.k)]
        scores = await engine.reranker.rank(query.query, [c.row["content"] for c in pool])
        rerank_scores = {c.row["id"]: s for c, s in zip(pool, scores, strict=True)}
        fused = sorted(pool, key=lambda c: -rerank_scores[c.row["id"]])
        timings["rerank_ms"] = (time.perf_counter() - t0) * 1000
        if trace is not None:
            trace.rerank, trace.reranked = rerank_scores, [c.row["id"] for c in fused]
    if pairs:
        folded = fold(
            fused,
            pairs,
            query.k,
            pool=settings.recall_fold_distilled,
            weight=settings.recall_fold_weight,
            reranked=bool(rerank_scores),
        )
        hits = [_hit(c, rerank_scores.get(c.row["id"]), covers) for c, covers in folded]
    else:
        hits = [_hit(c, rerank_scores.get(c.row["id"])) for c in fused[: query.k]]
    related: list = []
    entities: list[EntitySummary] = []
    if query.expand and hits and (settings.related_limit or settings.recall_entity_summaries):
        t0 = time.perf_counter()
        ids = [h.memory.id for h in hits]

        async def neighbours() -> list:
            if not settings.related_limit:
                return []
            async with engine.read_pool().acquire() as conn:
                return await conn.fetch(
                    entity_sql.ONE_HOP.sql,
                    *entity_sql.ONE_HOP.args(filters.params(), limit=settings.related_limit, hits=ids),
                )

        async def summaries() -> list[EntitySummary]:
            if not settings.recall_entity_summaries or query.as_of is not None:  # summaries are of now
                return []
            async with engine.read_pool().acquire() as conn:
                return await entity_sql.recall_summaries(
                    conn, query.namespace, agent, ids, settings.recall_entity_summaries
                )

        rows, entities = await asyncio.gather(neighbours(), summaries())
        related = [sql.to_memory(r) for r in rows]
        timings["expand_ms"] = (time.perf_counter() - t0) * 1000
    timings["total_ms"] = (time.perf_counter() - started) * 1000
    if count:
        record(engine, agent, query, [h.memory.id for h in hits], timings["total_ms"])
    return RecallResult(hits=hits, related=related, timings_ms=timings, entities=entities)


def record(engine: Engine, agent: str, query: RecallQuery, ids: list[uuid.UUID], latency_ms: float) -> None:
    """Queue a recall's access bookkeeping and its event (a cached answer's too); written off the
    response path."""
    engine.record_access(
        ids,
        {
            "namespace": query.namespace,
            "op": "recall",
            "agent_id": agent,
            "latency_ms": int(latency_ms),
            "metadata": {"k": query.k, "mode": query.mode.value, "hits": [str(i) for i in ids]},
        },
    )


def fold(
    ranked: list[Candidate],
    pairs: list,
    k: int,
    *,
    pool: str = "best",
    weight: float = 0.5,
    reranked: bool = False,
) -> list[tuple[Candidate, tuple[uuid.UUID, ...]]]:
    """The top ``k`` answers, a distilled fact and the turn it came from being one answer.

    Each fact among the candidates joins the group of its best-ranked source among them (a fact
    with none stays alone; two facts of one turn join it together). A group is shown as its best-
    ranked member, the others listed in its ``covers``, and ranks by its members' fused scores:
    ``best`` the highest (a fact only stands in for its turn), ``sum`` all of them (a turn that
    sleep found a claim in, and whose claim matches too, counts twice), ``blend`` the highest plus
    ``weight`` times the others (the second voice saying the same thing counts, less than the
    first). A reranked list keeps the reranker's order (its scores do not add up).
    """
    place = {c.row["id"]: i for i, c in enumerate(ranked)}
    sources: dict[uuid.UUID, list[uuid.UUID]] = {}
    for p in pairs:
        sources.setdefault(p["memory_id"], []).append(p["source_id"])
    anchor: dict[uuid.UUID, uuid.UUID] = {}
    for c in ranked:
        mid = c.row["id"]
        found = [s for s in sources.get(mid, ()) if s in place and s not in sources]
        anchor[mid] = min(found, key=place.__getitem__) if found else mid
    groups: dict[uuid.UUID, list[Candidate]] = {}
    for c in ranked:  # in rank order: each group's first member is its best
        groups.setdefault(anchor[c.row["id"]], []).append(c)
    others = 0.0 if reranked or pool == "best" else 1.0 if pool == "sum" else weight

    def score(members: list[Candidate]) -> float:  # 0 for all: the ranking's own order (reranked too)
        return -(members[0].fused + others * sum(m.fused for m in members[1:])) if others else 0.0

    ordered = sorted(groups.values(), key=lambda m: (score(m), place[m[0].row["id"]]))
    return [(m[0], tuple(x.row["id"] for x in m[1:])) for m in ordered[:k]]


def _hit(c: Candidate, rerank: float | None, covers: tuple[uuid.UUID, ...] = ()) -> Hit:
    memory = sql.to_memory(c.row)
    score = rerank if rerank is not None else c.fused
    return Hit(
        memory=memory,
        score=score,
        breakdown=ScoreBreakdown(
            vector_rank=c.vector_rank,
            vector_similarity=c.vector_similarity,
            bm25_rank=c.bm25_rank,
            bm25_score=c.bm25_score,
            fused=c.fused,
            importance=memory.importance,
            rerank=rerank,
            thread=c.thread_boost or None,
            speaker=c.speaker_boost or None,
        ),
        covers=covers,
    )


def cache_digest(agent: str, query: RecallQuery) -> str:
    """What a recall asked, as the L1 cache's key part: two recalls with the same digest get the same answer."""
    parts = [
        agent,
        query.query,
        query.namespace,
        query.k,
        query.mode.value,
        query.include_invalid,
        [n.value for n in query.networks or ()],
        [t.value for t in query.memory_types or ()],
        list(query.source_kinds or ()),
        str(query.valid_from),
        str(query.valid_to),
        query.rerank,
        query.expand,
        query.as_of.isoformat() if query.as_of else None,
        list(query.context),
    ]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()
