"""The cold tier's one Iceberg table, ``cabrain.memories``: what demotion writes and archive recall reads.

Partitioned by ``namespace`` and ``valid_month`` (identity transforms), so a namespace's scan
plans only that namespace's files and a time range only its months. Every demotion batch is one
append (one snapshot) whose files hold only that batch and whose snapshot summary carries
``cabrain.batch``, so "is this batch in the cold tier already?" is answered from the table itself.
Nothing is ever deleted or rewritten here, except a forgotten memory's row once its forget is older
than ``CABRAIN_COLD_FORGOTTEN_RETENTION_DAYS`` (unset: never), with the table's older snapshots, which
keep it until then (:meth:`ColdTier.purge`). Files and folders of a local warehouse are the service
user's alone.

Embeddings are stored as little-endian float32 bytes (``embedding``, with ``embedding_dim``).

pyiceberg (and ``pyarrow.fs``) are imported where they are used: heavy, and the hot tier never needs them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa

from cabrain.errors import ColdStoreError
from cabrain.providers.cold_store import open_catalog, private_files
from cabrain.settings import Settings
from cabrain.store.cold_stream import stream
from cabrain.text.tokenizer import tokenize

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

NAMESPACE = "cabrain"
TABLE = f"{NAMESPACE}.memories"
INDEX_TABLE = f"{NAMESPACE}.memory_index"  # the clustered copy archive recall probes (cabrain.store.cold_index)
TERMS_TABLE = f"{NAMESPACE}.memory_index_terms"  # each word's strongest rows (cabrain.store.cold_index)
BATCH_PROPERTY = "cabrain.batch"
# No column statistics of the texts in the manifests: their lower and upper bounds would copy the
# first characters of memories there, where a purge of forgotten rows could not reach them.
TABLE_PROPERTIES = {
    f"write.metadata.metrics.column.{c}": "none" for c in ("content", "metadata", "terms", "source_ref")
}

# (name, arrow type, required)
FIELDS: list[tuple[str, pa.DataType, bool]] = [
    ("id", pa.string(), True),
    ("namespace", pa.string(), True),
    ("valid_month", pa.string(), True),
    ("owner_agent_id", pa.string(), False),
    ("visibility", pa.string(), True),
    ("network", pa.string(), True),
    ("memory_type", pa.string(), True),
    ("content", pa.string(), True),
    ("source_kind", pa.string(), False),
    ("source_ref", pa.string(), False),
    ("embedding", pa.binary(), False),
    ("embedding_dim", pa.int32(), False),
    ("importance", pa.float32(), True),
    ("access_count", pa.int32(), True),
    ("last_accessed_at", pa.timestamp("us", tz="UTC"), False),
    ("created_at", pa.timestamp("us", tz="UTC"), True),
    ("valid_at", pa.timestamp("us", tz="UTC"), True),
    ("invalid_at", pa.timestamp("us", tz="UTC"), False),
    ("superseded_by", pa.string(), False),
    ("metadata", pa.string(), True),  # JSON
    ("demote_batch", pa.string(), True),
    ("demoted_at", pa.timestamp("us", tz="UTC"), True),
    # The content's keyword tokens (cabrain.text.tokenizer) as " t1  t2  t3 ": each token between
    # its own spaces, so archive recall counts a term with one vectorised substring count instead of
    # tokenizing every archived text per query. Added to tables made before them by schema evolution.
    ("terms", pa.string(), False),
    ("term_count", pa.int32(), False),
]
EVOLVED = ("terms", "term_count")  # optional columns older tables lack until table() adds them
COLUMNS = [name for name, _, _ in FIELDS]
# Everything but the embedding and the tokens: what reading a memory back needs.
ROW_COLUMNS = tuple(c for c in COLUMNS if c not in ("embedding", "embedding_dim", *EVOLVED))


def equal(column: str, value: str) -> BooleanExpression:
    """``column = value`` as a pyiceberg row filter. (Built by keyword: pyiceberg's expressions are
    pydantic models, whose generated signature is what type checkers see.)"""
    from pyiceberg.expressions import EqualTo, Reference
    from pyiceberg.expressions.literals import literal

    return EqualTo(term=Reference(column), value=literal(value))


def one_of(column: str, values: Iterable[str]) -> BooleanExpression:
    """``column IN values`` as a pyiceberg row filter (built as :func:`equal` is)."""
    from pyiceberg.expressions import In, Reference
    from pyiceberg.expressions.literals import literal

    return In(term=Reference(column), values={literal(v) for v in values})


def _iceberg_schema() -> Schema:
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        FloatType,
        IntegerType,
        NestedField,
        StringType,
        TimestamptzType,
    )

    kinds = {pa.string(): StringType, pa.binary(): BinaryType, pa.float32(): FloatType, pa.int32(): IntegerType}
    fields: list[NestedField] = []
    for i, (name, kind, required) in enumerate(FIELDS, start=1):
        iceberg_type = TimestamptzType() if pa.types.is_timestamp(kind) else kinds[kind]()
        fields.append(NestedField(i, name, iceberg_type, required=required))
    return Schema(*fields)


def _partition_spec(schema: Schema) -> PartitionSpec:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    return PartitionSpec(
        PartitionField(schema.find_field("namespace").field_id, 1000, IdentityTransform(), "namespace"),
        PartitionField(schema.find_field("valid_month").field_id, 1001, IdentityTransform(), "valid_month"),
    )


def _evolve(table: Table, schema: Schema) -> Table:
    """Add the columns of ``EVOLVED`` that ``table`` lacks, and ``TABLE_PROPERTIES`` (a table made by
    an older CaBrain)."""
    from pyiceberg.exceptions import CommitFailedException

    if any(table.properties.get(k) != v for k, v in TABLE_PROPERTIES.items()):
        try:
            with table.transaction() as tx:
                tx.set_properties(TABLE_PROPERTIES)
        except CommitFailedException:  # another process set them first
            pass
        table = table.refresh()
    have = {field.name for field in table.schema().fields}
    missing = [name for name in EVOLVED if name not in have]
    if not missing:
        return table

    try:
        with table.update_schema() as update:
            for name in missing:
                update.add_column(name, schema.find_field(name).field_type)
    except CommitFailedException:  # another process evolved it first
        pass
    return table.refresh()


def month_of(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m")


class ColdTier:
    """The Iceberg table of demoted memories (created on first use)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._catalog = open_catalog(settings)
        self._table: Table | None = None

    def table(self) -> Table:
        """The table, created on first use."""
        if self._table is None:
            self._table = self._open()
        return self._table

    def _open(self) -> Table:
        """Open the table, creating it (and its namespace) if missing. Sleep tasks on several nodes
        may all find it missing and race to create it: the losers of that race load what the winner
        made on their next attempt."""
        attempts = 4
        for attempt in range(attempts):
            try:
                with private_files():
                    self._catalog.create_namespace_if_not_exists(NAMESPACE)
                    schema = _iceberg_schema()
                    table = self._catalog.create_table_if_not_exists(
                        TABLE, schema=schema, partition_spec=_partition_spec(schema), properties=TABLE_PROPERTIES
                    )
                    return _evolve(table, schema)
            except Exception as exc:
                if attempt == attempts - 1:
                    raise ColdStoreError(f"cannot open the cold-tier table {TABLE}: {exc}") from exc
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def refresh(self) -> Table:
        self._table = None
        return self.table()

    # --- writing -------------------------------------------------------------------------------------
    def committed_snapshot(self, batch: uuid.UUID) -> int | None:
        """The snapshot that added ``batch``, if one did."""
        for snapshot in self.refresh().snapshots():
            summary = snapshot.summary
            props = getattr(summary, "additional_properties", None) or {}
            if props.get(BATCH_PROPERTY) == str(batch):
                return snapshot.snapshot_id
        return None

    def _commit(self, change: Callable[[Table], None], what: str, attempts: int = 8) -> None:
        """Commit ``change(table)`` on the table's latest state, its files private to this user. A
        commit race lost to another writer (a demotion on another node) is retried on the new state,
        the wait doubling; any other failure is a :class:`ColdStoreError` naming ``what``."""
        from pyiceberg.exceptions import CommitFailedException

        delay = 0.05
        for attempt in range(attempts):
            try:
                with private_files():
                    change(self.refresh())
                return
            except CommitFailedException:
                if attempt == attempts - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            except Exception as exc:
                raise ColdStoreError(f"{what} failed: {exc}") from exc

    def append_batch(self, batch: uuid.UUID, rows: pa.Table) -> int:
        """Append ``rows`` as one snapshot tagged with ``batch``; exactly once, even when called
        again after a crash or racing another writer (a lost commit race is retried on the new
        table state, after checking the batch did not land meanwhile). Returns the snapshot id."""

        def append(table: Table) -> None:
            if self.committed_snapshot(batch) is None:
                table.append(rows, snapshot_properties={BATCH_PROPERTY: str(batch)})

        self._commit(append, f"writing demotion batch {batch} to {TABLE}")
        snapshot = self.committed_snapshot(batch)
        if snapshot is None:
            raise ColdStoreError(f"demotion batch {batch} was appended but no snapshot carries it")
        return snapshot

    def batch_ids(self, namespace: str, batch: uuid.UUID) -> set[str]:
        """The ids the table holds for ``batch`` (read back from the data files, for verification)."""
        from pyiceberg.expressions import And

        scan = self.refresh().scan(
            row_filter=And(equal("namespace", namespace), equal("demote_batch", str(batch))),
            selected_fields=("id",),
        )
        return set(scan.to_arrow().column("id").to_pylist())

    # --- reading -------------------------------------------------------------------------------------
    def scan(
        self,
        namespace: str,
        *,
        months: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
    ) -> pa.Table:
        """A namespace's demoted rows (only its files are planned), optionally some months or ids."""
        from pyiceberg.expressions import And

        expression = equal("namespace", namespace)
        if months:
            expression = And(expression, one_of("valid_month", months))
        if ids:
            expression = And(expression, one_of("id", (str(i) for i in ids)))
        table = self.refresh()
        if table.current_snapshot() is None:
            return pa.table({c: pa.array([], type=t) for c, t, _ in FIELDS if columns is None or c in columns})
        return table.scan(row_filter=expression, selected_fields=tuple(columns or COLUMNS)).to_arrow()

    def batches(
        self, namespace: str, row_filter: BooleanExpression | None = None, columns: Sequence[str] | None = None
    ) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Stream a namespace's rows matching ``row_filter`` (a pyiceberg expression, ANDed with the
        namespace) as Arrow record batches; returns (number of data files planned, batch iterator)."""
        from pyiceberg.expressions import And

        expression = equal("namespace", namespace)
        if row_filter is not None:
            expression = And(expression, row_filter)
        table = self.refresh()
        if table.current_snapshot() is None:
            return 0, iter(())
        scan = table.scan(row_filter=expression, selected_fields=tuple(columns or COLUMNS))
        try:
            tasks = list(scan.plan_files())
            return len(tasks), iter(stream(scan, tasks))
        except Exception as exc:
            raise ColdStoreError(f"reading the cold tier of {namespace!r} failed: {exc}") from exc

    def newest(
        self, namespace: str, ids: Sequence[str], row_filter: BooleanExpression | None = None
    ) -> dict[str, dict[str, Any]]:
        """The rows of ``ids`` (``ROW_COLUMNS``), the newest copy of each: a demotion re-run after a
        crash may have appended a row again with its later state."""
        from pyiceberg.expressions import And

        if not ids:
            return {}
        expression = one_of("id", (str(i) for i in ids))
        _, batches = self.batches(
            namespace, expression if row_filter is None else And(row_filter, expression), ROW_COLUMNS
        )
        newest: dict[str, dict[str, Any]] = {}
        for batch in batches:
            for row in batch.to_pylist():
                seen = newest.get(row["id"])
                if seen is None or row["demoted_at"] > seen["demoted_at"]:
                    newest[row["id"]] = row
        return newest

    # --- forgetting ------------------------------------------------------------------------------------
    def purge(self, namespace: str, ids: Sequence[str]) -> None:
        """Remove the rows of ``ids`` (forgotten memories of ``namespace``) from the table's current
        state: one snapshot rewriting the files that held them. Older snapshots still hold them until
        :meth:`expire` drops those. Safe to repeat: rows already gone match nothing."""
        from pyiceberg.expressions import And

        if not ids:
            return
        expression = And(equal("namespace", namespace), one_of("id", (str(i) for i in ids)))

        def delete(table: Table) -> None:
            if table.current_snapshot() is not None:
                table.delete(expression, snapshot_properties={"cabrain.purge": str(len(ids))})

        self._commit(delete, f"removing forgotten memories of {namespace!r} from {TABLE}")
        for name, index in ((INDEX_TABLE, self.index_table()), (TERMS_TABLE, self.terms_table())):
            if index is None:
                continue  # the index's copy of them too, and their words' postings

            def delete_copy(_: Table, index: Table = index) -> None:
                copy = index.refresh()
                if copy.current_snapshot() is not None:
                    copy.delete(expression, snapshot_properties={"cabrain.purge": str(len(ids))})

            self._commit(delete_copy, f"removing forgotten memories of {namespace!r} from {name}")

    def index_table(self) -> Table | None:
        """The index's clustered copy (:mod:`cabrain.store.cold_index`), once one was built."""
        if not self._catalog.table_exists(INDEX_TABLE):
            return None
        return self._catalog.load_table(INDEX_TABLE)

    def terms_table(self) -> Table | None:
        """The index's postings, each word's strongest rows (:mod:`cabrain.store.cold_index`)."""
        if not self._catalog.table_exists(TERMS_TABLE):
            return None
        return self._catalog.load_table(TERMS_TABLE)

    def expire(self, older_than: datetime) -> dict[str, int]:
        """Drop the snapshots of the table (and of the index's copy) taken before ``older_than`` (never
        the current one), then delete the files no remaining snapshot uses and older than it: what
        purged rows were still kept in. Returns counts."""
        counts = self._expire(self.refresh(), older_than)
        for index in (self.index_table(), self.terms_table()):
            if index is not None:
                for key, n in self._expire(index, older_than).items():
                    counts[key] += n
        return counts

    def _expire(self, table: Table, older_than: datetime) -> dict[str, int]:
        current = table.current_snapshot()
        if current is None:
            return {"snapshots_expired": 0, "files_deleted": 0}
        cutoff_ms = int(older_than.timestamp() * 1000)
        old = [
            snap.snapshot_id
            for snap in table.snapshots()
            if snap.timestamp_ms < cutoff_ms and snap.snapshot_id != current.snapshot_id
        ]
        if old:
            with private_files():
                table.maintenance.expire_snapshots().by_ids(old).commit()
            table = table.refresh()
        live = {table.metadata_location}
        for snap in table.snapshots():
            live.add(snap.manifest_list)
            for manifest in snap.manifests(table.io):
                live.add(manifest.manifest_path)
                live.update(
                    e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
                )
        live = {_path_of(location) for location in live}
        deleted = 0
        for path, modified in self._table_files(table):
            if path not in live and modified < older_than.timestamp():
                table.io.delete(path if "://" in path else "file://" + path)
                deleted += 1
        return {"snapshots_expired": len(old), "files_deleted": deleted}

    @staticmethod
    def _table_files(table: Table) -> Iterator[tuple[str, float]]:
        """Every file under the table's location, with its modification time."""
        from pyarrow.fs import FileSelector, FileType
        from pyiceberg.io.pyarrow import PyArrowFileIO

        io = table.io
        if not isinstance(io, PyArrowFileIO):  # pyiceberg's choice for every scheme while pyarrow is installed
            raise ColdStoreError(f"cannot list the files of {TABLE}: its file IO is {type(io).__name__}, not pyarrow's")
        scheme, netloc, path = io.parse_location(table.location())
        fs = io.fs_by_scheme(scheme, netloc)
        for info in fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True)):
            if info.type == FileType.File:
                modified = info.mtime.timestamp() if info.mtime is not None else 0.0
                yield (f"{scheme}://{info.path}" if scheme not in ("file", "") else info.path), modified

    def files(self, namespace: str) -> list[str]:
        """Data files a scan of ``namespace`` plans (partition pruning, for tests and doctor)."""
        table = self.refresh()
        if table.current_snapshot() is None:
            return []
        return [task.file.file_path for task in table.scan(row_filter=equal("namespace", namespace)).plan_files()]


