"""The cold index's Parquet files (:mod:`cabrain.store.cold_index`): written by a build with the
layout a query reads (each cluster in row groups of its own; postings sorted by word), added to
their Iceberg tables as they are, and read straight from the files by their footers (:class:`Layout`,
read once per snapshot), not through a scan planned per query."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cabrain.store.cold import FIELDS, equal, local
from cabrain.store.cold_stream import windows
from cabrain.store.cold_words import REQUIRED_POSTING, postings_arrow

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import FileScanTask, Table

# Rows per row group of one cluster (a build writes each cluster apart, sorted by id): a probe's first
# pass reads its clusters' light columns (ids, codes), and the hits' whole rows are read back from the
# one row group each lies in (by its cluster and the group's range of ids), so a group this small.
CLUSTER_GROUP_MAX = 1024
# The copy's columns written without dictionary or compression: distinct per row (ids, embeddings) or
# read by every probe (codes, whose bytes compress little and are read most).
PLAIN_COLUMNS = ("id", "embedding", "code")
POSTING_GROUP_ROWS = 2048  # postings per Parquet row group of the terms table: the unit a query word reads
AVGDL_KEY = b"cabrain.avgdl"  # a postings file's metadata: the mean length (in tokens) of the rows indexed
TERMS_PROPERTIES = {"write.parquet.row-group-limit": str(POSTING_GROUP_ROWS)}


# --- the copy's schema ---------------------------------------------------------------------------------
def copy_schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import BinaryType, IntegerType, NestedField

    from cabrain.store.cold import _iceberg_schema

    base = _iceberg_schema()
    n = len(base.fields)
    return Schema(
        *base.fields,
        NestedField(n + 1, "cluster", IntegerType(), required=True),
        NestedField(n + 2, "code", BinaryType(), required=False),  # added to older copies (add_code)
    )


def arrow_schema() -> pa.Schema:
    return pa.schema(
        [pa.field(name, kind, nullable=not required) for name, kind, required in FIELDS]
        + [pa.field("cluster", pa.int32(), nullable=False), pa.field("code", pa.binary(), nullable=True)]
    )


def add_code(table: Table) -> None:
    """Add the ``code`` column to a copy made before it (its rows' codes are null: scored by their
    embeddings until the next build)."""
    from pyiceberg.types import BinaryType

    if "code" in {f.name for f in table.schema().fields}:  # another process added it first
        return
    with table.update_schema() as update:
        update.add_column("code", BinaryType())


def arrow_schema_of(columns: Sequence[str]) -> list[tuple[str, pa.DataType]]:
    kinds = {f.name: f.type for f in arrow_schema()}
    return [(c, kinds[c]) for c in columns]


def postings_schema() -> Any:
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
            for i, (name, kind) in enumerate(postings_arrow(), start=1)
        )
    )


def write_postings(table: Table, postings: pa.Table, avgdl: float) -> str:
    """Write a namespace's ``postings`` (sorted by word) as one Parquet data file of ``table``, in
    row groups of ``POSTING_GROUP_ROWS``, the rows' mean length in its metadata; its path."""
    return _write(
        table, postings, [(0, postings.num_rows)], POSTING_GROUP_ROWS, {AVGDL_KEY: repr(float(avgdl)).encode()}
    )


def write_clustered(table: Table, data: pa.Table) -> str:
    """Write ``data`` (rows of one namespace, sorted by cluster and id) as a Parquet data file of the
    copy ``table``, each cluster in row groups of its own (:class:`Layout`); its path, for ``add_files``."""
    cluster = data.column("cluster").to_numpy()
    bounds = np.flatnonzero(np.diff(cluster)) + 1
    starts = np.concatenate([[0], bounds]).astype(int)
    ends = np.concatenate([bounds, [len(cluster)]]).astype(int)
    return _write(table, data, list(zip(starts, ends, strict=True)), CLUSTER_GROUP_MAX, plain=PLAIN_COLUMNS)


