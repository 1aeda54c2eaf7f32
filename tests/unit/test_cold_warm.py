"""What warming the cold index reads (cabrain.store.cold_files.chunk_ranges): the byte ranges of a
Parquet file's column chunks but the skipped columns', adjacent ones joined, each inside the file."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cabrain.store.cold import local
from cabrain.store.cold_files import UNWARMED, chunk_ranges


def _file(tmp_path: Path) -> Path:
    n = 1000
    table = pa.table(
        {
            "id": [f"{i:08d}" for i in range(n)],
            "embedding": [bytes([i % 251]) * 64 for i in range(n)],
            "code": [bytes([i % 13]) * 16 for i in range(n)],
            "visibility": ["team" if i % 3 else "private" for i in range(n)],  # a dictionary page
            "content": [f"text {i} " * 5 for i in range(n)],
        }
    )
    path = tmp_path / "copy.parquet"
    pq.write_table(table, path, row_group_size=256)
    return path


def _chunks(footer, names: set[str]) -> int:
    return sum(
        footer.row_group(i).column(j).total_compressed_size
        for i in range(footer.num_row_groups)
        for j in range(footer.num_columns)
        if footer.row_group(i).column(j).path_in_schema in names
    )


def test_the_ranges_hold_the_warmed_columns_and_join_adjacent_ones(tmp_path: Path) -> None:
    path = _file(tmp_path)
    footer = pq.read_metadata(path)
    size = path.stat().st_size
    every = chunk_ranges(footer, skip=())
    # every column chunk, back to back after the file's magic: one range
    assert every == [(4, _chunks(footer, {"id", "embedding", "code", "visibility", "content"}))]
    warmed = chunk_ranges(footer)
    assert {"embedding", "content"} <= set(UNWARMED)
    assert sum(length for _, length in warmed) == _chunks(footer, {"id", "code", "visibility"})
    assert len(warmed) == footer.num_row_groups * 2  # id; code and visibility, adjacent: joined
    ends = [start + length for start, length in warmed]
    assert all(0 < start < end <= size for (start, _), end in zip(warmed, ends, strict=True))
    assert all(ends[i] <= warmed[i + 1][0] for i in range(len(warmed) - 1))  # in file order, apart


def test_only_local_files_are_warmed() -> None:
    assert local("/var/cabrain/cold/warehouse/a.parquet") and local("file:///var/cabrain/a.parquet")
    assert not local("s3://bucket/warehouse/a.parquet") and not local("gs://bucket/a.parquet")
