"""Statements over dispatched tasks, their frontier references and the learning attempts
(``workflow_tasks``, ``frontier_runs``, ``chain_attempts``: schema 0008): recording and finishing a
task and keeping its reference (:mod:`cabrain.workflows.dispatch`), the offline learning
iterations over the references (:mod:`cabrain.workflows.learn`), and the audit of locally answered
tasks (``workflow_audits``: schema 0029; :mod:`cabrain.workflows.audit`)."""

from __future__ import annotations

# --- tasks and their references (cabrain.workflows.dispatch) --------------------------------------
INSERT_TASK = """
INSERT INTO workflow_tasks (id, namespace, submitted_by, task_hash, description, context, task_type,
                            destructive, needs_review, embedding, cluster_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
"""
FINISH_TASK = """
UPDATE workflow_tasks SET route = $2, route_reason = $3, chain = $4, output = $5, status = $6, error = $7,
       finished_at = now()
WHERE id = $1
"""
FAIL_TASK = (
    "UPDATE workflow_tasks SET status = 'failed', error = $2, finished_at = now() WHERE id = $1 AND status = 'running'"
)
INSERT_REFERENCE = """
INSERT INTO frontier_runs (id, task_id, namespace, agent, output, tokens_in, tokens_out, cost_usd, duration_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
"""
# Older references to the same task (same namespace and hash) and their attempts give way.
SUPERSEDE = """
WITH old AS (
    UPDATE frontier_runs r SET superseded_at = now()
    FROM workflow_tasks t
    WHERE t.id = r.task_id AND t.namespace = $1 AND t.task_hash = $2 AND r.id <> $3 AND r.superseded_at IS NULL
    RETURNING r.id, r.memory_id
), gone AS (
    UPDATE chain_attempts a SET superseded_at = now() FROM old WHERE a.frontier_run_id = old.id AND a.superseded_at IS NULL
    RETURNING a.cluster_id
)
SELECT (SELECT array_agg(memory_id) FROM old WHERE memory_id IS NOT NULL) AS memories,
       (SELECT array_agg(DISTINCT cluster_id) FROM gone WHERE cluster_id IS NOT NULL) AS clusters
"""
SET_MEMORY = "UPDATE frontier_runs SET memory_id = $2 WHERE id = $1"

# --- learning from the references (cabrain.workflows.learn) ---------------------------------------
TO_LEARN = """
SELECT r.id FROM frontier_runs r
WHERE r.learned_at IS NULL AND r.superseded_at IS NULL AND ($1::text[] IS NULL OR r.namespace = ANY($1::text[]))
ORDER BY r.created_at
LIMIT $2
"""
RUN = """
SELECT r.id, r.output, r.superseded_at, r.learned_at, r.memory_id, t.id AS task_id, t.namespace, t.submitted_by,
       t.description, t.context, t.task_type, t.cluster_id
FROM frontier_runs r JOIN workflow_tasks t ON t.id = r.task_id WHERE r.id = $1
"""
# One learner per reference at a time (two jobs may overlap): a session lock held while it learns.
CLAIM = "SELECT pg_try_advisory_lock(hashtext('cabrain-workflow-learn'), hashtext($1::text))"
RELEASE = "SELECT pg_advisory_unlock(hashtext('cabrain-workflow-learn'), hashtext($1::text))"
INSERT_ATTEMPT = """
INSERT INTO chain_attempts (id, frontier_run_id, task_id, cluster_id, chain_kind, chain_key, chain, output, score,
                            score_parts, complete, tokens_in, tokens_out, cost_usd, duration_ms, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
"""
# The current references of a kind of task ($1 its cluster) but those of one task ($2), of a type ($3):
# what its answers look like (cabrain.workflows.shapes), the latest $4.
SHAPE_REFERENCES = """
SELECT r.output FROM frontier_runs r JOIN workflow_tasks t ON t.id = r.task_id
WHERE t.cluster_id = $1 AND t.id IS DISTINCT FROM $2 AND t.task_type = $3 AND r.superseded_at IS NULL
ORDER BY r.created_at DESC LIMIT $4
"""
TRIED = "SELECT DISTINCT chain_key FROM chain_attempts WHERE frontier_run_id = $1 AND score IS NOT NULL"
DONE = "UPDATE frontier_runs SET learned_at = now(), learn_error = $2 WHERE id = $1 AND learned_at IS NULL"
NOT_YET = "UPDATE frontier_runs SET learn_error = $2 WHERE id = $1"

# --- auditing locally answered tasks (cabrain.workflows.audit) -----------------------------------
# Tasks a local chain answered, not audited yet, sampled by their id: $1 namespaces (NULL: all),
# $2 the share sampled in millionths, $3 at most this many.
TO_AUDIT = """
SELECT t.id FROM workflow_tasks t
WHERE t.route = 'local' AND t.status = 'done' AND t.chain IS NOT NULL
  AND ($1::text[] IS NULL OR t.namespace = ANY($1::text[]))
  AND (hashtext(t.id::text)::bigint + 2147483648) % 1000000 < $2
  AND NOT EXISTS (SELECT 1 FROM workflow_audits a WHERE a.task_id = t.id)
ORDER BY t.created_at
LIMIT $3
"""
AUDITED_TASK = """
SELECT t.id AS task_id, t.namespace, t.submitted_by, t.task_hash, t.description, t.context, t.task_type,
       t.cluster_id, t.chain, t.output AS local_output,
       (SELECT sum(c.tokens_in) FROM llm_calls c WHERE c.task_id = t.id AND c.purpose = 'local') AS tokens_in,
       (SELECT sum(c.tokens_out) FROM llm_calls c WHERE c.task_id = t.id AND c.purpose = 'local') AS tokens_out,
       (SELECT sum(c.cost_usd) FROM llm_calls c WHERE c.task_id = t.id AND c.purpose = 'local') AS cost_usd,
       (SELECT coalesce(sum(c.duration_ms), 0) FROM llm_calls c WHERE c.task_id = t.id AND c.purpose = 'local')
           AS duration_ms,
       EXISTS (SELECT 1 FROM workflow_audits a WHERE a.task_id = t.id) AS audited
FROM workflow_tasks t WHERE t.id = $1
"""
INSERT_AUDIT = """
INSERT INTO workflow_audits (task_id, cluster_id, chain_key, frontier_run_id, score, score_parts, complete, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (task_id) DO NOTHING RETURNING task_id
"""
# A chain's live scores in a cluster since the last decision on it (a demotion, or its revert).
LIVE = """
WITH since AS (
    SELECT max(j.created_at) AS at FROM judgments j
    WHERE j.inputs ? 'workflow' AND j.namespace = $4
      AND j.inputs -> 'workflow' ->> 'cluster' = ($1::bigint)::text AND j.inputs -> 'workflow' ->> 'chain' = $2
)
SELECT count(*) AS n, avg(score)::float8 AS mean, array_agg(task_id::text) AS tasks FROM (
    SELECT a.task_id, a.score FROM workflow_audits a, since
    WHERE a.cluster_id = $1 AND a.chain_key = $2 AND a.complete AND a.score IS NOT NULL
      AND (since.at IS NULL OR a.created_at > since.at)
    ORDER BY a.created_at DESC LIMIT $3
) recent
"""