def _write(
    table: Table,
    data: pa.Table,
    parts: list[tuple[int, int]],
    group_rows: int,
    metadata: dict[bytes, bytes] | None = None,
    plain: Sequence[str] = (),
) -> str:
    """``data`` as a new Parquet data file of ``table``, as pyiceberg writes one (its schema with
    field ids, the table's codec), each of ``parts`` (row ranges) in row groups of its own of
    ``group_rows`` rows at most, the ``plain`` columns without dictionary or compression; its path."""
    import uuid

    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = schema_to_pyarrow(table.schema())
    data = data.select(schema.names).cast(schema)
    if metadata:
        schema = schema.with_metadata({**(schema.metadata or {}), **metadata})
    props = table.properties
    codec = props.get("write.parquet.compression-codec", "zstd")
    codec = "none" if codec == "uncompressed" else codec
    level = props.get("write.parquet.compression-level")
    path = table.location_provider().new_data_location(f"{uuid.uuid4()}.parquet")
    with table.io.new_output(path).create(overwrite=True) as out:
        with pq.ParquetWriter(
            out,
            schema=schema,
            compression={name: "none" if name in plain else codec for name in schema.names},
            compression_level=(
                None if level is None or codec == "none" else {n: int(level) for n in schema.names if n not in plain}
            ),
            use_dictionary=[name for name in schema.names if name not in plain],
        ) as writer:
            for start, end in parts:
                writer.write_table(data.slice(start, end - start), row_group_size=group_rows)
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
    id_low: np.ndarray | None = None  # per row group of the copy: its smallest and largest id
    id_high: np.ndarray | None = None

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
        ids: list[tuple[str, str]] = []
        for task in tasks:
            if task.delete_files:
                through.append(task)
                continue
            with table.io.new_input(task.file.file_path).open() as source:
                footer = pq.read_metadata(source)
            names = footer.schema.to_arrow_schema().names
            at = names.index(column)
            for i in range(footer.num_row_groups):
                file_of.append(len(files))
                group.append(i)
                lo, hi = _bounds(footer.row_group(i).column(at).statistics, unknown)
                low.append(lo)
                high.append(hi)
                if numeric:
                    ids.append(_bounds(footer.row_group(i).column(names.index("id")).statistics, ("", "\uffff")))
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
            np.asarray([lo for lo, _ in ids], dtype=object) if numeric else None,
            np.asarray([hi for _, hi in ids], dtype=object) if numeric else None,
        )

    def holding(self, found: Sequence[tuple[str, int]]) -> dict[int, tuple[list[int], bool]]:
        """The row groups of the copy that may hold these (id, cluster) rows, by file (as
        :meth:`groups`): each row's cluster's groups whose range of ids holds its id (one, for a
        file a build wrote), so that reading a hit back reads its row group and no other."""
        if self.id_low is None or self.id_high is None:
            return self.groups([c for _, c in found])
        out: dict[int, tuple[list[int], bool]] = {}
        for memory_id, cluster in found:
            for j in np.flatnonzero((self.low <= cluster) & (self.high >= cluster)):
                if not self.id_low[j] <= memory_id <= self.id_high[j]:
                    continue
                f = int(self.file_of[j])
                groups, exact = out.get(f, ([], True))
                if int(self.group[j]) not in groups:
                    groups.append(int(self.group[j]))
                out[f] = (groups, bool(exact and self.low[j] == self.high[j]))
        return {f: (sorted(groups), exact) for f, (groups, exact) in out.items()}

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


def _bounds(stats: Any, unknown: tuple[Any, Any]) -> tuple[Any, Any]:
    """A column chunk's smallest and largest value; ``unknown`` (always read) without statistics."""
    return unknown if stats is None or not stats.has_min_max else (stats.min, stats.max)


# (table, namespace, snapshot) -> the copy's layout; the main table's files not in an index


LAYOUTS: dict[tuple[str, str, int], Layout] = {}


REMAINDERS: dict[tuple[str, str, int, int], list[FileScanTask]] = {}


