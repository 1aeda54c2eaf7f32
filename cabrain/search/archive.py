"""Archive recall: an explicit, separate search of the cold tier (demoted memories).

Hot recall never touches the cold tier; this is the call an agent makes when it wants the old raw
event, the superseded fact, the conversation from last year. It reads only the namespace's
Iceberg files (and only the months of the asked time range), with the same scoping as hot recall
pushed into the scan: ``global`` rows for everyone, ``private`` rows for their owner, ``team``
rows for the namespace's owner, its readers and admins.

1. Access: the agent must be active and the namespace must exist (as in hot recall).
2. The query is embedded while the first pass streams the matching rows: cosine similarity
   against each stored embedding, and BM25 term frequencies of the query's terms (the same
   tokenizer as the hot tier), keeping the newest copy of an id (a demotion re-run after a crash
   may have appended a row twice).
3. BM25 with the scanned rows' own statistics; the two lists are fused exactly like hot recall's.
4. The best candidates are checked against ``memory_ids`` (only ids marked cold are answered, so
   a row whose demotion has not finished yet is never reported from both tiers, and never a
   forgotten one, whether it was forgotten before or after its demotion), read in full
   (a second pass over the same files, without embeddings), and returned with their provenance:
   source kind and reference, the demotion batch, the memories distilled from them and the
   memories they were made from.

Once ``maintain`` has built the namespace's vector index (:mod:`cabrain.store.cold_index`), a hybrid
or vector query reads only the ``CABRAIN_COLD_INDEX_PROBES`` clusters nearest it, and the rows demoted
since the build, instead of every row (:mod:`cabrain.search.archive_index`): the clusters' rows
ranked by their codes, the hits' whole rows read back after; an approximate answer. ``probes=0`` is
the exact scan, and reading every cluster ranks every row by its embedding as the scan does.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from cabrain.engine import Engine
from cabrain.errors import ColdStoreError
from cabrain.search.archive_rank import Keywords, Pass, rank
from cabrain.store import access
from cabrain.store import memories as sql
from cabrain.store.memories import to_memory
from cabrain.text.tokenizer import query_terms
from cabrain.types import (
    ArchiveHit,
    ArchiveQuery,
    ArchiveResult,
    Link,
    Memory,
    RecallMode,
    ScoreBreakdown,
    Visibility,
)

if TYPE_CHECKING:  # pyiceberg loads lazily (see row_filter)
    from pyiceberg.expressions import BooleanExpression

# Columns of the first pass (the text only for rows archived without their tokens); the second
# reads ColdTier.ROW_COLUMNS, no embeddings.
SCORE_COLUMNS = ("id", "content", "embedding", "importance", "valid_at", "demoted_at", "terms", "term_count")
# A probe's first pass over the index's copy ranks by the rows' codes; the words' columns only
# when the index has no postings to answer for them.
LIGHT_COLUMNS = ("id", "code", "importance", "valid_at", "demoted_at")
WORD_COLUMNS = ("content", "terms", "term_count")


def row_filter(agent: str, team_ok: bool, query: ArchiveQuery) -> BooleanExpression:
    """The scoping rules and the query's filters as one pyiceberg expression (pushed into the scan)."""
    # pyiceberg is heavy (over half a second to import): loaded when the cold tier is first searched
    from pyiceberg.expressions import And, GreaterThanOrEqual, IsNull, LessThanOrEqual, Or, Reference
    from pyiceberg.expressions.literals import literal

    from cabrain.store.cold import equal, month_of, one_of

    readable: BooleanExpression = Or(equal("visibility", Visibility.GLOBAL.value), equal("owner_agent_id", agent))
    if team_ok:
        readable = Or(readable, equal("visibility", Visibility.TEAM.value))
    parts: list[BooleanExpression] = [readable]
    if not query.include_invalid:
        parts.append(IsNull(term=Reference("invalid_at")))
    if query.networks:
        parts.append(one_of("network", {n.value for n in query.networks}))
    if query.memory_types:
        parts.append(one_of("memory_type", {t.value for t in query.memory_types}))
    if query.source_kinds:
        parts.append(one_of("source_kind", set(query.source_kinds)))
    if query.valid_from is not None:
        parts.append(GreaterThanOrEqual(term=Reference("valid_month"), value=literal(month_of(query.valid_from))))
    if query.valid_to is not None:
        last = month_of(query.valid_to - timedelta(microseconds=1))
        parts.append(LessThanOrEqual(term=Reference("valid_month"), value=literal(last)))
    return parts[0] if len(parts) == 1 else And(*parts)


