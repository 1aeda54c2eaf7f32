"""Statements over the capture inbox (``capture_inbox``: schema 0004, its ``memory_ids`` 0009): hook
events accepted but not retained yet (:mod:`cabrain.write.inbox`), and the raw captured text a
forgotten memory came from (:mod:`cabrain.write.changes`)."""

from __future__ import annotations

# A row whose retain failed this many times stays, with its error, for an operator to look at; one
# claimed is claimed again after RETRY_AFTER_S (its drainer died).
MAX_ATTEMPTS = 5
RETRY_AFTER_S = 30

# --- queueing and draining -----------------------------------------------------------------------------
ENQUEUE = """
INSERT INTO capture_inbox (agent_id, namespace, items, decide) VALUES ($1, $2, $3::jsonb, $4) RETURNING id
"""
CLAIM = f"""
UPDATE capture_inbox SET claimed_at = now(), attempts = attempts + 1
WHERE id IN (
    SELECT id FROM capture_inbox
    WHERE processed_at IS NULL AND attempts < {MAX_ATTEMPTS}
      AND (claimed_at IS NULL OR claimed_at < now() - interval '{RETRY_AFTER_S} seconds')
    ORDER BY id LIMIT $1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, agent_id, namespace, items, decide
"""
DONE = "UPDATE capture_inbox SET processed_at = now(), last_error = NULL, memory_ids = $2 WHERE id = $1"
REMOVE = "DELETE FROM capture_inbox WHERE id = $1"
FAILED = "UPDATE capture_inbox SET last_error = $2 WHERE id = $1"
PENDING = f"SELECT count(*) FROM capture_inbox WHERE processed_at IS NULL AND attempts < {MAX_ATTEMPTS}"

# --- what is not kept ----------------------------------------------------------------------------------
# Processed rows past their retention, and rows that failed for good past theirs ($1, $2: seconds; $3: now, the
# brain's clock).
PURGE = f"""
DELETE FROM capture_inbox
WHERE (processed_at IS NOT NULL AND processed_at < $3::timestamptz - make_interval(secs => $1))
   OR (processed_at IS NULL AND attempts >= {MAX_ATTEMPTS} AND created_at < $3::timestamptz - make_interval(secs => $2))
"""
# A forgotten memory's raw captured text goes with it.
FORGET = "DELETE FROM capture_inbox WHERE memory_ids @> ARRAY[$1::uuid]"
