"""Statements of demotion, the hot tier's hand-over of rows to the cold tier (:mod:`cabrain.sleep.demote`):
the ledger ``cold_batches`` (schema 0005), the hot rows of ``memories`` and their identities in
``memory_ids`` (0001), their keyword postings and statistics (``memory_terms``, ``bm25_terms``,
``bm25_namespaces``: 0002), their passages (``memory_chunks``: 0003) and the namespace's counters
(``namespaces``). The bounds of a month partition are shared with :mod:`cabrain.sleep.decay`."""

from __future__ import annotations

# --- a month partition's bounds ------------------------------------------------------------------------
MONTH_BOUNDS = """
SELECT (to_date($1, 'YYYY-MM')::timestamp AT TIME ZONE 'UTC') AS lo,
       ((to_date($1, 'YYYY-MM') + interval '1 month')::timestamp AT TIME ZONE 'UTC') AS hi
"""

# --- planning a batch (cold_batches) ---------------------------------------------------------------------
OPEN_BATCHES = """
SELECT id, memory_ids, state FROM cold_batches
WHERE namespace = $1 AND month = $2 AND state <> 'done' ORDER BY created_at, id
"""

CANDIDATES = """
SELECT m.id FROM memories m
WHERE m.namespace = $1 AND m.valid_at >= $2 AND m.valid_at < $3 AND m.tier = 'hot'
  AND NOT (m.id = ANY($4::uuid[]))
  AND (
        (m.invalid_at IS NOT NULL AND m.invalid_at < $9::timestamptz - make_interval(secs => $5))
     OR (m.invalid_at IS NULL AND m.memory_type = 'episodic' AND NOT m.pinned
         AND m.valid_at < $9::timestamptz - make_interval(secs => $6)
         AND m.created_at < $9::timestamptz - make_interval(secs => $6)
         AND (m.last_accessed_at IS NULL OR m.last_accessed_at < $9::timestamptz - make_interval(secs => $6))
         AND (m.consolidated_at IS NOT NULL OR m.importance < $7))
  )
ORDER BY m.id
LIMIT $8
"""

PLAN_BATCH = """
INSERT INTO cold_batches (id, namespace, month, run_id, state, memory_ids, row_count)
VALUES ($1, $2, $3, $4, 'planned', $5, cardinality($5::uuid[]))
"""

# --- finishing a batch: the hot rows leave ---------------------------------------------------------------
LOCK_ROWS = """
SELECT m.id, m.namespace, m.owner_agent_id, m.visibility, m.network, m.memory_type, m.content,
       m.source_kind, m.source_ref, m.embedding, m.importance, m.access_count, m.last_accessed_at,
       m.created_at, m.valid_at, m.invalid_at, m.superseded_by, m.metadata
FROM memories m
WHERE m.namespace = $1 AND m.valid_at >= $2 AND m.valid_at < $3 AND m.id = ANY($4::uuid[]) AND m.tier = 'hot'
ORDER BY m.id
FOR UPDATE
"""

DOCS_OF = """
SELECT memory_id, max(doc_len) AS doc_len FROM memory_terms
WHERE namespace = $1 AND memory_id = ANY($2::uuid[]) GROUP BY memory_id
"""
DELETE_POSTINGS = """
WITH gone AS (DELETE FROM memory_terms WHERE namespace = $1 AND memory_id = ANY($2::uuid[]) RETURNING term)
SELECT term, count(*)::int AS n FROM gone GROUP BY term ORDER BY term
"""
LOWER_DF = """
UPDATE bm25_terms b SET df = greatest(b.df - t.n, 0)
FROM (SELECT * FROM unnest($2::text[], $3::int[]) AS x(term, n) ORDER BY term) t
WHERE b.namespace = $1 AND b.term = t.term
"""
LOWER_STATS = """
UPDATE bm25_namespaces SET doc_count = greatest(doc_count - $2, 0), total_len = greatest(total_len - $3, 0)
WHERE namespace = $1
"""
DELETE_CHUNKS = "DELETE FROM memory_chunks WHERE namespace = $1 AND memory_id = ANY($2::uuid[])"
MARK_COLD = """
UPDATE memory_ids i SET tier = 'cold', cold_batch = $2, demoted_at = $3,
       owner_agent_id = m.owner_agent_id, visibility = m.visibility, source_kind = coalesce(m.source_kind, '')
FROM memories m
WHERE m.id = i.id AND m.valid_at = i.valid_at AND i.id = ANY($1::uuid[])
"""
DELETE_ROWS = """
DELETE FROM memories WHERE namespace = $1 AND valid_at >= $2 AND valid_at < $3 AND id = ANY($4::uuid[])
"""
LOWER_COUNTS = """
UPDATE namespaces SET memory_count = greatest(memory_count - $2, 0), chunk_count = greatest(chunk_count - $3, 0)
WHERE name = $1
"""
FINISH_BATCH = "UPDATE cold_batches SET state = 'done', snapshot_id = $2, finished_at = now() WHERE id = $1"
