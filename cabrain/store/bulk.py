"""Statements of the bulk import (:mod:`cabrain.portable.bulk`): a batch of new memories staged with
``COPY`` into a temporary table, then written with one set-based statement per table (``memories``,
which registers ``memory_ids`` and ``memory_vectors`` by its triggers and is counted by its
statement-level ones; ``memory_terms``, ``bm25_terms``, ``bm25_namespaces``).

The stage lives for the import's transaction only (``ON COMMIT DROP``): a crash leaves nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
import psutil

from cabrain.store.keyword import UPSERT_DF, UPSERT_STATS

__all__ = [
    "POSTING_COLUMNS",
    "STAGE_COLUMNS",
    "build_indexes",
    "copy_postings",
    "count_terms",
    "drop_indexes",
    "stage",
    "write_staged",
]

# The columns a batch is staged with: every column a restored memory row is written with.
STAGE_COLUMNS = (
    "id", "namespace", "owner_agent_id", "visibility", "network", "memory_type", "content", "source_kind",
    "source_ref", "embedding", "importance", "valid_at", "metadata", "content_hash", "pinned", "thread_turn",
    "created_at", "invalid_at", "access_count", "last_accessed_at", "consolidated_at", "decayed_at",
)  # fmt: skip
CREATE_STAGE = """
CREATE TEMP TABLE cabrain_import_stage (
    id uuid, namespace text, owner_agent_id text, visibility text, network text, memory_type text, content text,
    source_kind text, source_ref text, embedding text STORAGE EXTERNAL, importance real, valid_at timestamptz, metadata jsonb,
    content_hash bytea, pinned boolean, thread_turn int, created_at timestamptz, invalid_at timestamptz,
    access_count int, last_accessed_at timestamptz, consolidated_at timestamptz, decayed_at timestamptz
) ON COMMIT DROP
"""
STAGED = "SELECT to_regclass('pg_temp.cabrain_import_stage') IS NOT NULL"
EMPTY_STAGE = "DROP TABLE cabrain_import_stage"
# its statistics, so that the join back to memories probes their keys rather than reading them all
ANALYZE_STAGE = "ANALYZE cabrain_import_stage"
# The staged rows as memories (their vectors staged as text, which pgvector reads), with their state as the export had it (the row path inserts them and
# then updates their state: the triggers count the same in the end), and each namespace's counter. Its
# created_at is the import's time here, as the row path's insert has it (activity_hours counts an
# import when it was imported); UPDATE_CREATED then sets the exported one, which no trigger watches.
INSERT_STAGED = """
WITH added AS (
    INSERT INTO memories (id, namespace, owner_agent_id, visibility, network, memory_type, content,
                          source_kind, source_ref, embedding, importance, valid_at, metadata, content_hash,
                          pinned, thread_turn, invalid_at, access_count, last_accessed_at, consolidated_at,
                          decayed_at)
    SELECT id, namespace, owner_agent_id, visibility, network, memory_type, content, source_kind, source_ref,
           embedding::vector, importance, valid_at, metadata, content_hash, pinned, thread_turn, invalid_at, access_count,
           last_accessed_at, consolidated_at, decayed_at
    FROM cabrain_import_stage
    RETURNING namespace
)
UPDATE namespaces n SET memory_count = n.memory_count + c.added
FROM (SELECT namespace, count(*) AS added FROM added GROUP BY namespace) c
WHERE n.name = c.namespace
"""
UPDATE_CREATED = """
UPDATE memories m SET created_at = s.created_at
FROM cabrain_import_stage s
WHERE m.id = s.id AND m.valid_at = s.valid_at AND m.created_at IS DISTINCT FROM s.created_at
"""
POSTING_COLUMNS = ("namespace", "term", "memory_id", "valid_at", "tf", "doc_len", "impact")


async def stage(conn: asyncpg.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Put ``rows`` (values in :data:`STAGE_COLUMNS` order) in the transaction's stage, emptied first."""
    if await conn.fetchval(STAGED):
        await conn.execute(EMPTY_STAGE)
    await conn.execute(CREATE_STAGE)
    await conn.copy_records_to_table("cabrain_import_stage", records=rows, columns=STAGE_COLUMNS)
    await conn.execute(ANALYZE_STAGE)


async def write_staged(conn: asyncpg.Connection) -> None:
    """The staged rows into ``memories`` (and, by its triggers, ``memory_ids`` and ``memory_vectors``)."""
    await conn.execute(INSERT_STAGED)
    await conn.execute(UPDATE_CREATED)