def local(location: str) -> bool:
    """Whether a warehouse file's location is on this machine's file system (a path or ``file://``)."""
    return urlsplit(location).scheme in ("file", "")


def _path_of(location: str) -> str:
    """A file's location as :meth:`ColdTier._table_files` lists it (local paths without ``file://``)."""
    parts = urlsplit(location)
    if local(location):
        return parts.path
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def to_arrow(rows: Sequence[Any], batch: uuid.UUID, demoted_at: datetime) -> pa.Table:
    """Hot rows (asyncpg records with the memories columns and ``embedding`` as float32 arrays)
    as an Arrow table in the cold schema."""
    data: dict[str, list] = {name: [] for name in COLUMNS}
    for r in rows:
        vector = r["embedding"]
        if vector is not None and hasattr(vector, "to_numpy"):  # pgvector's Vector
            vector = vector.to_numpy()
        blob = None if vector is None else np.asarray(vector, dtype="<f4").tobytes()
        metadata = r["metadata"]
        tokens = tokenize(r["content"])
        values = {
            "id": str(r["id"]),
            "namespace": r["namespace"],
            "valid_month": month_of(r["valid_at"]),
            "owner_agent_id": r["owner_agent_id"],
            "visibility": r["visibility"],
            "network": r["network"],
            "memory_type": r["memory_type"],
            "content": r["content"],
            "source_kind": r["source_kind"],
            "source_ref": r["source_ref"],
            "embedding": blob,
            "embedding_dim": None if vector is None else len(vector),
            "importance": float(r["importance"]),
            "access_count": int(r["access_count"]),
            "last_accessed_at": r["last_accessed_at"],
            "created_at": r["created_at"],
            "valid_at": r["valid_at"],
            "invalid_at": r["invalid_at"],
            "superseded_by": None if r["superseded_by"] is None else str(r["superseded_by"]),
            "metadata": metadata if isinstance(metadata, str) else json.dumps(metadata or {}),
            "demote_batch": str(batch),
            "demoted_at": demoted_at,
            "terms": " " + "  ".join(tokens) + " " if tokens else "",
            "term_count": len(tokens),
        }
        for name in COLUMNS:
            data[name].append(values[name])
    schema = pa.schema([pa.field(name, kind, nullable=not required) for name, kind, required in FIELDS])
    return pa.Table.from_pydict(data, schema=schema)


def vectors_of(table: pa.Table) -> np.ndarray:
    """The ``embedding`` column as a float32 matrix (rows without one are zero)."""
    blobs = table.column("embedding").to_pylist()
    dims = [len(b) // 4 for b in blobs if b]
    if not dims:
        return np.zeros((len(blobs), 0), dtype=np.float32)
    out = np.zeros((len(blobs), dims[0]), dtype=np.float32)
    for i, blob in enumerate(blobs):
        if blob and len(blob) // 4 == dims[0]:
            out[i] = np.frombuffer(blob, dtype="<f4")
    return out


__all__ = ["COLUMNS", "INDEX_TABLE", "ColdTier", "equal", "local", "month_of", "one_of", "to_arrow", "vectors_of"]
