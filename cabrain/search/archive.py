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
since the build, instead of every row (:mod:`cabrain.search.archive_index`): the same ranking over
fewer rows, an approximate answer. ``probes=0`` is the exact scan.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from cabrain.engine import Engine
from cabrain.errors import ColdStoreError
from cabrain.search.fusion import fuse
from cabrain.store import access
from cabrain.store import memories as sql
from cabrain.store.keyword import idf
from cabrain.store.memories import to_memory
from cabrain.text.tokenizer import query_terms, term_frequencies
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


@dataclass
class _Pass:
    """What the first pass keeps per cold row: enough to rank, nothing more. Kept as Arrow and
    numpy columns, not a Python object per row: a read through the index takes tens of thousands
    of rows, and a scan millions (:meth:`finish` joins the batches' columns)."""

    terms: Counter
    qvec: np.ndarray | None
    id_batches: list[Any] = field(default_factory=list)  # pa.Array of str, per batch
    demoted_batches: list[Any] = field(default_factory=list)  # pa.Array of timestamps, per batch
    importance_batches: list[np.ndarray] = field(default_factory=list)
    sims: list[np.ndarray] = field(default_factory=list)
    lengths: list[np.ndarray] = field(default_factory=list)  # per batch: each row's token count
    counts: list[np.ndarray] = field(default_factory=list)  # per batch: rows x query terms, their tf
    counted: list[np.ndarray] = field(default_factory=list)  # per batch: whether its rows' terms were counted
    # the columns kept of every row read (a read through the index: a fraction of the rows), so that
    # the hits are taken from them rather than by a second pass; none: nothing kept (the scan)
    keep: tuple[str, ...] = ()
    kept: list[Any] = field(default_factory=list)  # the batches' ``keep`` columns
    starts: list[int] = field(default_factory=list)  # each kept batch's first row
    rows: int = 0
    ids: Any = None  # after finish(): every row's id (pa.Array), demoted_at (pa.Array), importance
    demoted: Any = None
    importance: np.ndarray | None = None

    def row_at(self, i: int) -> dict[str, Any]:
        """Row ``i`` of the pass, its ``keep`` columns."""
        b = bisect.bisect_right(self.starts, i) - 1
        return self.kept[b].slice(i - self.starts[b], 1).to_pylist()[0]

    def add(self, batch: Any, query: ArchiveQuery, count: bool = True) -> None:
        """Keep ``batch``'s rows (within the query's exact time bounds); ``count``: count the query's
        words in them too (not for rows whose words the index's postings answer for)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if query.valid_from is not None or query.valid_to is not None:
            mask = None
            valid_at = batch.column("valid_at")
            if query.valid_from is not None:
                mask = pc.greater_equal(valid_at, query.valid_from)
            if query.valid_to is not None:
                upper = pc.less(valid_at, query.valid_to)
                mask = upper if mask is None else pc.and_(mask, upper)
            batch = batch.filter(mask)
        if batch.num_rows == 0:
            return
        if self.keep:
            self.kept.append(batch.select([c for c in self.keep if c in batch.schema.names]))
            self.starts.append(self.rows)
        self.rows += batch.num_rows
        self.id_batches.append(batch.column("id").cast(pa.string()))
        self.demoted_batches.append(batch.column("demoted_at").cast(pa.timestamp("us", tz="UTC")))
        self.importance_batches.append(
            np.asarray(batch.column("importance").cast(pa.float64()).fill_null(0.0).to_numpy(), dtype=np.float64)
        )
        if self.qvec is not None:
            self.sims.append(_column_similarities(batch.column("embedding"), self.qvec))
        if self.terms and count:
            self._count_terms(batch)
        elif self.terms:
            self.lengths.append(np.zeros(batch.num_rows, dtype=np.int64))
            self.counts.append(np.zeros((batch.num_rows, len(self.terms)), dtype=np.int64))
        self.counted.append(np.full(batch.num_rows, bool(count), dtype=bool))

    def finish(self) -> None:
        """Join the batches' ids, times and importance (after the last :meth:`add`)."""
        import pyarrow as pa

        self.ids = pa.concat_arrays(self.id_batches) if self.id_batches else pa.array([], pa.string())
        self.demoted = (
            pa.concat_arrays(self.demoted_batches)
            if self.demoted_batches
            else pa.array([], pa.timestamp("us", tz="UTC"))
        )
        self.importance = np.concatenate(self.importance_batches) if self.importance_batches else np.zeros(0)
        self.id_batches, self.demoted_batches, self.importance_batches = [], [], []

    def newest(self) -> np.ndarray:
        """The rows that are the newest copy of their id (the latest ``demoted_at``; the first read
        of equals), ascending."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(self.ids)
        if n == 0 or pc.count_distinct(self.ids).as_py() == n:
            return np.arange(n)
        when = self.demoted.cast(pa.int64()).fill_null(np.iinfo(np.int64).min)
        table = pa.table({"id": self.ids, "when": when, "row": pa.array(np.arange(n))})
        order = pc.sort_indices(table, sort_keys=[("id", "ascending"), ("when", "descending"), ("row", "ascending")])
        ids = self.ids.take(order)
        first = np.ones(n, dtype=bool)
        first[1:] = np.asarray(pc.not_equal(ids[1:], ids[:-1]).to_numpy(zero_copy_only=False), dtype=bool)
        return np.sort(np.asarray(order.to_numpy())[first])

    def _count_terms(self, batch: Any) -> None:
        """Doc lengths and the query terms' frequencies: from the stored tokens, one vectorised
        substring count per term; rows archived before tokens were stored are tokenized here."""
        import pyarrow.compute as pc

        terms = batch.column("terms") if "terms" in batch.schema.names else None
        if terms is None or terms.null_count == len(terms):
            stored = np.zeros(batch.num_rows, dtype=bool)
        else:
            stored = ~np.asarray(terms.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        lengths = np.zeros(batch.num_rows, dtype=np.int64)
        counts = np.zeros((batch.num_rows, len(self.terms)), dtype=np.int64)
        if stored.any():
            lengths[stored] = np.asarray(batch.column("term_count").to_numpy(zero_copy_only=False))[stored]
            for j, term in enumerate(self.terms):
                found = pc.count_substring(terms, f" {term} ").to_numpy(zero_copy_only=False)
                counts[stored, j] = np.nan_to_num(np.asarray(found, dtype=float))[stored].astype(np.int64)
        if not stored.all():
            contents = batch.column("content").to_pylist()
            for i in np.flatnonzero(~stored):
                tf, lengths[i] = term_frequencies(contents[i])
                counts[i] = [tf.get(t, 0) for t in self.terms]
        self.lengths.append(lengths)
        self.counts.append(counts)


def _column_similarities(column: Any, qvec: np.ndarray) -> np.ndarray:
    """:func:`_similarities` of an Arrow binary column, read in place when every row has an
    embedding of the query's dimension (the same matrix, so the same similarities)."""
    import pyarrow as pa

    dim = qvec.shape[0]
    if (
        column.null_count == 0
        and len(column)
        and (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type))
    ):
        width = np.int64 if pa.types.is_large_binary(column.type) else np.int32
        offsets = np.frombuffer(column.buffers()[1], dtype=width)[column.offset : column.offset + len(column) + 1]
        if np.all(np.diff(offsets) == 4 * dim):
            data = np.frombuffer(column.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
            return _cosines(data.view("<f4").reshape(len(column), dim), qvec)
    return _similarities(column.to_pylist(), qvec)


def _cosines(matrix: np.ndarray, qvec: np.ndarray) -> np.ndarray:
    """Each row's cosine with ``qvec``, in float64 then rounded to float32: a row's similarity does
    not depend on the rows read with it (float32 BLAS rounds a row differently by its place in a
    batch), so reading the same rows through the index ranks them exactly as the scan does."""
    rows = matrix.astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    norms[norms == 0] = 1.0
    return (np.einsum("ij,j->i", rows, qvec.astype(np.float64)) / norms).astype(np.float32)


def _similarities(blobs: list[bytes | None], qvec: np.ndarray) -> np.ndarray:
    """Cosine similarity of each stored embedding with the query (NaN where there is none, or
    where it was made by a model of another dimension)."""
    out = np.full(len(blobs), np.nan, dtype=np.float32)
    dim = qvec.shape[0]
    rows = [i for i, b in enumerate(blobs) if b is not None and len(b) == 4 * dim]
    if rows:
        matrix = np.frombuffer(
            b"".join(blob for blob in blobs if blob is not None and len(blob) == 4 * dim), dtype="<f4"
        ).reshape(len(rows), dim)
        out[rows] = _cosines(matrix, qvec)
    return out


@dataclass(frozen=True)
class _Keywords:
    """What the index's postings say of a hybrid query's words (:func:`_bm25_indexed`)."""

    postings: Any  # pa.Table: the words' strongest rows the reader may read
    avgdl: float  # the mean row length they were weighted with
    found: dict[str, tuple[int, list[int]]]  # word -> (rows holding it, clusters), over the rows indexed
    indexed: int  # the rows indexed


def _rank(state: _Pass, query: ArchiveQuery, settings: Any, keywords: _Keywords | None = None) -> tuple[list, int]:
    """Fuse the vector and BM25 lists over the newest copy of each id; (candidates, rows kept).
    With ``keywords`` the BM25 list comes from the index's postings and the rows demoted since."""
    state.finish()
    kept = state.newest()
    n = max(settings.recall_candidates, query.k)
    vector_rows: list[dict] = []
    if state.qvec is not None and len(kept):
        sims = np.concatenate(state.sims)[kept]
        order = [j for j in np.argsort(-np.nan_to_num(sims, nan=-2.0), kind="stable")[:n] if not np.isnan(sims[j])]
        vector_rows = [_row(state, kept[j], distance=1.0 - float(sims[j])) for j in order]
    bm25_rows: list[dict] = []
    coverage = 1.0
    if state.terms and keywords is not None:
        bm25_rows, coverage = _bm25_indexed(state, kept, n, settings, keywords, query)
    elif state.terms and len(kept):
        bm25_rows, coverage = _bm25(state, kept, n, settings)
    if query.mode is RecallMode.BM25:
        coverage = 1.0
    fused = fuse(
        vector_rows,
        bm25_rows,
        bm25_coverage=coverage,
        method=settings.fusion,
        alpha=settings.fusion_alpha,
        k=settings.rrf_k,
        salience_weight=settings.salience_weight,
        coverage_power=settings.bm25_coverage_power,
    )
    return fused, len(kept)


def _bm25(state: _Pass, kept: np.ndarray, n: int, settings: Any) -> tuple[list[dict], float]:
    """The ``n`` best of the ``kept`` rows by BM25 with their own statistics (ties by id), and the
    share of the query's term weight found among them; vectorised over the rows."""
    counts = np.concatenate(state.counts)[kept].astype(np.float64)  # rows x terms
    lengths = np.concatenate(state.lengths)[kept].astype(np.float64)
    n_docs = len(kept)
    avgdl = max(float(lengths.sum()) / n_docs, 1.0)
    df = (counts > 0).sum(axis=0)
    weights = np.array(list(state.terms.values()), dtype=np.float64)
    idfs = np.array([idf(n_docs, int(d)) for d in df], dtype=np.float64)
    max_idf = idf(n_docs, 1)
    total = float(sum(q * (i if d else max_idf) for q, i, d in zip(weights, idfs, df, strict=True)))
    found = float(sum(q * i for q, i, d in zip(weights, idfs, df, strict=True) if d))
    coverage = found / total if total else 0.0
    k1, b = settings.bm25_k1, settings.bm25_b
    norm = (k1 * (1 - b + b * lengths / avgdl))[:, None]
    scores = (weights * idfs * counts * (k1 + 1) / (counts + norm)).sum(axis=1)
    live = np.flatnonzero((counts > 0).any(axis=1))
    if len(live) > n:  # those at or above the n-th best score, then ordered exactly
        live = live[scores[live] >= np.partition(scores[live], len(live) - n)[len(live) - n]]
    best = sorted(
        ((float(scores[j]), state.ids[int(kept[j])].as_py(), int(kept[j])) for j in live), key=lambda s: (-s[0], s[1])
    )
    return [_row(state, i, score=score) for score, _, i in best[:n]], coverage


def _bm25_indexed(
    state: _Pass, kept: np.ndarray, n: int, settings: Any, keywords: _Keywords, query: ArchiveQuery
) -> tuple[list[dict], float]:
    """The ``n`` best rows by BM25 from the index's postings (each word's strongest rows, weighted
    when the index was built) and the rows demoted since (counted by the pass), with statistics over
    the rows indexed and those: the reader's rows among a word's strongest, not every row it may
    read, so an approximate list. Ties by id; the newest copy of an id counts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    terms = list(state.terms)
    weights = np.array([state.terms[t] for t in terms], dtype=np.float64)
    counted = np.concatenate(state.counted)[kept] if len(kept) else np.zeros(0, dtype=bool)
    rest = kept[counted]
    counts = np.concatenate(state.counts)[rest].astype(np.float64) if len(rest) else np.zeros((0, len(terms)))
    lengths = np.concatenate(state.lengths)[rest].astype(np.float64) if len(rest) else np.zeros(0)
    n_docs = keywords.indexed + len(rest)
    df = np.array([keywords.found.get(t, (0, []))[0] for t in terms]) + (counts > 0).sum(axis=0)
    idfs = np.array([idf(max(n_docs, 1), int(d)) for d in df], dtype=np.float64)
    max_idf = idf(max(n_docs, 1), 1)
    total = float(sum(q * (i if d else max_idf) for q, i, d in zip(weights, idfs, df, strict=True)))
    found = float(sum(q * i for q, i, d in zip(weights, idfs, df, strict=True) if d))
    coverage = found / total if total else 0.0
    k1, b = settings.bm25_k1, settings.bm25_b
    best: dict[str, tuple[float, Any, dict]] = {}  # id -> (score, demoted_at, row)

    def offer(memory_id: str, score: float, demoted_at: Any, row: dict) -> None:
        seen = best.get(memory_id)
        if seen is None or demoted_at > seen[1]:
            best[memory_id] = (score, demoted_at, row)

    if len(rest):
        norm = (k1 * (1 - b + b * lengths / keywords.avgdl))[:, None]
        scores = (weights * idfs * counts * (k1 + 1) / (counts + norm)).sum(axis=1)
        live = np.flatnonzero(scores > 0)
        if len(live) > n:
            live = live[scores[live] >= np.partition(scores[live], len(live) - n)[len(live) - n]]
        for j in live:
            row = _row(state, rest[j], score=float(scores[j]))
            offer(str(row["id"]), float(scores[j]), row["demoted_at"], row)
    postings = keywords.postings
    if query.valid_from is not None:
        postings = postings.filter(pc.greater_equal(postings.column("valid_at"), query.valid_from))
    if query.valid_to is not None:
        postings = postings.filter(pc.less(postings.column("valid_at"), query.valid_to))
    if postings.num_rows:
        weight = {t: float(q * i) for t, q, i in zip(terms, weights, idfs, strict=True)}
        per = np.array([weight.get(t, 0.0) for t in postings.column("term").to_pylist()], dtype=np.float64)
        scored = pa.table(
            {
                "id": postings.column("id"),
                "demoted_at": postings.column("demoted_at"),
                "s": pa.array(per * np.asarray(postings.column("impact").to_numpy(), dtype=np.float64)),
                "cluster": postings.column("cluster"),
                "importance": postings.column("importance"),
            }
        )
        summed = scored.group_by(["id", "demoted_at"]).aggregate(
            [("s", "sum"), ("cluster", "max"), ("importance", "max")]
        )
        scores = np.asarray(summed.column("s_sum").to_numpy(), dtype=np.float64)
        live = np.flatnonzero(scores > 0)
        if len(live) > n:
            live = live[scores[live] >= np.partition(scores[live], len(live) - n)[len(live) - n]]
        ids = summed.column("id")
        for j in live:
            memory_id, demoted_at = ids[int(j)].as_py(), summed.column("demoted_at")[int(j)].as_py()
            row = {
                "id": uuid.UUID(memory_id),
                "importance": float(summed.column("importance_max")[int(j)].as_py()),
                "demoted_at": demoted_at,
                "at": None,  # read back from the copy if it is a hit (its cluster)
                "cluster": int(summed.column("cluster_max")[int(j)].as_py()),
                "score": float(scores[j]),
            }
            offer(memory_id, float(scores[j]), demoted_at, row)
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[0]))[:n]
    return [row for _, (_, _, row) in ranked], coverage


def _row(state: _Pass, i: int | np.integer, **extra: float) -> dict:
    i = int(i)
    assert state.importance is not None  # after finish()
    return {
        "id": uuid.UUID(state.ids[i].as_py()),
        "importance": float(state.importance[i]),
        "demoted_at": state.demoted[i].as_py(),
        "at": i,  # the row of the pass (the newest copy of its id)
        **extra,
    }


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
    keywords: _Keywords | None = None
    # a hybrid query's keyword list: from the index's postings when it reads part of the clusters
    # (reading all of them, the rows read are every row, and ranked as the scan ranks them)
    if index is not None and terms and probes < len(index.centroids):
        from cabrain.store.cold_index import ColdIndex

        t0 = time.perf_counter()
        held = await asyncio.to_thread(ColdIndex(cold).postings, query.namespace, list(terms), expression)
        timings["postings_ms"] = (time.perf_counter() - t0) * 1000
        if held is not None:
            keywords = _Keywords(held[0], held[1], found, index.rows)
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
    if index is None:
        (files, batches), qvec = await asyncio.gather(asyncio.to_thread(plan), embed())
    else:  # the query's vector picks the clusters to read
        qvec = await embed()
        if qvec is not None:
            probe = await asyncio.to_thread(archive_index.plan, cold, index, qvec, probes, expression, words)
        if probe is None:
            files, batches = await asyncio.to_thread(plan)
        else:
            # the whole rows at once: the hits are then read from the first pass (_Pass.keep)
            files, probed, rest = await asyncio.to_thread(
                probe.parts, tuple(dict.fromkeys(SCORE_COLUMNS + ROW_COLUMNS))
            )
            # the probed rows' words are counted unless the postings answer for them
            batches = itertools.chain(
                ((b, keywords is None) for b in probed),
                ((b, True) for b in rest),
            )
    if probe is None:
        keywords = None
        batches = ((b, True) for b in batches)
    state = _Pass(terms, qvec, keep=() if probe is None else ROW_COLUMNS)

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
        ranked = _rank(state, query, settings, keywords)
        timings["score_ms"] = (time.perf_counter() - t0) * 1000
        return ranked

    fused, kept = await asyncio.to_thread(first_pass)
    t0 = time.perf_counter()
    pool_ids = [c.row["id"] for c in fused[: max(settings.recall_candidates, 3 * query.k)]]
    async with engine.pool.acquire() as conn:
        cold_ids = {r["id"] for r in await conn.fetch(sql.COLD_IDS, query.namespace, pool_ids)}
    top = [c for c in fused if c.row["id"] in cold_ids][: query.k]
    top_ids = [str(c.row["id"]) for c in top]
    if probe is None:
        rows = await asyncio.to_thread(cold.newest, query.namespace, top_ids, expression)
    else:
        rows = {str(c.row["id"]): state.row_at(c.row["at"]) for c in top if c.row.get("at") is not None}
        elsewhere = [(str(c.row["id"]), c.row["cluster"]) for c in top if c.row.get("at") is None]
        if elsewhere:  # found by their words alone: read back from their clusters
            from cabrain.store.cold_index import ColdIndex

            read = await asyncio.to_thread(ColdIndex(cold).rows, query.namespace, elsewhere, expression, ROW_COLUMNS)
            for row in read.to_pylist():
                seen = rows.get(row["id"])
                if seen is None or row["demoted_at"] > seen["demoted_at"]:
                    rows[row["id"]] = row
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
                    vector_similarity=c.vector_similarity,
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


__all__ = ["memory_of", "recall_archive", "row_filter"]
