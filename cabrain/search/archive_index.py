"""Archive recall through the cold tier's index (:mod:`cabrain.store.cold_index`).

When the namespace has an index, ``CABRAIN_COLD_INDEX_PROBES`` is above 0 and the query has a vector
(hybrid and vector modes), archive recall reads only the ``probes`` clusters whose centroids are
nearest the query, plus every row demoted since the index was built, instead of the whole namespace:
its vector list is ranked over those rows, the clusters' rows by the codes of their residuals from
their centroids (``CABRAIN_COLD_INDEX_CODE_BITS`` a dimension, read instead of the embeddings and the
texts), the hits' whole rows read back after, their similarity from their embeddings. A hybrid
query's keyword list comes from the index's postings: each of its words' strongest rows
(``CABRAIN_COLD_INDEX_WORD_ROWS``, by BM25 weight, with every column the scope filters on, so that
the reader's rows are chosen without reading them), scored with the words' idf over the rows indexed, beside the rows demoted since (counted as read);
a hit found by its words alone is read back from its cluster. An index built before it kept
postings falls back to the words' clusters: those whose rows hold the most of the query's rare
words are read too (``cold_index_terms``). The answer is approximate, and ``cabrain bench archive``
measures its recall@k against the exact scan. ``probes=0`` (or a BM25 query) is the exact scan, and
reading every cluster ranks every row as the scan does (BM25 with the reader's own rows' statistics).

A probe's first pass reads its clusters' ids, codes and scope columns: at ten million rows, 1% of
them a query, at random places in files larger than memory. The first archive recall of a namespace
in a process (``CABRAIN_COLD_INDEX_WARM``) reads those columns of the namespace's whole copy once, in
the background (:func:`warm_soon`), so that the operating system's page cache holds them and later
probes read memory rather than the disk; the copy's other columns (embeddings, texts) are read only
for the hits. What else reads the disk (an exact scan of the whole tier) may push them out again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncpg
import numpy as np

from cabrain.store import cold_index as sql
from cabrain.store.keyword import idf

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import FileScanTask

    from cabrain.store.cold import ColdTier

log = logging.getLogger(__name__)

# (namespace, built_at, snapshot) -> centroids, the data files indexed, the codes' quantizer
_BUILDS: dict[tuple[str, Any, int], tuple[np.ndarray, frozenset[str], np.ndarray | None]] = {}


@dataclass(frozen=True)
class Index:
    """A namespace's index as recorded in ``cold_indexes``, with its centroids."""

    namespace: str
    rows: int  # the rows indexed
    centroids: np.ndarray  # clusters x dim, unit rows
    files: frozenset[str]  # the data files of cabrain.memories it was built from
    quantized: np.ndarray | None = None  # 2 x dim [low, step] of its copy's codes (None: built before them)
    built_at: Any = None  # when it was built: a build's copy is warmed once (warm_soon)

    def probes(self, qvec: np.ndarray, n: int) -> list[int]:
        """The ``n`` clusters whose centroids are nearest ``qvec`` (a unit vector)."""
        sims = self.centroids @ qvec
        n = min(n, len(sims))
        return sorted(int(c) for c in np.argpartition(-sims, n - 1)[:n])

    async def words(self, conn: asyncpg.Connection, terms: Mapping[str, int]) -> dict[str, tuple[int, list[int]]]:
        """The query's words as the index holds them: each one's rows (df) and clusters."""
        if not terms:
            return {}
        return {
            r["term"]: (int(r["df"]), list(r["clusters"]))
            for r in await conn.fetch(sql.TERMS_OF, self.namespace, list(terms))
        }

    def word_probes(self, found: Mapping[str, tuple[int, list[int]]], terms: Mapping[str, int], n: int) -> list[int]:
        """The ``n`` clusters whose rows hold the most of the query's ``terms`` (word -> times in
        the query; ``found``: :meth:`words`), each word weighted by its idf over the rows indexed:
        a rare word's few clusters first. Only a word found in at most ``2 n`` clusters chooses:
        one spread wider says nothing about where its best rows are (reading ``n`` of its clusters
        would be a guess), so a query of common words reads no more than its vector's clusters.
        For an index built before it kept each word's strongest rows (``cold_index_word_rows``)."""
        if not terms or n <= 0:
            return []
        weight: dict[int, float] = {}
        for term, (df, clusters) in found.items():
            if term not in terms or len(clusters) > 2 * n:
                continue
            w = terms[term] * idf(self.rows, df)
            for c in clusters:
                weight[c] = weight.get(c, 0.0) + w
        best = sorted(weight.items(), key=lambda item: (-item[1], item[0]))[:n]
        return sorted(c for c, _ in best)


