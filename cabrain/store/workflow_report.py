"""Statements of the workflow report (:mod:`cabrain.workflows.report`), reading what was recorded
(``workflow_tasks``, ``frontier_runs``, ``llm_calls``, ``llm_agents``, ``chain_attempts``: schema
0008): routes and costs per submitter, learning cost, local accuracy and routing by day, chains and
models. Each takes the namespaces (``$1``, NULL: all) and the start (``$2``) of the period it covers;
``ACCURACY`` also the score that accepts an attempt (``$3``)."""

from __future__ import annotations

# --- the period and namespaces every statement below covers (the tasks aliased ``t``) -------------
SCOPE = "($1::text[] IS NULL OR t.namespace = ANY($1::text[])) AND t.created_at >= $2"
TASKS = f"""
WITH ref_cost AS (
    SELECT t.cluster_id, avg(r.cost_usd)::float8 AS mean_cost
    FROM frontier_runs r JOIN workflow_tasks t ON t.id = r.task_id
    WHERE r.cost_usd IS NOT NULL
    GROUP BY t.cluster_id
), per_task AS (
    SELECT t.id, t.submitted_by, t.route, t.cluster_id,
           (SELECT sum(c.cost_usd) FROM llm_calls c WHERE c.task_id = t.id AND c.purpose = 'local')::float8 AS local_cost,
           (SELECT sum(c.cost_usd) FROM llm_calls c WHERE c.task_id = t.id AND c.purpose = 'frontier')::float8 AS frontier_cost
    FROM workflow_tasks t
    WHERE t.status = 'done' AND {SCOPE}
)
SELECT p.submitted_by, p.route, count(*) AS tasks,
       coalesce(sum(p.local_cost), 0) AS local_cost, coalesce(sum(p.frontier_cost), 0) AS frontier_cost,
       coalesce(sum(rc.mean_cost) FILTER (WHERE p.route = 'local'), 0) AS would_have_cost,
       count(*) FILTER (WHERE p.route = 'local' AND rc.mean_cost IS NULL) AS unpriced
FROM per_task p LEFT JOIN ref_cost rc USING (cluster_id)
GROUP BY 1, 2 ORDER BY 1, 2
"""
FAILED = f"SELECT count(*) FROM workflow_tasks t WHERE t.status = 'failed' AND {SCOPE}"
LEARNING_COST = f"""
SELECT coalesce(sum(c.cost_usd) FILTER (WHERE c.purpose IN ('learn', 'judge')), 0)::float8 AS cost,
       coalesce(sum(c.cost_usd) FILTER (WHERE c.purpose = 'audit'), 0)::float8 AS audits,
       count(*) AS calls
FROM llm_calls c JOIN workflow_tasks t ON t.id = c.task_id
WHERE c.purpose IN ('learn', 'judge', 'audit') AND {SCOPE}
"""
ACCURACY = f"""
SELECT to_char(date_trunc('day', a.created_at), 'YYYY-MM-DD') AS day, avg(a.score)::float8 AS mean_score,
       count(*) AS attempts, count(*) FILTER (WHERE a.score >= $3) AS accepted
FROM chain_attempts a JOIN workflow_tasks t ON t.id = a.task_id
WHERE a.complete AND {SCOPE}
GROUP BY 1 ORDER BY 1
"""
ROUTED = f"""
SELECT to_char(date_trunc('day', t.created_at), 'YYYY-MM-DD') AS day,
       count(*) FILTER (WHERE t.route = 'local') AS local_ok, count(*) FILTER (WHERE t.route = 'fallback') AS fallback
FROM workflow_tasks t WHERE t.status = 'done' AND t.route IN ('local', 'fallback') AND {SCOPE}
GROUP BY 1 ORDER BY 1
"""
MODELS = f"""
SELECT c.agent, a.layer, count(*) AS calls, count(*) FILTER (WHERE c.error IS NOT NULL) AS failures,
       coalesce(sum(c.tokens_in), 0) AS tokens_in, coalesce(sum(c.tokens_out), 0) AS tokens_out,
       coalesce(sum(c.cost_usd), 0)::float8 AS cost, count(*) FILTER (WHERE c.cost_usd IS NULL AND c.error IS NULL) AS unpriced_calls,
       avg(c.duration_ms) FILTER (WHERE c.error IS NULL)::float8 AS mean_ms,
       array_agg(DISTINCT c.purpose) AS purposes
FROM llm_calls c JOIN llm_agents a ON a.name = c.agent JOIN workflow_tasks t ON t.id = c.task_id
WHERE {SCOPE}
GROUP BY 1, 2 ORDER BY 1
"""
CHAIN_SCORES = f"""
SELECT a.chain_key, avg(a.score)::float8 AS mean_score, count(*) AS attempts
FROM chain_attempts a JOIN workflow_tasks t ON t.id = a.task_id
WHERE a.complete AND {SCOPE}
GROUP BY 1 ORDER BY 2 DESC
"""

# --- per kind of task (a cluster): its tasks by route, its chain's state, its live accuracy -----------
KINDS = f"""
WITH tasks AS (
    SELECT t.cluster_id, count(*) AS tasks,
           count(*) FILTER (WHERE t.route = 'frontier') AS frontier,
           count(*) FILTER (WHERE t.route = 'local') AS local,
           count(*) FILTER (WHERE t.route = 'fallback') AS fallback,
           (array_agg(t.task_type ORDER BY t.created_at))[1] AS task_type,
           (array_agg(left(t.description, 80) ORDER BY t.created_at))[1] AS example
    FROM workflow_tasks t WHERE t.status = 'done' AND t.cluster_id IS NOT NULL AND {SCOPE}
    GROUP BY 1
), audits AS (
    SELECT a.cluster_id, count(*) AS audited, count(*) FILTER (WHERE a.error IS NOT NULL) AS audit_failed,
           avg(a.score) FILTER (WHERE a.complete)::float8 AS live_mean
    FROM workflow_audits a JOIN workflow_tasks t ON t.id = a.task_id WHERE {SCOPE}
    GROUP BY 1
)
SELECT k.*, c.id, c.namespace, c.members, c.best_chain, c.avg_accuracy, c.samples, c.failures, c.confidence,
       c.demoted, c.latency_ms, c.structure,
       coalesce(a.audited, 0) AS audited, coalesce(a.audit_failed, 0) AS audit_failed, a.live_mean
FROM tasks k JOIN task_clusters c ON c.id = k.cluster_id LEFT JOIN audits a ON a.cluster_id = k.cluster_id
ORDER BY k.tasks DESC, k.cluster_id
"""
# The decision in force on each demoted chain: the latest judgment about it not reverted ($1 namespaces).
DEMOTIONS = """
SELECT DISTINCT ON (cluster, chain) j.id, j.inputs -> 'workflow' ->> 'cluster' AS cluster,
       j.inputs -> 'workflow' ->> 'chain' AS chain, j.inputs -> 'workflow' ->> 'op' AS op, j.reason
FROM judgments j
WHERE j.inputs ? 'workflow' AND j.reverted_by IS NULL AND ($1::text[] IS NULL OR j.namespace = ANY($1::text[]))
ORDER BY cluster, chain, j.created_at DESC
"""
