"""The cold tier's vector index: k-means centroids per namespace (``cold_indexes``, schema 0024) and a
copy of the namespace's cold rows clustered by them (the Iceberg table ``cabrain.memory_index``).

Archive recall scans a namespace's whole cold table; at millions of rows that is seconds to minutes.
The index lets an approximate archive recall read a small part of it:

- *centroids*: ``round(sqrt(rows))`` of them (at most ``MAX_CLUSTERS``), a spherical k-means over a
  sample of the namespace's embeddings, kept in PostgreSQL with the snapshot of ``cabrain.memories``
  the copy was made from;
- *the clustered copy*: every row of the namespace as that snapshot held it, with its nearest
  centroid in ``cluster`` (-1: a row without an embedding of the index's dimension) and the codes of
  its residual from that centroid in ``code`` (8 or 16 bits a dimension, the quantizer kept with the
  centroids: :mod:`cabrain.store.cold_clusters`), partitioned by namespace, each cluster written in
  Parquet row groups of its own, sorted by id (the files added to the Iceberg table as they are). A
  probe ranks its clusters' rows by their codes, then reads its hits' whole rows back from the one
  row group each lies in. It reads the row groups of its clusters and no others, with pyarrow,
  straight from the data files whose footers it read once per snapshot of the copy
  (:class:`Layout`): no planning per query, no row of another cluster decoded. Files pyiceberg
  rewrites later (a purge) have row groups of ``ROW_GROUP_ROWS`` rows of several clusters, whose
  other clusters' rows are filtered out after the read;
- *the postings* (the Iceberg table ``cabrain.memory_index_terms``): each word's
  ``CABRAIN_COLD_INDEX_WORD_ROWS`` strongest rows by BM25 weight (its count in the row over the row's
  length, the mean length in the file's metadata), with the row's cluster and every column archive
  recall filters on, sorted by word in row groups a query's words read (their footers, as the
  copy's): a hybrid query's keyword list without reading its rows;
- *the remainder*: data files of ``cabrain.memories`` that the index's snapshot did not have (rows
  demoted since, files a purge rewrote) are read whole, so nothing is ever missed, however old the
  index.

Built by the sleep cycle's ``maintain`` (:mod:`cabrain.sleep.index_cold`). A build first removes the
namespace's ``cold_indexes`` row (archive recall scans everything meanwhile), then replaces the copy
and the postings, then records the new centroids: a crash in between leaves a namespace that is
scanned, and rebuilt by the next maintain. Forgotten rows are purged from the copy and the postings
with the table (:meth:`ColdTier.purge`).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cabrain.errors import ColdStoreError
from cabrain.progress import Say, as_progress
from cabrain.providers.cold_store import private_files
from cabrain.store.cold import (
    COLUMNS,
    INDEX_TABLE,
    NAMESPACE,
    TABLE_PROPERTIES,
    TERMS_TABLE,
    ColdTier,
    equal,
)
from cabrain.store.cold_clusters import (
    cluster_count,
    code_column,
    embeddings,
    encode,
    kmeans,
    nearest,
    quantizer,
    residuals,
    sample_embeddings,
    unit,
)
from cabrain.store.cold_files import (
    LAYOUTS,
    REMAINDERS,
    TERMS_PROPERTIES,
    Layout,
    add_code,
    arrow_schema,
    arrow_schema_of,
    copy_schema,
    postings_schema,
    read_groups,
    read_tasks,
    write_clustered,
    write_postings,
)
from cabrain.store.cold_stream import stream
from cabrain.store.cold_words import (
    POSTING_ARROW,
    merge_pairs,
    postings_of,
    strongest,
    tokens_of,
    word_pairs,
    words_of,
)

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import FileScanTask, Table

ROW_GROUP_ROWS = 2048  # rows per Parquet row group of a copy's file pyiceberg rewrites (a purge)
PAIRS_MERGED_EVERY = 16  # batches' word counts merged into one table (the build's memory)
GROUP_ROWS = 500_000  # about this many rows of the copy sorted at once while building (its memory)
UNCLUSTERED = -1
INDEX_PROPERTIES = {**TABLE_PROPERTIES, "write.parquet.row-group-limit": str(ROW_GROUP_ROWS)}

# --- cold_indexes -------------------------------------------------------------------------------------
INDEX_OF = """
SELECT snapshot_id, dim, clusters, indexed_rows, built_at FROM cold_indexes WHERE namespace = $1
"""
CENTROIDS_OF = "SELECT centroids, files, quantizer FROM cold_indexes WHERE namespace = $1 AND built_at = $2"
DROP_INDEX = "DELETE FROM cold_indexes WHERE namespace = $1"  # its words with it (ON DELETE CASCADE)
TERM_COLUMNS = ("namespace", "term", "df", "clusters")
# The query's words as the namespace's index holds them (a word it lacks is in no cluster).
TERMS_OF = "SELECT term, df, clusters FROM cold_index_terms WHERE namespace = $1 AND term = ANY($2::text[])"
SAVE_INDEX = """
INSERT INTO cold_indexes (namespace, snapshot_id, dim, clusters, centroids, files, indexed_rows, built_at, quantizer)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (namespace) DO UPDATE SET snapshot_id = excluded.snapshot_id, dim = excluded.dim,
    clusters = excluded.clusters, centroids = excluded.centroids, files = excluded.files,
    indexed_rows = excluded.indexed_rows, built_at = excluded.built_at, quantizer = excluded.quantizer
