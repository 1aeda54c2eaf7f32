"""Archive recall's ranking (:mod:`cabrain.search.archive`): what the first pass keeps of each cold
row read (as columns, not a Python object per row), the newest copy of each id, the vector list,
the BM25 list (over the rows read with their own statistics, or from the index's postings and the
rows demoted since: :func:`bm25_indexed`) and their fusion, as hot recall fuses."""

from __future__ import annotations

import bisect
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cabrain.search.fusion import fuse
from cabrain.store.keyword import idf
from cabrain.text.tokenizer import term_frequencies
from cabrain.types import ArchiveQuery, RecallMode


@dataclass
class Pass:
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
    kept: list[Any] = field(default_factory=list)  # the batches' ``keep`` columns (None: not read)
    # a probe's rows of the index's copy are ranked by their codes under this ``[low, step]``
    # (cabrain.store.cold_clusters.quantizer), their whole rows read back for the hits only
    quantized: np.ndarray | None = None
    centroids: np.ndarray | None = None  # the index's, which the codes are residuals of
    # per batch of the index's copy: each row's cluster (None: a batch of the table, which has none)
    cluster_batches: list[np.ndarray | None] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # each kept batch's first row
    rows: int = 0
    ids: Any = None  # after finish(): every row's id (pa.Array), demoted_at (pa.Array), importance
    demoted: Any = None
    importance: np.ndarray | None = None
    clusters: np.ndarray | None = None  # after finish(), for a read through the index: each row's cluster
    _near: np.ndarray | None = None

    def row_at(self, i: int) -> dict[str, Any] | None:
        """Row ``i`` of the pass, its ``keep`` columns (None: its batch was read without them)."""
        b = bisect.bisect_right(self.starts, i) - 1
        kept = self.kept[b]
        return None if kept is None else kept.slice(i - self.starts[b], 1).to_pylist()[0]

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
        names = batch.schema.names
        if self.keep:
            whole = all(c in names for c in self.keep)
            self.kept.append(batch.select(list(self.keep)) if whole else None)
            self.starts.append(self.rows)
        self.rows += batch.num_rows
        cluster = np.asarray(batch.column("cluster").to_numpy(), dtype=np.int64) if "cluster" in names else None
        self.cluster_batches.append(cluster)
        self.id_batches.append(batch.column("id").cast(pa.string()))
        self.demoted_batches.append(batch.column("demoted_at").cast(pa.timestamp("us", tz="UTC")))
        self.importance_batches.append(
            np.asarray(batch.column("importance").cast(pa.float64()).fill_null(0.0).to_numpy(), dtype=np.float64)
        )
        if (  # a batch of the index's copy, ranked by its codes
            self.qvec is not None
            and self.quantized is not None
            and self.centroids is not None
            and cluster is not None
            and "code" in names
        ):
            from cabrain.store.cold_clusters import code_similarities  # pyarrow: with the cold tier

            if self._near is None:  # the query's similarity to each centroid, once
                self._near = (self.centroids @ self.qvec.astype(np.float32)).astype(np.float32)
            self.sims.append(code_similarities(batch.column("code"), self.qvec, self.quantized, self._near, cluster))
        elif self.qvec is not None:
            self.sims.append(column_similarities(batch.column("embedding"), self.qvec))
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
        if any(c is not None for c in self.cluster_batches):  # a read through the index
            self.clusters = np.concatenate(
                [
                    np.full(len(i), -1, dtype=np.int64) if c is None else c
                    for c, i in zip(self.cluster_batches, self.id_batches, strict=True)
                ]
            )
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


