"""The cold tier's vector index: k-means centroids per namespace (``cold_indexes``, schema 0024) and a
copy of the namespace's cold rows clustered by them (the Iceberg table ``cabrain.memory_index``).

Archive recall scans a namespace's whole cold table; at millions of rows that is seconds to minutes.
The index lets an approximate archive recall read a small part of it:

- *centroids*: ``round(sqrt(rows))`` of them (at most ``MAX_CLUSTERS``), a spherical k-means over a
  sample of the namespace's embeddings, kept in PostgreSQL with the snapshot of ``cabrain.memories``
  the copy was made from;
- *the clustered copy*: every row of the namespace as that snapshot held it, with its nearest
  centroid in ``cluster`` (-1: a row without an embedding of the index's dimension), partitioned by
  namespace, each cluster written in Parquet row groups of its own (the files added to the Iceberg
  table as they are). A probe reads the row groups of its clusters and no others, with pyarrow,
  straight from the data files whose footers it read once per snapshot of the copy
  (:class:`Layout`): no planning per query, no row of another cluster decoded. Files pyiceberg
  rewrites later (a purge) have row groups of ``ROW_GROUP_ROWS`` rows of several clusters, whose
  other clusters' rows are filtered out after the read;
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
import pyarrow.compute as pc

from cabrain.errors import ColdStoreError
from cabrain.providers.cold_store import private_files
from cabrain.store.cold import (
    COLUMNS,
    FIELDS,
    INDEX_TABLE,
    NAMESPACE,
    TABLE_PROPERTIES,
    TERMS_TABLE,
    ColdTier,
    equal,
)

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import FileScanTask, Table

ROW_GROUP_ROWS = 2048  # rows per Parquet row group of a copy's file pyiceberg rewrites (a purge)
CLUSTER_GROUP_MAX = 65_536  # rows per row group of one cluster (a build writes each cluster apart)
PAIRS_MERGED_EVERY = 16  # batches' word counts merged into one table (the build's memory)
GROUP_ROWS = 500_000  # about this many rows of the copy sorted at once while building (its memory)
MAX_CLUSTERS = 8192
SAMPLE_PER_CLUSTER = 40  # k-means runs on at most this many rows per centroid (and at least 20,000)
KMEANS_ROUNDS = 10
UNCLUSTERED = -1
POSTING_GROUP_ROWS = 2048  # postings per Parquet row group of the terms table: the unit a query word reads
# The columns of a posting beside its word: where the row is, its word's count and its length, and
# every column archive recall filters on, so that a posting is judged without reading its row.
POSTING_COLUMNS = (
    "id",
    "cluster",
    "importance",
    "demoted_at",
    "valid_at",
    "valid_month",
    "invalid_at",
    "owner_agent_id",
    "visibility",
    "network",
    "memory_type",
    "source_kind",
)
AVGDL_KEY = b"cabrain.avgdl"  # a postings file's metadata: the mean length (in tokens) of the rows indexed
INDEX_PROPERTIES = {**TABLE_PROPERTIES, "write.parquet.row-group-limit": str(ROW_GROUP_ROWS)}
TERMS_PROPERTIES = {"write.parquet.row-group-limit": str(POSTING_GROUP_ROWS)}

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
    postings: int = 0  # the postings kept (each word's strongest rows, cabrain.memory_index_terms)


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


def _merge_pairs(pairs: Sequence[pa.Table]) -> pa.Table:
    """The :func:`_word_pairs` of disjoint sets of rows as one table of the same columns (a build
    merges them as it goes, so that they grow with the words and clusters, not the rows)."""
    merged = pa.concat_tables(pairs).group_by(["term", "cluster"]).aggregate([("rows", "sum")])
    return merged.select(["term", "cluster", "rows_sum"]).rename_columns(["term", "cluster", "rows"])


def _words(pairs: Sequence[pa.Table]) -> list[tuple[str, int, list[int]]]:
    """Each word of the :func:`_word_pairs` of disjoint sets of rows: the rows it occurs in and its
    clusters (ascending)."""
    if not pairs:
        return []
    merged = _merge_pairs(pairs)
    grouped = merged.group_by("term").aggregate([("rows", "sum"), ("cluster", "list")])
    return [
        (term, int(df), sorted(int(c) for c in clusters))
        for term, df, clusters in zip(
            grouped.column("term").to_pylist(),
            grouped.column("rows_sum").to_pylist(),
            grouped.column("cluster_list").to_pylist(),
            strict=True,
        )
    ]


def _tokens(table: pa.Table) -> tuple[pa.Array, np.ndarray]:
    """The rows' tokens as the cold tier stores them (" t1  t2 "), tokenizing the text of rows
    archived before tokens were stored, and their counts."""
    from cabrain.text.tokenizer import tokenize

    terms = table.column("terms").combine_chunks()
    lengths = np.asarray(table.column("term_count").fill_null(0).to_numpy(), dtype=np.int64).copy()
    if terms.null_count == 0:
        return terms, lengths
    values = terms.to_pylist()
    contents = table.column("content")
    for i in np.flatnonzero(np.asarray(terms.is_null().to_numpy(zero_copy_only=False), dtype=bool)):
        tokens = tokenize(contents[int(i)].as_py() or "")
        values[i] = " " + "  ".join(tokens) + " " if tokens else ""
        lengths[i] = len(tokens)
    return pa.array(values, type=pa.string()), lengths


def _postings(table: pa.Table, terms: pa.Array, lengths: np.ndarray, avgdl: float, k1: float, b: float) -> pa.Table:
    """Every (word, row) of ``table``: the word's count in the row, the row's length, the word's
    BM25 weight in it without its idf (``impact``, what ranks a word's rows), and the row's
    :data:`POSTING_COLUMNS`."""
    words = pc.split_pattern(pc.utf8_trim(pc.fill_null(terms, ""), " "), "  ")
    pairs = pa.table({"term": pc.list_flatten(words), "row": pc.list_parent_indices(words)})
    pairs = pairs.filter(pc.not_equal(pairs.column("term"), ""))
    counted = pairs.group_by(["term", "row"]).aggregate([("row", "count")])
    rows = counted.column("row")
    tf = np.asarray(counted.column("row_count").to_numpy(), dtype=np.float64)
    length = lengths[np.asarray(rows.to_numpy(), dtype=np.int64)].astype(np.float64)
    impact = tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / max(avgdl, 1.0)))
    out = table.select(list(POSTING_COLUMNS)).take(rows)
    out = out.append_column("term", counted.column("term"))
    out = out.append_column("tf", pa.array(tf.astype(np.int32)))
    out = out.append_column("length", pa.array(length.astype(np.int32)))
    return out.append_column("impact", pa.array(impact.astype(np.float32)))


def _strongest(postings: Sequence[pa.Table], per_word: int) -> pa.Table:
    """The ``per_word`` postings of each word with the highest impact (ties: the lower id), sorted
    by word then impact: what a build keeps of them, merged as it goes."""
    if not postings:
        return pa.table({name: pa.array([], type=kind) for name, kind in _POSTING_ARROW})
    table = pa.concat_tables(postings)
    if table.num_rows == 0:
        return table
    order = pc.sort_indices(table, sort_keys=[("term", "ascending"), ("impact", "descending"), ("id", "ascending")])
    table = table.take(order)
    terms = table.column("term").combine_chunks()
    start = np.ones(len(terms), dtype=bool)
    if len(terms) > 1:
        start[1:] = np.asarray(pc.not_equal(terms[1:], terms[:-1]).to_numpy(zero_copy_only=False), dtype=bool)
    at = np.arange(len(terms))
    rank = at - np.maximum.accumulate(np.where(start, at, 0))
    return table.filter(pa.array(rank < per_word))


def _postings_arrow() -> list[tuple[str, pa.DataType]]:
    kinds = {name: kind for name, kind, _ in FIELDS}
    kinds["cluster"] = pa.int32()
    return [
        ("namespace", pa.string()),
        ("term", pa.string()),
        ("impact", pa.float32()),
        ("tf", pa.int32()),
        ("length", pa.int32()),
        *((name, kinds[name]) for name in POSTING_COLUMNS),
    ]


_POSTING_ARROW = [(name, kind) for name, kind in _postings_arrow() if name != "namespace"]
REQUIRED_POSTING = {"namespace", "term", "impact", "tf", "length", "id", "cluster", "importance", "demoted_at"}


def _postings_schema() -> Any:
    """The Iceberg schema of ``cabrain.memory_index_terms``."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import FloatType, IntegerType, NestedField, StringType, TimestamptzType

    kinds = {pa.string(): StringType, pa.float32(): FloatType, pa.int32(): IntegerType}
    return Schema(
        *(
            NestedField(
                i,
                name,
                TimestamptzType() if pa.types.is_timestamp(kind) else kinds[kind](),
                required=name in REQUIRED_POSTING,
            )
            for i, (name, kind) in enumerate(_postings_arrow(), start=1)
        )
    )


def _write_postings(table: Table, postings: pa.Table, avgdl: float) -> str:
    """Write a namespace's ``postings`` (sorted by word) as one Parquet data file of ``table``, in
    row groups of ``POSTING_GROUP_ROWS``, the rows' mean length in its metadata; its path."""
    import uuid

    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = schema_to_pyarrow(table.schema())
    data = postings.select(schema.names).cast(schema)
    props = table.properties
    codec = props.get("write.parquet.compression-codec", "zstd")
    level = props.get("write.parquet.compression-level")
    path = table.location_provider().new_data_location(f"{uuid.uuid4()}.parquet")
    with table.io.new_output(path).create(overwrite=True) as out:
        with pq.ParquetWriter(
            out,
            schema=schema.with_metadata({**(schema.metadata or {}), AVGDL_KEY: repr(float(avgdl)).encode()}),
            compression="none" if codec == "uncompressed" else codec,
            compression_level=None if level is None else int(level),
        ) as writer:
            writer.write_table(data, row_group_size=POSTING_GROUP_ROWS)
    return path


def _sample(scan: Any, upper: int, seed: int) -> tuple[int | None, int, np.ndarray, float]:
    """The namespace's embedding dimension (the most common), how many rows have one of it, a
    seeded sample of those embeddings, enough for k-means over :func:`cluster_count` of them, and
    the rows' mean length in tokens (of those whose tokens are stored)."""
    rng = np.random.default_rng(seed)
    want = max(20_000, SAMPLE_PER_CLUSTER * cluster_count(max(upper, 1)))
    keep = min(1.0, want / max(upper, 1))
    counts: dict[int, int] = {}
    kept: dict[int, list[np.ndarray]] = {}
    tokens, measured = 0, 0
    for batch in scan.to_arrow_batch_reader():
        lengths = batch.column("term_count")
        measured += len(lengths) - lengths.null_count
        tokens += int(pc.sum(lengths).as_py() or 0)
        dims = batch.column("embedding_dim").to_pylist()
        for d in {d for d in dims if d}:
            vectors, has = embeddings(batch.column("embedding"), d)
            counts[d] = counts.get(d, 0) + int(has.sum())
            chosen = has & (rng.random(len(has)) < keep) if keep < 1.0 else has
            if chosen.any():
                kept.setdefault(d, []).append(vectors[chosen])
    avgdl = max(tokens / measured, 1.0) if measured else 1.0
    if not counts:
        return None, 0, np.zeros((0, 0), dtype=np.float32), avgdl
    dim = max(sorted(counts), key=lambda d: counts[d])
    return dim, counts[dim], np.concatenate(kept.get(dim, [np.zeros((0, dim), dtype=np.float32)])), avgdl


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


def _one_word(words: Sequence[str]) -> BooleanExpression:
    from pyiceberg.expressions import In, Reference
    from pyiceberg.expressions.literals import literal

    return In(term=Reference("term"), values={literal(w) for w in words})


def arrow_schema_of(columns: Sequence[str]) -> list[tuple[str, pa.DataType]]:
    kinds = {f.name: f.type for f in arrow_schema()}
    return [(c, kinds[c]) for c in columns]


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
        dim, rows_with, sample, avgdl = _sample(scan(("embedding", "embedding_dim", "term_count")), upper, seed)
        if dim is None:
            return None
        centroids = kmeans(sample, cluster_count(rows_with), seed)
        k = len(centroids)
        groups = max(1, min(k, math.ceil(upper / max(group_rows, 1))))
        without_cluster = arrow_schema().remove(arrow_schema().get_field_index("cluster"))
        pairs: list[pa.Table] = []
        postings: list[pa.Table] = []
        settings = self.cold.settings
        k1, b, per_word = settings.bm25_k1, settings.bm25_b, settings.cold_index_word_rows
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
                    terms, lengths = _tokens(table)
                    pairs.append(_word_pairs(terms, cluster))
                    postings.append(_postings(table, terms, lengths, avgdl, k1, b))
                    if len(pairs) >= PAIRS_MERGED_EVERY:
                        pairs = [_merge_pairs(pairs)]
                        postings = [_strongest(postings, per_word)]
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

            copy = self.table()
            paths: list[str] = []
            copied = 0
            try:
                for g in written:
                    with pa.memory_map(f"{spill}/{g}.arrow") as source:
                        data = pa.ipc.open_file(source).read_all().sort_by([("cluster", "ascending")])
                    paths.append(_write_clustered(copy, data))
                    copied += data.num_rows
                    del data

                def replace(table: Table) -> None:
                    with table.transaction() as tx, warnings.catch_warnings():
                        # a namespace's first build has no copy to delete: pyiceberg warns of that
                        warnings.filterwarnings("ignore", "Delete operation did not match any records")
                        tx.delete(equal("namespace", namespace))
                        tx.add_files(paths, check_duplicate_files=False)

                self._commit(replace)
            except BaseException:
                for path in paths:  # written but never committed: nothing refers to them
                    try:
                        copy.io.delete(path)
                    except OSError:
                        pass
                raise
            kept = self._replace_postings(namespace, _strongest(postings, per_word), avgdl)
        return Built(snapshot.snapshot_id, files, centroids, copied, _words(pairs), kept)

    def postings_table(self) -> Table:
        """The index's postings (``cabrain.memory_index_terms``), created on first use."""
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.transforms import IdentityTransform

        catalog = self.cold._catalog
        try:
            with private_files():
                catalog.create_namespace_if_not_exists(NAMESPACE)
                schema = _postings_schema()
                spec = PartitionSpec(
                    PartitionField(schema.find_field("namespace").field_id, 1000, IdentityTransform(), "namespace")
                )
                table = catalog.create_table_if_not_exists(
                    TERMS_TABLE, schema=schema, partition_spec=spec, properties=TERMS_PROPERTIES
                )
        except Exception as exc:
            raise ColdStoreError(f"cannot open the cold-tier index table {TERMS_TABLE}: {exc}") from exc
        return table.refresh()

    def _replace_postings(self, namespace: str, postings: pa.Table, avgdl: float) -> int:
        """Replace ``namespace``'s postings with ``postings`` (sorted by word) in one commit."""
        table = self.postings_table()
        postings = postings.append_column("namespace", pa.array([namespace] * postings.num_rows, type=pa.string()))
        path = _write_postings(table, postings, avgdl) if postings.num_rows else None

        def replace(current: Table) -> None:
            with current.transaction() as tx, warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Delete operation did not match any records")
                tx.delete(equal("namespace", namespace))
                if path is not None:
                    tx.add_files([path], check_duplicate_files=False)

        try:
            self._commit(replace, table)
        except BaseException:
            if path is not None:
                try:
                    table.io.delete(path)
                except OSError:
                    pass
            raise
        return postings.num_rows

    def _commit(self, change: Any, table: Table | None = None, attempts: int = 8) -> Any:
        from pyiceberg.exceptions import CommitFailedException

        delay = 0.05
        for attempt in range(attempts):
            try:
                with private_files():
                    return change(self.table() if table is None else table.refresh())
            except CommitFailedException:
                if attempt == attempts - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            except Exception as exc:
                raise ColdStoreError(f"writing {INDEX_TABLE if table is None else TERMS_TABLE} failed: {exc}") from exc

    # --- reading -------------------------------------------------------------------------------------
    def remainder(self, namespace: str, known: frozenset[str]) -> list[FileScanTask]:
        """The data files of ``cabrain.memories`` holding ``namespace``'s rows that are not among the
        ``known`` ones (those the index was built from): planned once per snapshot of the table."""
        main = self.cold.refresh()
        snapshot = main.current_snapshot()
        if snapshot is None:
            return []
        key = (main.metadata.location, namespace, snapshot.snapshot_id, hash(known))
        found = _REMAINDERS.get(key)
        if found is None:
            tasks = main.scan(row_filter=equal("namespace", namespace)).plan_files()
            found = [task for task in tasks if task.file.file_path not in known]
            if len(_REMAINDERS) > 64:
                _REMAINDERS.clear()
            _REMAINDERS[key] = found
        return found

    def layout(self, namespace: str, postings: bool = False) -> tuple[Table, Layout]:
        """The copy's table and where ``namespace``'s clusters lie in it, or (``postings``) the
        postings' table and where each word's are; read once per snapshot."""
        index = self.postings_table() if postings else self.table()
        snapshot = index.current_snapshot()
        key = (index.metadata.location, namespace, -1 if snapshot is None else snapshot.snapshot_id)
        found = _LAYOUTS.get(key)
        if found is None:
            tasks = [] if snapshot is None else list(index.scan(row_filter=equal("namespace", namespace)).plan_files())
            found = Layout.of(index, tasks, "term" if postings else "cluster")
            if len(_LAYOUTS) > 64:
                _LAYOUTS.clear()
            _LAYOUTS[key] = found
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
        columns = [name for name, _ in _POSTING_ARROW]
        filtered = And(equal("namespace", namespace), row_filter)
        batches = [
            *_read_groups(table, layout, list(words), filtered, columns),
            *_read(table, namespace, And(row_filter, _one_word(words)), columns, layout.through_iceberg),
        ]
        schema = pa.schema(_POSTING_ARROW)
        tables = [pa.Table.from_batches([b]).select(schema.names).cast(schema) for b in batches]
        return (pa.concat_tables(tables) if tables else schema.empty_table()), avgdl

    def batches(
        self,
        namespace: str,
        clusters: Sequence[int],
        row_filter: BooleanExpression,
        columns: Sequence[str],
        remainder: list[FileScanTask],
    ) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Rows of the probed ``clusters`` (and the rows without one) from the copy, then every row
        of the ``remainder`` files, matching ``row_filter``; (data files read, batches)."""

        files, probed, rest = self.parts(namespace, clusters, row_filter, columns, remainder)

        def stream() -> Iterator[pa.RecordBatch]:
            yield from probed
            yield from rest

        return files, stream()

    def parts(
        self,
        namespace: str,
        clusters: Sequence[int],
        row_filter: BooleanExpression,
        columns: Sequence[str],
        remainder: list[FileScanTask],
    ) -> tuple[int, Iterator[pa.RecordBatch], Iterator[pa.RecordBatch]]:
        """:meth:`batches` as its two parts: (data files read, the probed clusters' rows, the
        remainder's rows)."""
        from pyiceberg.expressions import And

        clusters = sorted({*(int(c) for c in clusters), UNCLUSTERED})
        try:
            index, layout = self.layout(namespace)
        except Exception as exc:
            raise ColdStoreError(f"reading the cold-tier index of {namespace!r} failed: {exc}") from exc
        probed = And(equal("namespace", namespace), row_filter)
        files = len(layout.groups(clusters)) + len(layout.through_iceberg)

        def from_index() -> Iterator[pa.RecordBatch]:
            yield from _read_groups(index, layout, clusters, probed, columns)
            yield from _read(index, namespace, And(row_filter, probe_filter(clusters)), columns, layout.through_iceberg)

        return files + len(remainder), from_index(), _read(self.cold.table(), namespace, row_filter, columns, remainder)

    def rows(
        self, namespace: str, found: Sequence[tuple[str, int]], row_filter: BooleanExpression, columns: Sequence[str]
    ) -> pa.Table:
        """The rows of the copy with these (id, cluster) pairs that match ``row_filter``: what a
        hit found by its words alone is read back from (its cluster's row groups)."""
        from pyiceberg.expressions import And

        from cabrain.store.cold import one_of

        if not found:
            return pa.schema(arrow_schema_of(columns)).empty_table()
        index, layout = self.layout(namespace)
        wanted = And(And(equal("namespace", namespace), row_filter), one_of("id", {i for i, _ in found}))
        clusters = sorted({int(c) for _, c in found})
        batches = [
            *_read_groups(index, layout, clusters, wanted, columns),
            *_read(index, namespace, And(wanted, probe_filter(clusters)), columns, layout.through_iceberg),
        ]
        schema = pa.schema(arrow_schema_of(columns))
        tables = [pa.Table.from_batches([b]).select(schema.names).cast(schema) for b in batches]
        return pa.concat_tables(tables) if tables else schema.empty_table()


def _write_clustered(table: Table, data: pa.Table) -> str:
    """Write ``data`` (rows of one namespace, sorted by cluster) as a Parquet data file of the copy
    ``table``, each cluster in row groups of its own (:class:`Layout`), as pyiceberg writes a data
    file otherwise (its schema with field ids, the table's codec); its path, for ``add_files``."""
    import uuid

    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = schema_to_pyarrow(table.schema())
    data = data.select(schema.names).cast(schema)
    props = table.properties
    codec = props.get("write.parquet.compression-codec", "zstd")
    level = props.get("write.parquet.compression-level")
    path = table.location_provider().new_data_location(f"{uuid.uuid4()}.parquet")
    cluster = data.column("cluster").to_numpy()
    bounds = np.flatnonzero(np.diff(cluster)) + 1
    starts = np.concatenate([[0], bounds]).astype(int)
    ends = np.concatenate([bounds, [len(cluster)]]).astype(int)
    with table.io.new_output(path).create(overwrite=True) as out:
        with pq.ParquetWriter(
            out,
            schema=schema,
            compression="none" if codec == "uncompressed" else codec,
            compression_level=None if level is None else int(level),
        ) as writer:
            for start, end in zip(starts, ends, strict=True):
                writer.write_table(data.slice(start, end - start), row_group_size=CLUSTER_GROUP_MAX)
    return path


@dataclass(frozen=True)
class Layout:
    """Where each cluster's rows lie in a namespace's copy (or each word's postings, ``column``
    "term"): the row groups of its data files, each with the smallest and largest value it holds
    (from the files' footers, read once per snapshot). A build writes every cluster in row groups
    of its own, so a probe reads exactly its clusters' rows; files rewritten since (a purge) hold
    row groups of several clusters, whose rows of other clusters are filtered out after the read."""

    files: list[str]
    footers: list[Any]  # pyarrow.parquet.FileMetaData, per file
    file_of: np.ndarray  # per row group: its file
    group: np.ndarray  # its index in the file
    low: np.ndarray
    high: np.ndarray
    through_iceberg: list[FileScanTask]  # files with delete files (read by pyiceberg, whole)
    column: str = "cluster"

    @classmethod
    def of(cls, table: Table, tasks: Sequence[FileScanTask], column: str = "cluster") -> Layout:
        import pyarrow.parquet as pq

        files: list[str] = []
        footers: list[Any] = []
        through: list[FileScanTask] = []
        file_of: list[int] = []
        group: list[int] = []
        low: list[Any] = []
        high: list[Any] = []
        numeric = column == "cluster"
        unknown = (np.iinfo(np.int32).min, np.iinfo(np.int32).max) if numeric else ("", "\U0010ffff" * 8)
        for task in tasks:
            if task.delete_files:
                through.append(task)
                continue
            with table.io.new_input(task.file.file_path).open() as source:
                footer = pq.read_metadata(source)
            at = footer.schema.to_arrow_schema().get_field_index(column)
            for i in range(footer.num_row_groups):
                stats = footer.row_group(i).column(at).statistics
                if stats is None or not stats.has_min_max:  # unknown: always read
                    lo, hi = unknown
                else:
                    lo, hi = stats.min, stats.max
                file_of.append(len(files))
                group.append(i)
                low.append(lo)
                high.append(hi)
            files.append(task.file.file_path)
            footers.append(footer)
        kind = np.int64 if numeric else object
        return cls(
            files,
            footers,
            np.asarray(file_of, dtype=np.int64),
            np.asarray(group, dtype=np.int64),
            np.asarray(low, dtype=kind),
            np.asarray(high, dtype=kind),
            through,
            column,
        )

    def groups(self, values: Sequence[Any]) -> dict[int, tuple[list[int], bool]]:
        """The row groups that may hold rows of ``values``, by file: (row groups, whether each
        holds those values only)."""
        wanted = np.asarray(sorted(set(values)), dtype=self.low.dtype)
        if not len(wanted) or not len(self.low):
            return {}
        at = np.searchsorted(wanted, self.low)
        hit = (at < len(wanted)) & np.asarray(wanted[np.minimum(at, len(wanted) - 1)] <= self.high, dtype=bool)
        out: dict[int, tuple[list[int], bool]] = {}
        for j in np.flatnonzero(hit):
            f = int(self.file_of[j])
            groups, exact = out.get(f, ([], True))
            groups.append(int(self.group[j]))
            out[f] = (groups, bool(exact and self.low[j] == self.high[j]))
        return out

    def avgdl(self) -> float | None:
        """The rows' mean length the postings were weighted with (their files' metadata)."""
        for footer in self.footers:
            value = (footer.metadata or {}).get(AVGDL_KEY)
            if value is not None:
                return float(value)
        return None


# (table, namespace, snapshot) -> the copy's layout; the main table's files not in an index
_LAYOUTS: dict[tuple[str, str, int], Layout] = {}
_REMAINDERS: dict[tuple[str, str, int, int], list[FileScanTask]] = {}


def _read_groups(
    table: Table,
    layout: Layout,
    clusters: Sequence[Any],
    row_filter: BooleanExpression,
    columns: Sequence[str],
) -> Iterator[pa.RecordBatch]:
    """The rows of ``clusters`` (the values of ``layout.column``) in ``layout``'s row groups that
    match ``row_filter``, read with pyarrow from the data files (their footers known): no planning,
    no row group of other clusters."""
    import pyarrow.parquet as pq

    key = layout.column
    wanted = pa.array(sorted(set(clusters)), type=pa.int32() if key == "cluster" else pa.string())
    expression, filtered = arrow_filter(table, row_filter)
    read = list(dict.fromkeys([*columns, *filtered]))
    for f, (groups, exact) in sorted(layout.groups(clusters).items()):
        with table.io.new_input(layout.files[f]).open() as source:
            data = pq.ParquetFile(source, metadata=layout.footers[f]).read_row_groups(
                groups, columns=list(dict.fromkeys([*read, key]))
            )
        mask = expression if exact else (pc.field(key).isin(wanted) & expression)
        data = data.filter(mask).select(list(columns))
        yield from data.to_batches()


def arrow_filter(table: Table, row_filter: BooleanExpression) -> tuple[Any, list[str]]:
    """``row_filter`` as a pyarrow expression over ``table``'s columns, and the columns it reads."""
    from pyiceberg.expressions.visitors import bind, extract_field_ids
    from pyiceberg.io.pyarrow import expression_to_pyarrow

    schema = table.schema()
    bound = bind(schema, row_filter, case_sensitive=True)
    names = (schema.find_column_name(i) for i in extract_field_ids(bound))
    return expression_to_pyarrow(bound, schema), sorted(n for n in names if n is not None)


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