"""
# Cold rows per namespace, with what its index holds (NULL: none).
COLD_COUNTS = """
SELECT i.namespace, count(*)::bigint AS cold_rows, x.indexed_rows
FROM memory_ids i LEFT JOIN cold_indexes x ON x.namespace = i.namespace
WHERE i.tier = 'cold'
GROUP BY i.namespace, x.indexed_rows
ORDER BY i.namespace
"""
# One build per namespace at a time (held by the build's connection).
TRY_BUILD_LOCK = "SELECT pg_try_advisory_lock(hashtextextended('cabrain.cold_index:' || $1, 4243))"
BUILD_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended('cabrain.cold_index:' || $1, 4243))"


@dataclass(frozen=True)
class Built:
    """What a build made: the source snapshot and the namespace's data files in it, the centroids
    (unit rows), the rows copied and their words (``cold_index_terms``), the quantizer of the rows'
    codes."""

    snapshot_id: int
    files: list[str]
    centroids: np.ndarray
    rows: int
    terms: list[tuple[str, int, list[int]]]  # each word: the rows and the clusters it occurs in
    postings: int = 0  # the postings kept (each word's strongest rows, cabrain.memory_index_terms)
    quantized: np.ndarray | None = None  # 2 x dim [low, step] of the copy's codes (cold_clusters.quantizer)


def _one_word(words: Sequence[str]) -> BooleanExpression:
    from pyiceberg.expressions import In, Reference
    from pyiceberg.expressions.literals import literal

    return In(term=Reference("term"), values={literal(w) for w in words})


def probe_filter(clusters: Sequence[int]) -> BooleanExpression:
    """``cluster IN clusters`` (and always the rows without a cluster)."""
    from pyiceberg.expressions import In, Reference
    from pyiceberg.expressions.literals import literal

    return In(term=Reference("cluster"), values={literal(int(c)) for c in {*clusters, UNCLUSTERED}})


class ColdIndex:
    """The clustered copy of the cold tier (``cabrain.memory_index``), beside ``cold``'s table."""

    def __init__(self, cold: ColdTier) -> None:
        self.cold = cold
        self._table: Table | None = None

    def table(self) -> Table:
        """The clustered copy (``cabrain.memory_index``), created on first use."""
        if self._table is None:
            table = self._open(INDEX_TABLE, copy_schema(), INDEX_PROPERTIES)
            if "code" not in {f.name for f in table.schema().fields}:  # a copy made before the codes
                self._commit(add_code, table)
            self._table = table
        return self._table.refresh()

    def postings_table(self) -> Table:
        """The index's postings (``cabrain.memory_index_terms``), created on first use."""
        return self._open(TERMS_TABLE, postings_schema(), TERMS_PROPERTIES).refresh()

    def _open(self, name: str, schema: Any, properties: dict[str, str]) -> Table:
        """Table ``name`` of the catalog, created (partitioned by namespace) if it is not there."""
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.transforms import IdentityTransform

        catalog = self.cold._catalog
        try:
            with private_files():
                catalog.create_namespace_if_not_exists(NAMESPACE)
                spec = PartitionSpec(
                    PartitionField(schema.find_field("namespace").field_id, 1000, IdentityTransform(), "namespace")
                )
                return catalog.create_table_if_not_exists(
                    name, schema=schema, partition_spec=spec, properties=properties
                )
        except Exception as exc:
            raise ColdStoreError(f"cannot open the cold-tier index table {name}: {exc}") from exc

    # --- building ------------------------------------------------------------------------------------
    def build(
        self,
        namespace: str,
        *,
        seed: int = 0,
        group_rows: int = GROUP_ROWS,
        bits: int | None = None,
        progress: Say | None = None,
    ) -> Built | None:
        """Cluster the namespace's cold rows and replace its copy; None when it has no embeddings.

        Streamed, so that its memory does not grow with the namespace: a first pass reads the
        embeddings and keeps a seeded sample (what k-means and the codes' quantizer are made from); a
        second reads every row, gives it its nearest centroid, its ``bits``-bit codes (default
        ``CABRAIN_COLD_INDEX_CODE_BITS``) and its words' counts, and spills it to a private temporary
        folder in groups of clusters of about ``group_rows`` rows; each group is then sorted by
        cluster and id and written, the whole copy replaced in one Iceberg commit. ``progress`` hears
        the rows of the second pass as they are clustered."""
        import tempfile

        main = self.cold.refresh()
        snapshot = main.current_snapshot()
        if snapshot is None:
            return None

        def scan(columns: Sequence[str]) -> Any:
            return main.scan(
                row_filter=equal("namespace", namespace),
                snapshot_id=snapshot.snapshot_id,
                selected_fields=tuple(columns),
            )

        rows = scan(COLUMNS)
        tasks = list(rows.plan_files())
        files = sorted(task.file.file_path for task in tasks)
        upper = sum(task.file.record_count for task in tasks)  # rows at most (some may be deleted)
        dim, rows_with, sample, avgdl = sample_embeddings(
            scan(("embedding", "embedding_dim", "term_count")), upper, seed
        )
        if dim is None:
            return None
        centroids = kmeans(sample, cluster_count(rows_with), seed)
        bits = self.cold.settings.cold_index_code_bits if bits is None else bits
        units = unit(sample.astype(np.float32, copy=False))
        quantized = quantizer(residuals(units, centroids, nearest(units, centroids)), bits)
        del units
        k = len(centroids)
        groups = max(1, min(k, math.ceil(upper / max(group_rows, 1))))
        schema = arrow_schema()
        without_cluster = pa.schema([f for f in schema if f.name not in ("cluster", "code")])
        pairs: list[pa.Table] = []
        postings: list[pa.Table] = []
        settings = self.cold.settings
        k1, b, per_word = settings.bm25_k1, settings.bm25_b, settings.cold_index_word_rows
        with tempfile.TemporaryDirectory(prefix="cabrain-cold-index-") as spill:
            writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
            try:
                tracker = as_progress(progress).track(f"cold rows of {namespace} clustered", upper, "rows")
                for batch in stream(rows, tasks):
                    tracker.advance(batch.num_rows)
                    if batch.num_rows == 0:
                        continue
                    vectors, has = embeddings(batch.column("embedding"), dim)
                    units = unit(vectors)  # a row without an embedding stays zero
                    cluster = np.full(batch.num_rows, UNCLUSTERED, dtype=np.int32)
                    if has.any():
                        cluster[has] = nearest(units[has], centroids)
                    table = pa.Table.from_batches([batch]).cast(without_cluster)
                    table = table.append_column(schema.field("cluster"), pa.array(cluster, type=pa.int32()))
                    codes = encode(residuals(units, centroids, np.maximum(cluster, 0)), quantized, bits)
                    table = table.append_column(schema.field("code"), code_column(codes, has))
                    terms, lengths = tokens_of(table)
                    pairs.append(word_pairs(terms, cluster))
                    postings.append(strongest([postings_of(table, terms, lengths, avgdl, k1, b)], per_word))
                    if len(pairs) >= PAIRS_MERGED_EVERY:
                        pairs = [merge_pairs(pairs)]
                        postings = [strongest(postings, per_word)]
                    group = np.maximum(cluster, 0).astype(np.int64) * groups // k
                    for g in np.unique(group):
                        part = table.filter(pa.array(group == g))
                        if int(g) not in writers:
                            writers[int(g)] = pa.ipc.new_file(f"{spill}/{int(g)}.arrow", schema)
                        writers[int(g)].write_table(part)
                tracker.close()
            finally:
                for writer in writers.values():
                    writer.close()
            written = sorted(writers)

            copy = self.table()
            paths: list[str] = []
            copied = 0
            try:
                for g in written:
                    with pa.memory_map(f"{spill}/{g}.arrow") as source:
                        data = pa.ipc.open_file(source).read_all()
                    data = data.sort_by([("cluster", "ascending"), ("id", "ascending")])
                    paths.append(write_clustered(copy, data))
                    copied += data.num_rows
                    del data
                    os.remove(f"{spill}/{g}.arrow")  # the spill and the copy never both whole on disk
            except BaseException:
                self._discard(copy, paths)
                raise
            self._replace(copy, namespace, paths)
            kept = self._replace_postings(namespace, strongest(postings, per_word), avgdl)
        pa.default_memory_pool().release_unused()  # what the build held, back to the system (a recall's page cache)
        return Built(snapshot.snapshot_id, files, centroids, copied, words_of(pairs), kept, quantized)

    def _replace_postings(self, namespace: str, postings: pa.Table, avgdl: float) -> int:
        """Replace ``namespace``'s postings with ``postings`` (sorted by word) in one commit."""
        table = self.postings_table()
        postings = postings.append_column("namespace", pa.array([namespace] * postings.num_rows, type=pa.string()))
        paths = [write_postings(table, postings, avgdl)] if postings.num_rows else []
        self._replace(table, namespace, paths)
        return postings.num_rows

    def _replace(self, table: Table, namespace: str, paths: list[str]) -> None:
        """Replace ``namespace``'s rows of ``table`` with the data files ``paths`` (written for it)
        in one commit; when that fails, the files are deleted (nothing refers to them)."""

        def replace(current: Table) -> None:
            with current.transaction() as tx, warnings.catch_warnings():
                # a namespace's first build has nothing to delete: pyiceberg warns of that
                warnings.filterwarnings("ignore", "Delete operation did not match any records")
                tx.delete(equal("namespace", namespace))
                if paths:
                    tx.add_files(paths, check_duplicate_files=False)

        try:
            self._commit(replace, table)
        except BaseException:
            self._discard(table, paths)
            raise

    @staticmethod
    def _discard(table: Table, paths: list[str]) -> None:
        for path in paths:
            try:
                table.io.delete(path)
            except OSError:
                pass

    def _commit(self, change: Any, table: Table, attempts: int = 8) -> Any:
        """Run ``change`` on ``table`` as it is now, again (backing off) while another commit wins."""
        from pyiceberg.exceptions import CommitFailedException

        delay = 0.05
        for attempt in range(attempts):
            try:
                with private_files():
                    return change(table.refresh())
            except CommitFailedException:
                if attempt == attempts - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            except Exception as exc:
                raise ColdStoreError(f"writing {'.'.join(table.name())} failed: {exc}") from exc

    # --- reading -------------------------------------------------------------------------------------
    def remainder(self, namespace: str, known: frozenset[str]) -> list[FileScanTask]:
        """The data files of ``cabrain.memories`` holding ``namespace``'s rows that are not among the
        ``known`` ones (those the index was built from): planned once per snapshot of the table."""
        main = self.cold.refresh()
        snapshot = main.current_snapshot()
        if snapshot is None:
            return []
        key = (main.metadata.location, namespace, snapshot.snapshot_id, hash(known))
        found = REMAINDERS.get(key)
        if found is None:
            tasks = main.scan(row_filter=equal("namespace", namespace)).plan_files()
            found = [task for task in tasks if task.file.file_path not in known]
            if len(REMAINDERS) > 64:
                REMAINDERS.clear()
            REMAINDERS[key] = found
        return found

    def layout(self, namespace: str, postings: bool = False) -> tuple[Table, Layout]:
        """The copy's table and where ``namespace``'s clusters lie in it, or (``postings``) the
        postings' table and where each word's are; read once per snapshot."""
        index = self.postings_table() if postings else self.table()
        snapshot = index.current_snapshot()
        key = (index.metadata.location, namespace, -1 if snapshot is None else snapshot.snapshot_id)
        found = LAYOUTS.get(key)
        if found is None:
            tasks = [] if snapshot is None else list(index.scan(row_filter=equal("namespace", namespace)).plan_files())
            found = Layout.of(index, tasks, "term" if postings else "cluster")
            if len(LAYOUTS) > 64:
                LAYOUTS.clear()
            LAYOUTS[key] = found
        return index, found

    def postings(
        self, namespace: str, words: Sequence[str], row_filter: BooleanExpression
    ) -> tuple[pa.Table, float] | None:
        """The postings of ``words`` in ``namespace`` whose rows match ``row_filter``, and the mean
        row length they were weighted with; None when the namespace's index has no postings (built
        before them, or its rows had no words)."""
        from pyiceberg.expressions import And

        if not self.cold._catalog.table_exists(TERMS_TABLE):
            return None
        try:
            table, layout = self.layout(namespace, postings=True)
        except Exception as exc:
            raise ColdStoreError(f"reading the cold-tier index of {namespace!r} failed: {exc}") from exc
        avgdl = layout.avgdl()
        if avgdl is None:
            return None
        columns = [name for name, _ in POSTING_ARROW]
        filtered = And(equal("namespace", namespace), row_filter)
        batches = [
            *read_groups(table, layout, list(words), filtered, columns),
            *read_tasks(table, namespace, And(row_filter, _one_word(words)), columns, layout.through_iceberg),
        ]
        schema = pa.schema(POSTING_ARROW)
        tables = [pa.Table.from_batches([b]).select(schema.names).cast(schema) for b in batches]
        return (pa.concat_tables(tables) if tables else schema.empty_table()), avgdl

    def parts(
        self,
        namespace: str,
        clusters: Sequence[int],
        row_filter: BooleanExpression,
        columns: Sequence[str],
        remainder: list[FileScanTask],
        remainder_columns: Sequence[str] | None = None,
    ) -> tuple[int, Iterator[pa.RecordBatch], Iterator[pa.RecordBatch]]:
        """Rows of the probed ``clusters`` (and the rows without one) from the copy, then every row
        of the ``remainder`` files (``remainder_columns`` of them, default ``columns``), matching
        ``row_filter``: (data files read, the probed clusters' rows, the remainder's rows)."""
        from pyiceberg.expressions import And

        clusters = sorted({*(int(c) for c in clusters), UNCLUSTERED})
        try:
            index, layout = self.layout(namespace)
        except Exception as exc:
            raise ColdStoreError(f"reading the cold-tier index of {namespace!r} failed: {exc}") from exc
        probed = And(equal("namespace", namespace), row_filter)
        files = len(layout.groups(clusters)) + len(layout.through_iceberg)

        def from_index() -> Iterator[pa.RecordBatch]:
            yield from read_groups(index, layout, clusters, probed, columns)
            yield from read_tasks(
                index, namespace, And(row_filter, probe_filter(clusters)), columns, layout.through_iceberg
            )

        return (
            files + len(remainder),
            from_index(),
            read_tasks(self.cold.table(), namespace, row_filter, remainder_columns or columns, remainder),
        )

    def rows(
        self, namespace: str, found: Sequence[tuple[str, int]], row_filter: BooleanExpression, columns: Sequence[str]
    ) -> pa.Table:
        """The rows of the copy with these (id, cluster) pairs that match ``row_filter``: what a
        hit is read back from when the first pass did not read its whole row (the row group of its
        cluster that holds its id)."""
        from pyiceberg.expressions import And

        from cabrain.store.cold import one_of

        if not found:
            return pa.schema(arrow_schema_of(columns)).empty_table()
        index, layout = self.layout(namespace)
        wanted = And(And(equal("namespace", namespace), row_filter), one_of("id", {i for i, _ in found}))
        clusters = sorted({int(c) for _, c in found})
        batches = [
            *read_groups(index, layout, clusters, wanted, columns, layout.holding(found)),
            *read_tasks(index, namespace, And(wanted, probe_filter(clusters)), columns, layout.through_iceberg),
        ]
        schema = pa.schema(arrow_schema_of(columns))
        tables = [pa.Table.from_batches([b]).select(schema.names).cast(schema) for b in batches]
        return pa.concat_tables(tables) if tables else schema.empty_table()


__all__ = ["Built", "ColdIndex", "kmeans", "nearest", "probe_filter"]