def read_groups(
    table: Table,
    layout: Layout,
    clusters: Sequence[Any],
    row_filter: BooleanExpression,
    columns: Sequence[str],
    groups: dict[int, tuple[list[int], bool]] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``clusters`` (the values of ``layout.column``) in ``layout``'s row groups that
    match ``row_filter``, read with pyarrow from the data files (their footers known): no planning,
    no row group of other clusters (``groups``: those of :meth:`Layout.groups` or fewer)."""
    import pyarrow.parquet as pq

    key = layout.column
    wanted = pa.array(sorted(set(clusters)), type=pa.int32() if key == "cluster" else pa.string())
    expression, filtered = arrow_filter(table, row_filter)
    read = list(dict.fromkeys([*columns, *filtered]))
    for f, (chosen, exact) in sorted((layout.groups(clusters) if groups is None else groups).items()):
        with table.io.new_input(layout.files[f]).open() as source:
            data = pq.ParquetFile(source, metadata=layout.footers[f]).read_row_groups(
                chosen, columns=list(dict.fromkeys([*read, key]))
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


def read_tasks(
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
    yield from windows(scan, tasks)  # a few files at a time


# The copy's columns a probe's first pass never reads (a hit's whole row, read back, does): warming
# leaves them out, so that what it keeps in memory is the part every probe reads.
UNWARMED = ("embedding", "content", "metadata", "terms", "source_ref", "superseded_by", "demote_batch")
WARM_READ = 8 << 20  # bytes read at a time
WARM_GROUP = 64 << 20  # bytes read twice in a row (warm)


def chunk_ranges(footer: Any, skip: Sequence[str] = UNWARMED) -> list[tuple[int, int]]:
    """The byte ranges (start, length) of a Parquet file's column chunks but ``skip``'s, in file order,
    adjacent ones joined."""
    ranges: list[tuple[int, int]] = []
    for i in range(footer.num_row_groups):
        group = footer.row_group(i)
        for j in range(group.num_columns):
            chunk = group.column(j)
            if chunk.path_in_schema.split(".")[0] in skip:
                continue
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and chunk.dictionary_page_offset:
                start = min(start, chunk.dictionary_page_offset)
            ranges.append((start, chunk.total_compressed_size))
    joined: list[tuple[int, int]] = []
    for start, length in sorted(ranges):
        if joined and start <= joined[-1][0] + joined[-1][1]:
            last_start, last_length = joined[-1]
            joined[-1] = (last_start, max(last_length, start + length - last_start))
        else:
            joined.append((start, length))
    return joined


def warm(table: Table, layout: Layout, skip: Sequence[str] = UNWARMED) -> int:
    """Read the column chunks of ``layout``'s local files but ``skip``'s (:func:`chunk_ranges`) and
    drop them: the operating system keeps what a local file read in its page cache, so that a probe's
    first pass reads memory, not the disk (an object store's files are left alone: nothing would keep
    them). Each group of ranges is read twice, the second time from memory through a file opened
    anew: Linux puts a page read once on its inactive list, evicted first and kept small beside pages
    read more often (a scan of the whole tier, read three times, would push the warmed columns out as
    they were read); a page read twice joins the active list, the working set. (A second read through
    the same file would not count for a page the read before it ended in: the kernel counts a run of
    small reads of one page once.) The bytes read (once)."""
    read = 0
    for path, footer in zip(layout.files, layout.footers, strict=True):
        if not local(path):
            continue
        for group in _groups(chunk_ranges(footer, skip)):
            for _ in range(2):
                with table.io.new_input(path).open() as source:
                    done = _read(source, group)
            read += done
    return read


def _groups(ranges: list[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
    """``ranges`` in runs of about :data:`WARM_GROUP` bytes (read twice while still in memory)."""
    group: list[tuple[int, int]] = []
    size = 0
    for start, length in ranges:
        group.append((start, length))
        size += length
        if size >= WARM_GROUP:
            yield group
            group, size = [], 0
    if group:
        yield group


def _read(source: Any, ranges: list[tuple[int, int]]) -> int:
    """Read ``ranges`` of ``source`` and drop what was read: the bytes read."""
    read = 0
    for start, length in ranges:
        source.seek(start)
        while length > 0:
            data = source.read(min(length, WARM_READ))
            if not data:
                break
            length -= len(data)
            read += len(data)
    return read
