"""Reading a pyiceberg scan a few data files at a time (:func:`stream`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyiceberg.table import FileScanTask

STREAM_FILES = 2  # data files a streamed scan reads at once (see stream)


def stream(scan: Any, tasks: Sequence[FileScanTask] | None = None, window: int = STREAM_FILES) -> pa.RecordBatchReader:
    """A pyiceberg scan's rows as record batches, reading ``window`` of its data files (``tasks``:
    planned already) at a time. pyiceberg's ``to_arrow_batch_reader`` hands every file to its thread
    pool at once and keeps what they read until it is consumed, so a consumer slower than the reads
    (an index build, archive recall's scan) held the whole scan in memory: ten million cold rows
    took the build past 22 GB. Batches are those of ``to_arrow_batch_reader`` (the same schema)."""
    from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow

    projected = scan.projection()
    target = schema_to_pyarrow(projected)
    planned = list(scan.plan_files()) if tasks is None else list(tasks)
    reader = ArrowScan(scan.table_metadata, scan.io, projected, scan.row_filter, scan.case_sensitive)

    return pa.RecordBatchReader.from_batches(target, windows(reader, planned, window)).cast(target)


def windows(reader: Any, tasks: Sequence[FileScanTask], window: int = STREAM_FILES) -> Iterator[pa.RecordBatch]:
    """The batches of a pyiceberg ``ArrowScan`` over ``tasks``, ``window`` data files at a time."""
    step = max(1, window)
    for start in range(0, len(tasks), step):
        yield from reader.to_record_batches(tasks[start : start + step])


__all__ = ["STREAM_FILES", "stream", "windows"]