def column_similarities(column: Any, qvec: np.ndarray) -> np.ndarray:
    """:func:`similarities` of an Arrow binary column, read in place when every row has an
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
            return cosines(data.view("<f4").reshape(len(column), dim), qvec)
    return similarities(column.to_pylist(), qvec)


def cosines(matrix: np.ndarray, qvec: np.ndarray) -> np.ndarray:
    """Each row's cosine with ``qvec``, in float64 then rounded to float32: a row's similarity does
    not depend on the rows read with it (float32 BLAS rounds a row differently by its place in a
    batch), so reading the same rows through the index ranks them exactly as the scan does."""
    rows = matrix.astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    norms[norms == 0] = 1.0
    return (np.einsum("ij,j->i", rows, qvec.astype(np.float64)) / norms).astype(np.float32)


def similarities(blobs: list[bytes | None], qvec: np.ndarray) -> np.ndarray:
    """Cosine similarity of each stored embedding with the query (NaN where there is none, or
    where it was made by a model of another dimension)."""
    out = np.full(len(blobs), np.nan, dtype=np.float32)
    dim = qvec.shape[0]
    rows = [i for i, b in enumerate(blobs) if b is not None and len(b) == 4 * dim]
    if rows:
        matrix = np.frombuffer(
            b"".join(blob for blob in blobs if blob is not None and len(blob) == 4 * dim), dtype="<f4"
        ).reshape(len(rows), dim)
        out[rows] = cosines(matrix, qvec)
    return out


@dataclass(frozen=True)
class Keywords:
    """What the index's postings say of a hybrid query's words (:func:`bm25_indexed`)."""

    postings: Any  # pa.Table: the words' strongest rows the reader may read
    avgdl: float  # the mean row length they were weighted with
    found: dict[str, tuple[int, list[int]]]  # word -> (rows holding it, clusters), over the rows indexed
    indexed: int  # the rows indexed


def rank(state: Pass, query: ArchiveQuery, settings: Any, keywords: Keywords | None = None) -> tuple[list, int]:
    """Fuse the vector and BM25 lists over the newest copy of each id; (candidates, rows kept).
    With ``keywords`` the BM25 list comes from the index's postings and the rows demoted since."""
    state.finish()
    kept = state.newest()
    n = max(settings.recall_candidates, query.k)
    vector_rows: list[dict] = []
    if state.qvec is not None and len(kept):
        sims = np.concatenate(state.sims)[kept]
        order = [j for j in np.argsort(-np.nan_to_num(sims, nan=-2.0), kind="stable")[:n] if not np.isnan(sims[j])]
        vector_rows = [row_of(state, kept[j], distance=1.0 - float(sims[j])) for j in order]
    bm25_rows: list[dict] = []
    coverage = 1.0
    if state.terms and keywords is not None:
        bm25_rows, coverage = bm25_indexed(state, kept, n, settings, keywords, query)
    elif state.terms and len(kept):
        bm25_rows, coverage = bm25(state, kept, n, settings)
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


def bm25(state: Pass, kept: np.ndarray, n: int, settings: Any) -> tuple[list[dict], float]:
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
    return [row_of(state, i, score=score) for score, _, i in best[:n]], coverage


def bm25_indexed(
    state: Pass, kept: np.ndarray, n: int, settings: Any, keywords: Keywords, query: ArchiveQuery
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
            row = row_of(state, rest[j], score=float(scores[j]))
            offer(str(row["id"]), float(scores[j]), row["demoted_at"], row)
    postings = keywords.postings
    if len(rest) and postings.num_rows:  # an id demoted again since the build: its newer copy counts, scored above
        newer = state.ids.take(pa.array(rest))
        postings = postings.filter(pc.invert(pc.is_in(postings.column("id"), value_set=newer)))
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


def row_of(state: Pass, i: int | np.integer, **extra: float) -> dict:
    i = int(i)
    assert state.importance is not None  # after finish()
    return {
        "id": uuid.UUID(state.ids[i].as_py()),
        "importance": float(state.importance[i]),
        "demoted_at": state.demoted[i].as_py(),
        "at": i,  # the row of the pass (the newest copy of its id)
        "cluster": int(state.clusters[i]) if state.clusters is not None else -1,
        **extra,
    }