async def count_terms(conn: asyncpg.Connection, namespace: str, docs: int, length: int, df: dict[str, int]) -> float:
    """A namespace's new documents counted (``docs`` of ``length`` tokens in all, ``df`` per term), as
    :class:`cabrain.store.keyword.PostgresBM25` counts them; its average document length after them."""
    stats = await conn.fetchrow(UPSERT_STATS, namespace, docs, length)
    terms = sorted(df)
    await conn.execute(UPSERT_DF, namespace, terms, [df[t] for t in terms])
    return max(stats["total_len"] / max(stats["doc_count"], 1), 1.0)


async def copy_postings(conn: asyncpg.Connection, postings: Sequence[tuple[Any, ...]]) -> None:
    """Postings (rows in :data:`POSTING_COLUMNS` order) copied into ``memory_terms``."""
    if postings:
        await conn.copy_records_to_table("memory_terms", records=postings, columns=POSTING_COLUMNS)


# --- a large import into a small hot tier: its indexes built once, after the rows ----------------------
# What grows a row at a time, and is built in bulk several times faster (as the benchmarks' loader does):
# memory_terms' keys and keyword index (each posting otherwise a foreign-key probe and two b-tree
# inserts) and memory_vectors' HNSW graph. Their definitions, in the order they are built again.
TERM_CONSTRAINTS = """
SELECT conname AS name, format('ALTER TABLE memory_terms ADD CONSTRAINT %I %s', conname, pg_get_constraintdef(oid)) AS make
FROM pg_constraint WHERE conrelid = 'memory_terms'::regclass AND contype IN ('p', 'u', 'f')
ORDER BY contype DESC, conname
"""
DEFERRED_INDEXES = """
SELECT i.indexname AS name, i.indexdef AS make FROM pg_indexes i
WHERE i.schemaname = current_schema() AND (
        (i.tablename = 'memory_terms' AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname))
     OR (i.tablename = 'memory_vectors' AND i.indexdef ~* ' USING hnsw '))
ORDER BY i.tablename DESC, i.indexname
"""
# the vectors the hot tier holds, counted up to $1 (enough to compare with an import's size)
VECTORS_UP_TO = "SELECT count(*) FROM (SELECT 1 FROM memory_vectors LIMIT $1) v"
VECTORS = "SELECT count(*) FROM memory_vectors"
# for the builds, until the transaction ends
BUILD_MEMORY = "SELECT set_config('maintenance_work_mem', $1, true)"


def _quoted(name: str) -> str:
    return '"{}"'.format(name.replace('"', '""'))


async def drop_indexes(conn: asyncpg.Connection, memories: int) -> list[tuple[str, str]]:
    """When an import of ``memories`` memories brings more vectors than the hot tier holds, drop the
    keys and indexes that grow a row at a time (above) inside the import's transaction, and return
    the statements that make them again, in order (:func:`build_indexes`, before it commits);
    otherwise drop nothing (an empty list)."""
    if await conn.fetchval(VECTORS_UP_TO, memories) >= memories:
        return []
    constraints = [(r["name"], r["make"]) for r in await conn.fetch(TERM_CONSTRAINTS)]
    indexes = [(r["name"], r["make"]) for r in await conn.fetch(DEFERRED_INDEXES)]
    try:
        async with conn.transaction():  # a savepoint: a role that may not drop them grows them instead
            for name, _ in constraints:
                await conn.execute(f"ALTER TABLE memory_terms DROP CONSTRAINT {_quoted(name)}")
            for name, _ in indexes:
                await conn.execute(f"DROP INDEX {_quoted(name)}")
    except asyncpg.InsufficientPrivilegeError:
        return []
    return constraints + indexes


def graph_memory(rows: int, dim: int) -> str:
    """``maintenance_work_mem`` for building one HNSW graph of ``rows`` vectors: the graph with some
    room (a build whose graph does not fit runs several times slower), at most a quarter of this
    machine's memory (the server is assumed to be here, as the embedded one is), at least 64 MB
    (:func:`cabrain.bench.load.graph_build_memory`, the benchmarks' bulk loader, sizes it the same)."""
    need = int(rows * (dim * 4 + 600) * 1.3)
    cap = psutil.virtual_memory().total // 4
    return f"{max(64 * 2**20, min(need, cap)) // 2**20}MB"


async def build_indexes(conn: asyncpg.Connection, dropped: list[tuple[str, str]], dim: int) -> None:
    """Make again what :func:`drop_indexes` dropped, as it was defined, with the memory the build of
    a graph of every vector now held wants (:func:`graph_memory`)."""
    if not dropped:
        return
    await conn.execute(BUILD_MEMORY, graph_memory(await conn.fetchval(VECTORS), dim))
    for _, make in dropped:
        await conn.execute(make)
