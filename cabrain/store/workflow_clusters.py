"""Statements over the kinds of task (``task_clusters``: schema 0008; :mod:`cabrain.workflows.clusters`):
joining a task to its nearest cluster, and recomputing a cluster's best chain and confidence from its
current attempts (``chain_attempts``) and its failed routings (``workflow_tasks``)."""

from __future__ import annotations

# --- assigning a task to a cluster ----------------------------------------------------------------
LOCK = "SELECT pg_advisory_xact_lock(hashtext('cabrain-workflow-clusters'), hashtext($1))"
NEAREST = """
SELECT id, members, centroid, 1 - (centroid <=> $2) AS similarity
FROM task_clusters WHERE namespace = $1 ORDER BY centroid <=> $2 LIMIT 1
"""
CREATE = "INSERT INTO task_clusters (namespace, centroid, members) VALUES ($1, $2, 1) RETURNING id"
MOVE = "UPDATE task_clusters SET centroid = $2, members = members + 1, updated_at = now() WHERE id = $1"

# --- a cluster's best chain -----------------------------------------------------------------------
LOCK_ROW = "SELECT 1 FROM task_clusters WHERE id = $1 FOR UPDATE"
CHAINS = """
SELECT chain_key, (array_agg(chain_kind))[1] AS kind, avg(score)::float8 AS mean, count(*) AS n
FROM chain_attempts
WHERE cluster_id = $1 AND superseded_at IS NULL AND complete AND score IS NOT NULL
GROUP BY chain_key
"""
FAILURES = "SELECT count(*) FROM workflow_tasks WHERE cluster_id = $1 AND route = 'fallback' AND chain->>'key' = $2"
SAVE = """
UPDATE task_clusters SET best_chain = $2, avg_accuracy = $3, samples = $4, failures = $5, confidence = $6,
       updated_at = now()
WHERE id = $1
"""

# --- reading clusters -----------------------------------------------------------------------------
GET = "SELECT id, namespace, members, best_chain, avg_accuracy, samples, failures, confidence FROM task_clusters WHERE id = $1"
OVERVIEW = """
SELECT id, namespace, members, best_chain, avg_accuracy, samples, failures, confidence, updated_at
FROM task_clusters WHERE $1::text[] IS NULL OR namespace = ANY($1::text[])
ORDER BY updated_at DESC, id LIMIT $2
"""