async def load(conn: asyncpg.Connection, namespace: str) -> Index | None:
    """The namespace's index, or None (centroids are cached per build)."""
    row = await conn.fetchrow(sql.INDEX_OF, namespace)
    if row is None:
        return None
    key = (namespace, row["built_at"], row["snapshot_id"])
    build = _BUILDS.get(key)
    if build is None:
        found = await conn.fetchrow(sql.CENTROIDS_OF, namespace, row["built_at"])
        if found is None:  # rebuilt meanwhile
            return None
        centroids = np.frombuffer(found["centroids"], dtype="<f4").reshape(row["clusters"], row["dim"])
        codes = found["quantizer"]
        quantized = None if codes is None else np.frombuffer(codes, dtype="<f4").reshape(2, row["dim"])
        if len(_BUILDS) > 64:
            _BUILDS.clear()
        build = _BUILDS[key] = (centroids, frozenset(found["files"]), quantized)
    return Index(namespace, row["indexed_rows"], *build, built_at=row["built_at"])


@dataclass
class Probe:
    """One approximate read: the clusters probed and the files read whole."""

    reader: sql.ColdIndex
    namespace: str
    clusters: list[int]
    remainder: list[FileScanTask]
    row_filter: BooleanExpression

    def parts(
        self, columns: Sequence[str], remainder_columns: Sequence[str] | None = None
    ) -> tuple[int, Iterator[pa.RecordBatch], Iterator[pa.RecordBatch]]:
        """(files, the probed clusters' rows, the rows demoted since the build)."""
        return self.reader.parts(
            self.namespace, self.clusters, self.row_filter, columns, self.remainder, remainder_columns
        )


def plan(
    cold: ColdTier,
    index: Index,
    qvec: np.ndarray,
    probes: int,
    row_filter: BooleanExpression,
    words: Sequence[int] = (),
) -> Probe | None:
    """The approximate read of ``index``'s namespace for ``qvec``, and the clusters its ``words``
    picked (:meth:`Index.word_probes`); None: scan instead, when the query's vector is of another
    dimension."""
    if qvec.shape[0] != index.centroids.shape[1]:
        return None
    reader = sql.ColdIndex(cold)
    remainder = reader.remainder(index.namespace, index.files)
    clusters = sorted({*index.probes(qvec, probes), *words})
    return Probe(reader, index.namespace, clusters, remainder, row_filter)


@dataclass(frozen=True)
class Warmed:
    """What :func:`warm` read: the copy's files and bytes, and how long it took."""

    namespace: str
    files: int
    bytes: int
    seconds: float


# (namespace, when its index was built) warmed or being warmed by this process
_WARMED: set[tuple[str, Any]] = set()
_WARMING = threading.Lock()


def warm(cold: ColdTier, index: Index) -> Warmed:
    """Read the columns of ``index``'s copy that a probe's first pass reads (all but the embeddings
    and texts, :data:`cabrain.store.cold_files.UNWARMED`) into the page cache, now."""
    from cabrain.store.cold_files import warm as read_chunks

    started = time.perf_counter()
    table, layout = sql.ColdIndex(cold).layout(index.namespace)
    read = read_chunks(table, layout)
    return Warmed(index.namespace, len(layout.files), read, time.perf_counter() - started)


def warm_soon(cold: ColdTier, index: Index) -> threading.Thread | None:
    """:func:`warm` ``index``'s copy in a background thread, once per build in this process: the
    thread, or None when it was warmed (or is being warmed) already. A failure is logged, never
    raised: warming only makes later probes faster."""
    namespace = index.namespace
    with _WARMING:
        if (namespace, index.built_at) in _WARMED:
            return None
        if len(_WARMED) > 64:  # builds replaced since: warming one again reads what is cached
            _WARMED.clear()
        _WARMED.add((namespace, index.built_at))

    def run() -> None:
        try:
            done = warm(cold, index)
        except Exception as exc:  # noqa: BLE001 - a background nicety: recall reads the disk instead
            log.warning("cold_index.warm_failed", extra={"namespace": namespace, "error": str(exc)})
            return
        log.info(
            "cold_index.warmed",
            extra={"namespace": namespace, "files": done.files, "bytes": done.bytes, "seconds": round(done.seconds, 2)},
        )

    thread = threading.Thread(target=run, name=f"cabrain-warm-{namespace}", daemon=True)
    thread.start()
    return thread


__all__ = ["Index", "Probe", "Warmed", "load", "plan", "warm", "warm_soon"]
