"""Statements of the sleep cycle's upkeep (:mod:`cabrain.sleep.maintain`, :mod:`cabrain.sleep.purge`):
the partitions of ``memories`` (schema 0001, ``cabrain_ensure_memories_partition``: 0006/0007),
planner statistics and index rebuilds (``cabrain_maintain``: 0005), what demotion removed since the
last maintain (``cold_batches``, ``sleep_steps``: 0005) and the purge of forgotten memories from the
cold tier (``memory_ids.purged_at``)."""

from __future__ import annotations

# --- partitions, statistics, rebuilds (cabrain.sleep.maintain) -------------------------------------------
DEFAULT_MONTHS = "SELECT DISTINCT to_char(valid_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month FROM memories_default"
PARTITIONS = """
SELECT c.relname, c.reltuples::bigint AS live FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'public.memories'::regclass AND c.relname ~ '^memories_p[0-9]{6}$'
"""
ENSURE_PARTITION = "SELECT cabrain_ensure_memories_partition($1)"
LAST_MAINTAIN = """
SELECT max(finished_at) FROM sleep_steps WHERE step = 'maintain' AND status = 'done' AND run_id <> $1
"""
DEMOTED_SINCE = """
SELECT month, sum(row_count)::bigint AS removed FROM cold_batches
WHERE state = 'done' AND finished_at > coalesce($1, '-infinity'::timestamptz) GROUP BY month
"""
REINDEX = "SELECT cabrain_maintain($1, 'reindex')"
ANALYZE = "SELECT cabrain_maintain($1, 'analyze')"

# --- purging forgotten memories from the cold tier (cabrain.sleep.purge) ----------------------------------
DUE = """
SELECT id FROM memory_ids
WHERE namespace = $1 AND tier = 'cold' AND forgotten_at IS NOT NULL AND purged_at IS NULL
  AND forgotten_at < $4::timestamptz - make_interval(secs => $2)
ORDER BY forgotten_at
LIMIT $3
"""
MARK_PURGED = "UPDATE memory_ids SET purged_at = now() WHERE id = ANY($1::uuid[]) AND purged_at IS NULL"
# Snapshots are expired up to an hour ago, never past a demotion batch still in flight (its commit is
# found by its snapshot).
OLDEST_OPEN_BATCH = "SELECT min(created_at) FROM cold_batches WHERE state <> 'done'"
