"""Statements of the benchmarks (:mod:`cabrain.bench`), on their own benchmark-only databases: the
bulk loader's (the secondary indexes and keys of ``memories``, ``memory_terms`` and
``memory_vectors`` dropped and rebuilt, the ``bm25_terms``, ``bm25_namespaces`` and ``namespaces``
counters, the entities and their mention counts, the vacuum after), the floor's bare index probes (``memory_vectors``' HNSW graph,
``memory_terms``' postings), the console bench's sample of ``memories``, the count triggers the counts bench turns off and on, the scale bench's size and
``pg_prewarm`` of the hot path, and the sleep bench's scratch databases."""

from __future__ import annotations

# --- the bulk loader (cabrain.bench.load) -------------------------------------------------------------
# Secondary indexes (not backing a constraint) of the tables, with their definitions.
INDEXES = """
SELECT i.indexname, i.indexdef FROM pg_indexes i
WHERE i.schemaname = current_schema() AND i.tablename = ANY($1::text[])
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
ORDER BY i.tablename, i.indexname
"""
CONSTRAINTS = """
SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
WHERE conrelid = 'memory_terms'::regclass AND contype IN ('p', 'f', 'u') ORDER BY contype DESC, conname
"""
BM25_TERMS = (
    "INSERT INTO bm25_terms (namespace, term, df) SELECT $1, t, n FROM unnest($2::text[], $3::int[]) AS u(t, n)"
)
BM25_NAMESPACE = "INSERT INTO bm25_namespaces (namespace, doc_count, total_len) VALUES ($1, $2, $3)"
MEMORY_COUNT = "UPDATE namespaces SET memory_count = $2 WHERE name = $1"
# The corpus's entities (retain's upsert, by key) and their links, loaded with the links' mention
# trigger off; the counts are then set once, as migration 0023 backfills them.
BENCH_ENTITIES = """
INSERT INTO entities (namespace, name, key) SELECT $1, n, k FROM unnest($2::text[], $3::text[]) AS t(n, k)
ON CONFLICT (namespace, key) DO UPDATE SET updated_at = now()
RETURNING id, key
"""
LINK_TRIGGER_OFF = "ALTER TABLE memory_entities DISABLE TRIGGER entity_mentions_links_in"
LINK_TRIGGER_ON = "ALTER TABLE memory_entities ENABLE TRIGGER entity_mentions_links_in"
BENCH_MENTIONS = """
UPDATE entities e SET mentions = c.n
FROM (
    SELECT me.entity_id, count(*) AS n
    FROM memory_entities me
    JOIN memory_ids i ON i.id = me.memory_id
    JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
    WHERE m.namespace = $1 AND m.tier = 'hot' AND m.invalid_at IS NULL AND m.visibility <> 'private'
    GROUP BY me.entity_id
) c
WHERE e.id = c.entity_id
"""
SET_MAINTENANCE_WORK_MEM = "SELECT set_config('maintenance_work_mem', $1, false)"
RESET_MAINTENANCE_WORK_MEM = "RESET maintenance_work_mem"


def drop_constraint(name: str) -> str:
    return f'ALTER TABLE memory_terms DROP CONSTRAINT "{name}"'


def add_constraint(name: str, definition: str) -> str:
    return f'ALTER TABLE memory_terms ADD CONSTRAINT "{name}" {definition}'


def drop_index(name: str) -> str:
    return f'DROP INDEX "{name}"'


def build_index(definition: str) -> str:
    """An index definition from :data:`INDEXES`, built on the table and every partition's."""
    return definition.replace(" ON ONLY ", " ON ", 1)


def set_trigger(table: str, trigger: str, on: bool) -> str:
    """Turn one trigger of a table on or off (``cabrain bench counts`` times writes both ways)."""
    return f'ALTER TABLE {table} {"ENABLE" if on else "DISABLE"} TRIGGER "{trigger}"'


def vacuum_analyze(table: str) -> str:
    return f"VACUUM ANALYZE {table}"


# --- the floor: each index alone, bare (cabrain.bench.measure) ----------------------------------------
# HNSW: the namespace's nearest ids through the HNSW graph of memory_vectors (sorting disabled, as
# recall runs it). BM25: the query terms' top postings by precomputed impact, summed per memory.
HNSW_PROBE = "SELECT id FROM memory_vectors WHERE namespace = $1 ORDER BY embedding <=> $2 LIMIT $3"
BM25_PROBE = """
SELECT p.memory_id, sum(p.impact) AS s
FROM unnest($2::text[]) AS q(term)
CROSS JOIN LATERAL (
    SELECT t.memory_id, t.impact FROM memory_terms t
    WHERE t.namespace = $1 AND t.term = q.term ORDER BY t.impact DESC LIMIT $3
) p
GROUP BY p.memory_id ORDER BY s DESC LIMIT $4
"""

# --- the console's pages (cabrain.bench.console) ------------------------------------------------------
# a spread of memories, not only the newest; a small corpus falls back on any
SAMPLED_IDS = "SELECT id FROM memories TABLESAMPLE SYSTEM (1) WHERE namespace = $1 LIMIT $2"
SOME_IDS = "SELECT id FROM memories WHERE namespace = $1 LIMIT $2"
# the middle of the namespace's time span
MIDDLE_VALID_AT = "SELECT to_timestamp(avg(extract(epoch FROM valid_at))) FROM memories WHERE namespace = $1"

# --- the scale bench (cabrain.bench.scale, cabrain.bench.scale_measure) -------------------------------
DATABASE_SIZE = "SELECT pg_database_size(current_database())"
SHARED_BUFFERS = "SHOW shared_buffers"
CREATE_PREWARM = "CREATE EXTENSION IF NOT EXISTS pg_prewarm"
PREWARM = """
SELECT coalesce(sum(pg_prewarm(i.indexrelid)), 0) * current_setting('block_size')::bigint / 1048576
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'hnsw' OR c.relname = 'memory_terms_lookup'
"""
# The rows recall reads (the vectors' table for its namespace check, the memories' partitions for
# the answers) into the operating system's cache, not shared buffers, which the indexes fill.
PREWARM_ROWS = """
SELECT coalesce(sum(pg_prewarm(c.oid, 'read')), 0) * current_setting('block_size')::bigint / 1048576
FROM pg_class c
WHERE c.relkind = 'r' AND (c.relname = 'memory_vectors'
      OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'memories'::regclass))
"""

# --- the sleep bench (cabrain.bench.sleep) -------------------------------------------------------------
CREATED_WHEN_VALID = "UPDATE memories SET created_at = valid_at"  # stored when it happened
COUNT_MEMORIES = "SELECT count(*) FROM memories"


def create_database(name: str) -> str:
    return f'CREATE DATABASE "{name}"'


def copy_database(name: str, template: str) -> str:
    return f'CREATE DATABASE "{name}" TEMPLATE "{template}"'


def drop_database(name: str) -> str:
    return f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'


# --- the workflows bench (cabrain.bench.workflows) -------------------------------------------------------
# every chain tried while learning in the bench's namespace: its task's text, the chain, its output and time
WORKFLOW_ATTEMPTS = """
SELECT t.description, a.chain_key, a.output, a.score, a.complete, a.duration_ms, a.error
FROM chain_attempts a JOIN workflow_tasks t ON t.id = a.task_id
WHERE t.namespace = $1
ORDER BY a.created_at
"""