def memory_of(row: dict) -> Memory:
    """A cold row (from :meth:`ColdTier.newest`) as a :class:`Memory` of tier "cold"."""
    return to_memory(row, tier="cold")


async def recall_archive(engine: Engine, agent: str, query: ArchiveQuery, probes: int | None = None) -> ArchiveResult:
    """Search the namespace's cold tier; ``query`` was validated by the caller. ``probes``: the
    clusters of the namespace's vector index to read (:mod:`cabrain.search.archive_index`; default
    ``CABRAIN_COLD_INDEX_PROBES``, 0: the exact scan of every row)."""
    from cabrain.search import archive_index  # pyarrow: loaded with the cold tier
    from cabrain.store.cold import ROW_COLUMNS

    settings = engine.settings
    started = time.perf_counter()
    timings: dict[str, float] = {}
    probes = settings.cold_index_probes if probes is None else probes
    terms = Counter() if query.mode is RecallMode.VECTOR else query_terms([query.query])
    words: list[int] = []
    found: dict[str, tuple[int, list[int]]] = {}
    async with engine.pool.acquire() as conn:
        caller = (await access.caller(conn, agent, query.namespace)).require_namespace()
        use_index = probes > 0 and query.mode is not RecallMode.BM25
        index = await archive_index.load(conn, query.namespace) if use_index else None
        if index is not None and terms:
            found = await index.words(conn, terms)
    expression = row_filter(agent, caller.team_ok, query)
    cold = await asyncio.to_thread(engine.cold_tier)
    keywords: Keywords | None = None
    # a hybrid query's keyword list: from the index's postings when it reads part of the clusters
    # (reading all of them, the rows read are every row, and ranked as the scan ranks them)
    if index is not None and terms and probes < len(index.centroids):
        from cabrain.store.cold_index import ColdIndex

        t0 = time.perf_counter()
        held = await asyncio.to_thread(ColdIndex(cold).postings, query.namespace, list(terms), expression)
        timings["postings_ms"] = (time.perf_counter() - t0) * 1000
        if held is not None:
            keywords = Keywords(held[0], held[1], found, index.rows)
    if index is not None and keywords is None:  # an index without postings: the words pick clusters
        words = index.word_probes(found, terms, probes)

    async def embed() -> np.ndarray | None:
        if query.mode is RecallMode.BM25:
            return None
        t0 = time.perf_counter()
        vec = np.asarray(await engine.embed_query(query.query), dtype=np.float32)
        timings["embed_ms"] = (time.perf_counter() - t0) * 1000
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else vec

    def plan() -> tuple[int, Any]:
        return cold.batches(query.namespace, expression, SCORE_COLUMNS)

    probe = None
    quantized: np.ndarray | None = None
    if index is not None and settings.cold_index_warm and probes < len(index.centroids):
        archive_index.warm_soon(cold, index)  # once per build and process, in the background
    if index is None:
        (files, batches), qvec = await asyncio.gather(asyncio.to_thread(plan), embed())
    else:  # the query's vector picks the clusters to read
        qvec = await embed()
        if qvec is not None:
            probe = await asyncio.to_thread(archive_index.plan, cold, index, qvec, probes, expression, words)
        if probe is None:
            files, batches = await asyncio.to_thread(plan)
        else:
            whole = tuple(dict.fromkeys(SCORE_COLUMNS + ROW_COLUMNS))
            # reading part of the clusters (an approximate answer): their rows ranked by their
            # codes, the hits' whole rows read back after; reading all of them, the rows as the scan
            # reads them (the same answer), the hits taken from the first pass (Pass.keep)
            if len(probe.clusters) < len(index.centroids):
                quantized = index.quantized
            light = LIGHT_COLUMNS + (() if keywords is not None or not terms else WORD_COLUMNS)
            files, probed, rest = await asyncio.to_thread(
                probe.parts, (*(whole if quantized is None else light), "cluster"), whole
            )
            # the probed rows' words are counted unless the postings answer for them
            batches = itertools.chain(
                ((b, keywords is None) for b in probed),
                ((b, True) for b in rest),
            )
    if probe is None:
        keywords = None
        batches = ((b, True) for b in batches)
    state = Pass(
        terms,
        qvec,
        keep=() if probe is None else ROW_COLUMNS,
        quantized=quantized,
        centroids=None if index is None else index.centroids,
    )

    def first_pass() -> tuple[list, int]:
        t0 = time.perf_counter()
        try:
            for batch, count in batches:
                state.add(batch, query, count)
        except ColdStoreError:
            raise
        except Exception as exc:
            raise ColdStoreError(f"reading the cold tier of {query.namespace!r} failed: {exc}") from exc
        timings["scan_ms"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        ranked = rank(state, query, settings, keywords)
        timings["score_ms"] = (time.perf_counter() - t0) * 1000
        return ranked

    fused, kept = await asyncio.to_thread(first_pass)
    t0 = time.perf_counter()
    pool_ids = [c.row["id"] for c in fused[: max(settings.recall_candidates, 3 * query.k)]]
    async with engine.pool.acquire() as conn:
        cold_ids = {r["id"] for r in await conn.fetch(sql.COLD_IDS, query.namespace, pool_ids)}
    top = [c for c in fused if c.row["id"] in cold_ids][: query.k]
    top_ids = [str(c.row["id"]) for c in top]
    exact: dict[str, float] = {}  # the hits ranked by their codes: their similarity from their embedding
    if probe is None:
        rows = await asyncio.to_thread(cold.newest, query.namespace, top_ids, expression)
    else:
        rows, exact = await asyncio.to_thread(_whole_rows, cold, state, top, query.namespace, expression, qvec)
    top = [c for c in top if str(c.row["id"]) in rows]
    links: dict[uuid.UUID, dict[str, list[Link]]] = {}
    if top:
        async with engine.pool.acquire() as conn:
            hit_ids = [c.row["id"] for c in top]
            for r in await conn.fetch(
                sql.LINKS.sql, *sql.LINKS.args(namespace=query.namespace, agent=agent, hits=hit_ids)
            ):
                links.setdefault(r["hit"], {}).setdefault(r["direction"], []).append(Link(r["other"], r["relation"]))
    timings["fetch_ms"] = (time.perf_counter() - t0) * 1000
    hits = []
    for c in top:
        row = rows[str(c.row["id"])]
        memory = memory_of(row)
        hits.append(
            ArchiveHit(
                memory=memory,
                score=c.fused,
                breakdown=ScoreBreakdown(
                    vector_rank=c.vector_rank,
                    vector_similarity=(
                        c.vector_similarity
                        if c.vector_similarity is None
                        else exact.get(str(memory.id), c.vector_similarity)
                    ),
                    bm25_rank=c.bm25_rank,
                    bm25_score=c.bm25_score,
                    fused=c.fused,
                    importance=memory.importance,
                ),
                demoted_at=row["demoted_at"],
                batch=uuid.UUID(row["demote_batch"]),
                derived=links.get(memory.id, {}).get("derived", []),
                sources=links.get(memory.id, {}).get("source", []),
            )
        )
    timings["total_ms"] = (time.perf_counter() - started) * 1000
    return ArchiveResult(hits=hits, scanned=kept, files=files, timings_ms=timings)


def _whole_rows(
    cold: Any, state: Pass, top: list, namespace: str, expression: BooleanExpression, qvec: np.ndarray | None
) -> tuple[dict[str, dict], dict[str, float]]:
    """The whole rows of a read through the index's ``top`` candidates: from the first pass where it
    kept them, else read back from the copy (the row group of its cluster holding each; a hit found
    by its words alone, or a row ranked by its codes), with the similarity of those ranked by codes
    from their embeddings."""
    from cabrain.search.archive_rank import cosines
    from cabrain.store.cold import ROW_COLUMNS
    from cabrain.store.cold_index import ColdIndex

    rows: dict[str, dict] = {}
    elsewhere: list[tuple[str, int]] = []
    for c in top:
        row = None if c.row.get("at") is None else state.row_at(c.row["at"])
        if row is None:
            elsewhere.append((str(c.row["id"]), c.row["cluster"]))
        else:
            rows[str(c.row["id"])] = row
    exact: dict[str, float] = {}
    if not elsewhere:
        return rows, exact
    coded = state.quantized is not None
    read = ColdIndex(cold).rows(namespace, elsewhere, expression, (*ROW_COLUMNS, *(("embedding",) if coded else ())))
    for row in read.to_pylist():
        blob = row.pop("embedding", None)
        seen = rows.get(row["id"])
        if seen is None or row["demoted_at"] > seen["demoted_at"]:
            rows[row["id"]] = row
            if qvec is not None and blob is not None and len(blob) == 4 * len(qvec):
                exact[row["id"]] = float(cosines(np.frombuffer(blob, dtype="<f4").reshape(1, -1), qvec)[0])
    return rows, exact


__all__ = ["memory_of", "recall_archive", "row_filter"]
