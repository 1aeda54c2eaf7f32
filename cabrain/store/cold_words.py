"""The words of the cold tier's index (:mod:`cabrain.store.cold_index`): each word's clusters and
row count (``cold_index_terms``), and its postings, the rows where it weighs most by BM25
(``cabrain.memory_index_terms``), computed batch by batch as a build reads the rows, and merged as
it goes so that they grow with the words, not the rows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cabrain.store.cold import FIELDS

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


def word_pairs(terms: pa.ChunkedArray | pa.Array, cluster: np.ndarray) -> pa.Table:
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


def merge_pairs(pairs: Sequence[pa.Table]) -> pa.Table:
    """The :func:`word_pairs` of disjoint sets of rows as one table of the same columns (a build
    merges them as it goes, so that they grow with the words and clusters, not the rows)."""
    merged = pa.concat_tables(pairs).group_by(["term", "cluster"]).aggregate([("rows", "sum")])
    return merged.select(["term", "cluster", "rows_sum"]).rename_columns(["term", "cluster", "rows"])


def words_of(pairs: Sequence[pa.Table]) -> list[tuple[str, int, list[int]]]:
    """Each word of the :func:`word_pairs` of disjoint sets of rows: the rows it occurs in and its
    clusters (ascending)."""
    if not pairs:
        return []
    merged = merge_pairs(pairs)
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


def tokens_of(table: pa.Table) -> tuple[pa.Array, np.ndarray]:
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


def postings_of(table: pa.Table, terms: pa.Array, lengths: np.ndarray, avgdl: float, k1: float, b: float) -> pa.Table:
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


def strongest(postings: Sequence[pa.Table], per_word: int) -> pa.Table:
    """The ``per_word`` postings of each word with the highest impact (ties: the lower id), sorted
    by word then impact: what a build keeps of them, merged as it goes."""
    if not postings:
        return pa.table({name: pa.array([], type=kind) for name, kind in POSTING_ARROW})
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


def postings_arrow() -> list[tuple[str, pa.DataType]]:
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


POSTING_ARROW = [(name, kind) for name, kind in postings_arrow() if name != "namespace"]


REQUIRED_POSTING = {"namespace", "term", "impact", "tf", "length", "id", "cluster", "importance", "demoted_at"}
