"""Statements over the dispatch queue (``dispatch_queue``: schema 0008; :mod:`cabrain.workflows.queue`):
queueing a task, a worker's claim (``FOR UPDATE SKIP LOCKED``) and its result, claims whose lease ran
out, and reading the queue back."""

from __future__ import annotations

# --- queueing, and a worker's claim, lease and result ---------------------------------------------
COLUMNS = "id, namespace, submitted_by, priority, status, request, task_id, result, error, tries, picked_by, picked_at, finished_at, created_at"
ENQUEUE = f"""
INSERT INTO dispatch_queue (id, namespace, submitted_by, priority, request) VALUES ($1, $2, $3, $4, $5)
RETURNING {COLUMNS}
"""
CLAIM = f"""
UPDATE dispatch_queue q SET status = 'picked', picked_by = $1, picked_at = now(), tries = q.tries + 1
WHERE q.id = (
    SELECT id FROM dispatch_queue WHERE status = 'pending'
    ORDER BY priority DESC, created_at, id
    FOR UPDATE SKIP LOCKED
    LIMIT 1
)
RETURNING {COLUMNS}
"""
EXPIRE = """
UPDATE dispatch_queue
SET status = CASE WHEN tries >= $2 THEN 'failed' ELSE 'pending' END,
    error = CASE WHEN tries >= $2 THEN 'its worker stopped before finishing it, ' || tries || ' time(s)' ELSE error END,
    finished_at = CASE WHEN tries >= $2 THEN now() END,
    picked_by = NULL
WHERE status = 'picked' AND picked_at < now() - make_interval(secs => $1)
RETURNING id
"""
FINISH = """
UPDATE dispatch_queue SET status = $3, result = $4, error = $5, task_id = $6, finished_at = now()
WHERE id = $1 AND status = 'picked' AND picked_by = $2
"""

# --- reading the queue back ----------------------------------------------------------------------
GET = f"SELECT {COLUMNS} FROM dispatch_queue WHERE id = $1"
COUNTS = "SELECT status, count(*) AS n FROM dispatch_queue WHERE ($1::text IS NULL OR namespace = $1) GROUP BY status"
