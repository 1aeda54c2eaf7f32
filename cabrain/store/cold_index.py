"""The cold tier's vector index: k-means centroids per namespace (``cold_indexes``, schema 0024) and a
copy of the namespace's cold rows clustered by them (the Iceberg table ``cabrain.memory_index``).

Archive recall scans a namespace's whole cold table; at millions of rows that is seconds to minutes.
The index lets an approximate archive recall read a small part of it:

- *centroids*: ``round(sqrt(rows))`` of them (at most ``MAX_CLUSTERS``), a spherical k-means over a
  sample of the namespace's embeddings, kept in PostgreSQL with the snapshot of ``cabrain.memories``
  the copy was made from;
- *the clustered copy*: every row of the namespace as that snapshot held it, with its nearest
  centroid in ``cluster`` (-1: a row without an embedding of the index's dimension), written sorted
  by ``cluster`` in Parquet row groups of ``ROW_GROUP_ROWS``, partitioned by namespace. A scan
  filtered on ``cluster IN (the query's nearest centroids)`` reads only the row groups whose
  ``cluster`` bounds meet them (pyarrow skips the others by their statistics);
- *the remainder*: data files of ``cabrain.memories`` that the index's snapshot did not have (rows
  demoted since, files a purge rewrote) are read whole, so nothing is ever missed, however old the
  index.

Built by the sleep cycle's ``maintain`` (:mod:`cabrain.sleep.index_cold`). A build first removes the
namespace's ``cold_indexes`` row (archive recall scans everything meanwhile), then replaces the copy,
then records the new centroids: a crash in between leaves a namespace that is scanned, and rebuilt
by the next maintain. Forgotten rows are purged from the copy with the table (:meth:`ColdTier.purge`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cabrain.errors import ColdStoreError
from cabrain.providers.cold_store import private_files
from cabrain.store.cold import COLUMNS, FIELDS, INDEX_TABLE, NAMESPACE, TABLE_PROPERTIES, ColdTier, equal

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import FileScanTask, Table

ROW_GROUP_ROWS = 2048  # rows per Parquet row group of the copy: the unit a probe reads
GROUP_ROWS = 500_000  # about this many rows of the copy sorted at once while building (its memory)
MAX_CLUSTERS = 8192
SAMPLE_PER_CLUSTER = 40  # k-means runs on at most this many rows per centroid (and at least 20,000)
KMEANS_ROUNDS = 10
UNCLUSTERED = -1
INDEX_PROPERTIES = {**TABLE_PROPERTIES, "write.parquet.row-group-limit": str(ROW_GROUP_ROWS)}

# --- cold_indexes -------------------------------------------------------------------------------------
INDEX_OF = """
SELECT snapshot_id, dim, clusters, indexed_rows, built_at FROM cold_indexes WHERE namespace = $1
"""
CENTROIDS_OF = "SELECT centroids, files FROM cold_indexes WHERE namespace = $1 AND built_at = $2"
DROP_INDEX = "DELETE FROM cold_indexes WHERE namespace = $1"  # its words with it (ON DELETE CASCADE)
TERM_COLUMNS = ("namespace", "term", "df", "clusters")
# The query's words as the namespace's index holds them (a word it lacks is in no cluster).
TERMS_OF = "SELECT term, df, clusters FROM cold_index_terms WHERE namespace = $1 AND term = ANY($2::text[])"
SAVE_INDEX = """
INSERT INTO cold_indexes (namespace, snapshot_id, dim, clusters, centroids, files, indexed_rows, built_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (namespace) DO UPDATE SET snapshot_id = excluded.snapshot_id, dim = excluded.dim,
    clusters = excluded.clusters, centroids = excluded.centroids, files = excluded.files,
    indexed_rows = excluded.indexed_rows, built_at = excluded.built_at
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
    (unit rows), the rows copied and their words (``cold_index_terms``)."""

    snapshot_id: int
    files: list[str]
    centroids: np.ndarray
    rows: int
    terms: list[tuple[str, int, list[int]]]  # each word: the rows and the clusters it occurs in


def cluster_count(rows: int) -> int:
    return max(1, min(MAX_CLUSTERS, round(math.sqrt(rows))))


def unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def nearest(vectors: np.ndarray, centroids: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Each row's most similar centroid (inner product: both sides of unit length)."""
    out = np.empty(len(vectors), dtype=np.int32)
    for start in range(0, len(vectors), chunk):
        out[start : start + chunk] = np.argmax(vectors[start : start + chunk] @ centroids.T, axis=1)
    return out


def kmeans(vectors: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Spherical k-means (unit centroids) of ``vectors``' rows on a seeded sample; k x dim float32."""
    rng = np.random.default_rng(seed)
    points = unit(vectors.astype(np.float32, copy=False))
    sample_size = min(len(points), max(20_000, SAMPLE_PER_CLUSTER * k))
    sample = points[rng.choice(len(points), sample_size, replace=False)] if sample_size < len(points) else points
    k = min(k, len(sample))
    centroids = sample[rng.choice(len(sample), k, replace=False)].copy()
    for _ in range(KMEANS_ROUNDS):
        assigned = nearest(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assigned, sample)
        filled = np.bincount(assigned, minlength=k) > 0
        centroids[filled] = unit(sums[filled])
    return centroids


def embeddings(column: pa.ChunkedArray | pa.Array, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``embedding`` column as an n x dim float32 matrix and a mask of the rows that have one of
    that dimension (the others are zero)."""
    blobs = column.to_pylist()
    has = np.fromiter((b is not None and len(b) == 4 * dim for b in blobs), dtype=bool, count=len(blobs))
    out = np.zeros((len(blobs), dim), dtype=np.float32)
    if has.any():
        out[has] = np.frombuffer(b"".join(b for b, h in zip(blobs, has, strict=True) if h), dtype="<f4").reshape(
            -1, dim
        )
    return out, has


def _word_pairs(terms: pa.ChunkedArray | pa.Array, cluster: np.ndarray) -> pa.Table:
    """The rows' words by cluster: (term, cluster, rows), from the rows' ``terms`` (the cold tier's
    tokens, " t1  t2 ") and ``cluster``."""
    import pyarrow.compute as pc

    column = terms.combine_chunks() if isinstance(terms, pa.ChunkedArray) else terms
    words = pc.split_pattern(pc.utf8_trim(pc.fill_null(column, ""), " "), "  ")
    rows = pc.list_parent_indices(words)
    table = pa.table({"term": pc.list_flatten(words), "row": rows, "cluster": pa.array(cluster).take(rows)})
    table = table.filter(pc.not_equal(table.column("term"), ""))
    return (
        table.group_by(["term", "cluster"])
        .aggregate([("row", "count_distinct")])
        .rename_columns(["term", "cluster", "rows"])
    )


def _words(pairs: Sequence[pa.Table]) -> list[tuple[str, int, list[int]]]:
    """Each word of the :func:`_word_pairs` of disjoint sets of rows: the rows it occurs in and its
    clusters (ascending)."""
    if not pairs:
        return []
    merged = pa.concat_tables(pairs).group_by(["term", "cluster"]).aggregate([("rows", "sum")])
    grouped = merged.group_by("term").aggregate([("rows_sum", "sum"), ("cluster", "list")])
    return [
        (term, int(df), sorted(int(c) for c in clusters))
        for term, df, clusters in zip(
            grouped.column("term").to_pylist(),
            grouped.column("rows_sum_sum").to_pylist(),
            grouped.column("cluster_list").to_pylist(),
            strict=True,
        )
    ]


def _sample(scan: Any, upper: int, seed: int) -> tuple[int | None, int, np.ndarray]:
    """The namespace's embedding dimension (the most common), how many rows have one of it, and a
    seeded sample of those embeddings, enough for k-means over :func:`cluster_count` of them."""
    rng = np.random.default_rng(seed)
    want = max(20_000, SAMPLE_PER_CLUSTER * cluster_count(max(upper, 1)))
    keep = min(1.0, want / max(upper, 1))
    counts: dict[int, int] = {}
    kept: dict[int, list[np.ndarray]] = {}
    for batch in scan.to_arrow_batch_reader():
        dims = batch.column("embedding_dim").to_pylist()
        for d in {d for d in dims if d}:
            vectors, has = embeddings(batch.column("embedding"), d)
            counts[d] = counts.get(d, 0) + int(has.sum())
            chosen = has & (rng.random(len(has)) < keep) if keep < 1.0 else has
            if chosen.any():
                kept.setdefault(d, []).append(vectors[chosen])
    if not counts:
        return None, 0, np.zeros((0, 0), dtype=np.float32)
    dim = max(sorted(counts), key=lambda d: counts[d])
    return dim, counts[dim], np.concatenate(kept.get(dim, [np.zeros((0, dim), dtype=np.float32)]))


def _schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, NestedField

    from cabrain.store.cold import _iceberg_schema

    base = _iceberg_schema()
    return Schema(*base.fields, NestedField(len(base.fields) + 1, "cluster", IntegerType(), required=True))


def arrow_schema() -> pa.Schema:
    return pa.schema(
        [pa.field(name, kind, nullable=not required) for name, kind, required in FIELDS]
        + [pa.field("cluster", pa.int32(), nullable=False)]
    )


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
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.transforms import IdentityTransform

        if self._table is None:
            catalog = self.cold._catalog
            try:
                with private_files():
                    catalog.create_namespace_if_not_exists(NAMESPACE)
                    schema = _schema()
                    spec = PartitionSpec(
                        PartitionField(schema.find_field("namespace").field_id, 1000, IdentityTransform(), "namespace")
                    )
                    self._table = catalog.create_table_if_not_exists(
                        INDEX_TABLE, schema=schema, partition_spec=spec, properties=INDEX_PROPERTIES
                    )
            except Exception as exc:
                raise ColdStoreError(f"cannot open the cold-tier index table {INDEX_TABLE}: {exc}") from exc
        return self._table.refresh()

    # --- building ------------------------------------------------------------------------------------
    def build(self, namespace: str, *, seed: int = 0, group_rows: int = GROUP_ROWS) -> Built | None:
        """Cluster the namespace's cold rows and replace its copy; None when it has no embeddings.

        Streamed, so that its memory does not grow with the namespace: a first pass reads the
        embeddings and keeps a seeded sample (what k-means runs on); a second reads every row, gives
        it its nearest centroid and its words' counts, and spills it to a private temporary folder
        in groups of clusters of about ``group_rows`` rows; each group is then sorted by cluster and
        written, the whole copy replaced in one Iceberg commit."""
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
        dim, rows_with, sample = _sample(scan(("embedding", "embedding_dim")), upper, seed)
        if dim is None:
            return None
        centroids = kmeans(sample, cluster_count(rows_with), seed)
        k = len(centroids)
        groups = max(1, min(k, math.ceil(upper / max(group_rows, 1))))
        without_cluster = arrow_schema().remove(arrow_schema().get_field_index("cluster"))
        pairs: list[pa.Table] = []
        with tempfile.TemporaryDirectory(prefix="cabrain-cold-index-") as spill:
            writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
            try:
                for batch in rows.to_arrow_batch_reader():
                    if batch.num_rows == 0:
                        continue
                    vectors, has = embeddings(batch.column("embedding"), dim)
                    cluster = np.full(batch.num_rows, UNCLUSTERED, dtype=np.int32)
                    if has.any():
                        cluster[has] = nearest(unit(vectors[has]), centroids)
                    table = pa.Table.from_batches([batch]).cast(without_cluster)
                    table = table.append_column(arrow_schema().field("cluster"), pa.array(cluster, type=pa.int32()))
                    pairs.append(_word_pairs(table.column("terms"), cluster))
                    group = np.maximum(cluster, 0).astype(np.int64) * groups // k
                    for g in np.unique(group):
                        part = table.filter(pa.array(group == g))
                        if int(g) not in writers:
                            writers[int(g)] = pa.ipc.new_file(f"{spill}/{int(g)}.arrow", arrow_schema())
                        writers[int(g)].write_table(part)
            finally:
                for writer in writers.values():
                    writer.close()
            written = sorted(writers)

            def sorted_group(g: int) -> pa.Table:
                with pa.memory_map(f"{spill}/{g}.arrow") as source:
                    return pa.ipc.open_file(source).read_all().sort_by([("cluster", "ascending")])

            def replace(table: Table) -> int:
                copied = 0
                with table.transaction() as tx, warnings.catch_warnings():
                    # a namespace's first build has no copy to delete: pyiceberg warns of that
                    warnings.filterwarnings("ignore", "Delete operation did not match any records")
                    tx.delete(equal("namespace", namespace))
                    for g in written:
                        data = sorted_group(g)
                        copied += data.num_rows
                        tx.append(data)
                return copied

            copied = self._commit(replace)
        return Built(snapshot.snapshot_id, files, centroids, copied, _words(pairs))

    def _commit(self, change: Any, attempts: int = 8) -> Any:
        from pyiceberg.exceptions import CommitFailedException

        delay = 0.05
        for attempt in range(attempts):
            try:
                with private_files():
                    return change(self.table())
            except CommitFailedException:
                if attempt == attempts - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            except Exception as exc:
                raise ColdStoreError(f"writing {INDEX_TABLE} failed: {exc}") from exc

    # --- reading -------------------------------------------------------------------------------------
    def remainder(self, namespace: str, known: frozenset[str], row_filter: BooleanExpression) -> list[FileScanTask]:
        """The data files of ``cabrain.memories`` a scan of ``namespace`` with ``row_filter`` plans
        that are not among the ``known`` ones (those the index was built from)."""
        from pyiceberg.expressions import And

        main = self.cold.refresh()
        if main.current_snapshot() is None:
            return []
        tasks = main.scan(row_filter=And(equal("namespace", namespace), row_filter)).plan_files()
        return [task for task in tasks if task.file.file_path not in known]

    def batches(
        self,
        namespace: str,
        clusters: Sequence[int],
        row_filter: BooleanExpression,
        columns: Sequence[str],
        remainder: list[FileScanTask],
    ) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Rows of the probed ``clusters`` from the copy, then every row of the ``remainder`` files,
        matching ``row_filter``; (data files planned, batches)."""
        from pyiceberg.expressions import And

        index = self.table()
        probed = And(row_filter, probe_filter(clusters))
        try:
            tasks = list(index.scan(row_filter=And(equal("namespace", namespace), probed)).plan_files())
        except Exception as exc:
            raise ColdStoreError(f"reading the cold-tier index of {namespace!r} failed: {exc}") from exc

        def stream() -> Iterator[pa.RecordBatch]:
            yield from _read(index, namespace, probed, columns, tasks)
            yield from _read(self.cold.table(), namespace, row_filter, columns, remainder)

        return len(tasks) + len(remainder), stream()


def _read(
    table: Table, namespace: str, row_filter: BooleanExpression, columns: Sequence[str], tasks: list[FileScanTask]
) -> Iterator[pa.RecordBatch]:
    """The rows of ``tasks`` (files of ``table``) matching ``row_filter``, as the scan would give them."""
    from pyiceberg.expressions import And
    from pyiceberg.io.pyarrow import ArrowScan

    if not tasks:
        return
    scan = ArrowScan(
        table.metadata,
        table.io,
        table.schema().select(*columns),
        And(equal("namespace", namespace), row_filter),
    )
    yield from scan.to_record_batches(tasks)


__all__ = ["Built", "ColdIndex", "kmeans", "nearest", "probe_filter"]
