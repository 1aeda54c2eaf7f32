"""Statements over the kinds of task (``task_clusters``: schema 0008; :mod:`cabrain.workflows.clusters`):
joining a task to its nearest cluster, and recomputing a cluster's best chain and confidence from its
current attempts (``chain_attempts``) and its failed routings (``workflow_tasks``), leaving out the
chains demoted in it on live accuracy (schema 0029; :mod:`cabrain.workflows.audit`). Recomputing lives
here, beside its statements, because undoing a demotion (a judgment's revert,
:mod:`cabrain.store.judgments`) recomputes too."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

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
SELECT chain_key, (array_agg(chain_kind))[1] AS kind, avg(score)::float8 AS mean, count(*) AS n,
       avg(duration_ms)::float8 AS ms, avg((score_parts ->> 'structural')::float8) AS structure
FROM chain_attempts
WHERE cluster_id = $1 AND superseded_at IS NULL AND complete AND score IS NOT NULL
GROUP BY chain_key
"""
FAILURES = "SELECT count(*) FROM workflow_tasks WHERE cluster_id = $1 AND route = 'fallback' AND chain->>'key' = $2"
DEMOTED = "SELECT demoted FROM task_clusters WHERE id = $1"
SAVE = """
UPDATE task_clusters SET best_chain = $2, avg_accuracy = $3, samples = $4, failures = $5, confidence = $6,
       latency_ms = $7, structure = $8, updated_at = now()
WHERE id = $1
"""

# --- reading clusters -----------------------------------------------------------------------------
GET = (
    "SELECT id, namespace, members, best_chain, avg_accuracy, samples, failures, confidence, demoted, latency_ms, "
    "structure FROM task_clusters WHERE id = $1"
)
OVERVIEW = """
SELECT id, namespace, members, best_chain, avg_accuracy, samples, failures, confidence, demoted, latency_ms, structure,
       updated_at
FROM task_clusters WHERE $1::text[] IS NULL OR namespace = ANY($1::text[])
ORDER BY updated_at DESC, id LIMIT $2
"""

# --- demoting a chain, and undoing it ---------------------------------------------------------------
DEMOTE = """
UPDATE task_clusters SET demoted = array_append(demoted, $2), updated_at = now()
WHERE id = $1 AND NOT $2 = ANY(demoted) RETURNING id
"""
RESTORE = """
UPDATE task_clusters SET demoted = array_remove(demoted, $2), updated_at = now()
WHERE id = $1 AND $2 = ANY(demoted) RETURNING id
"""


async def recompute(conn: asyncpg.Connection, cluster_id: int, *, prior: float, failure_weight: float) -> None:
    """Save the cluster's best chain, accuracy, samples, failures and confidence, from its current
    attempts, leaving out its demoted chains; inside the caller's transaction, the cluster's row locked
    first, so that concurrent learners each count every attempt committed before them.

    A chain's evidence-weighted accuracy is ``mean * n / (n + prior)`` over its ``n`` complete
    scores; the best has the highest (then more samples, then fewer steps)."""
    await conn.execute(LOCK_ROW, cluster_id)
    demoted = set(await conn.fetchval(DEMOTED, cluster_id) or ())
    best: tuple | None = None
    for row in await conn.fetch(CHAINS, cluster_id):
        if row["chain_key"] in demoted:
            continue
        n, mean = int(row["n"]), float(row["mean"])
        steps = row["chain_key"].count("+") + 1
        rank = (mean * n / (n + prior), n, -steps)
        if best is None or rank > best[0]:
            best = (rank, row["chain_key"], row["kind"], mean, n, row["ms"], row["structure"])
    if best is None:
        await conn.execute(SAVE, cluster_id, None, None, 0, 0, 0.0, None, None)
        return
    _, key, kind, mean, n, ms, structure = best
    failures = await conn.fetchval(FAILURES, cluster_id, key)
    confidence = n / (n + prior + failure_weight * failures)
    chain = {"kind": kind, "agents": key.split(":", 1)[1].split("+"), "key": key}
    await conn.execute(SAVE, cluster_id, json.dumps(chain), mean, n, failures, confidence, ms, structure)


async def set_demoted(conn: asyncpg.Connection, decision: dict[str, Any], demoted: bool) -> bool:
    """Demote (or restore) the chain ``decision`` names in its cluster ({cluster, chain, prior,
    failure_weight}, as a workflow_demote judgment records it) and recompute the cluster; False when it
    already was (or was not)."""
    cluster_id, key = int(decision["cluster"]), str(decision["chain"])
    if await conn.fetchval(DEMOTE if demoted else RESTORE, cluster_id, key) is None:
        return False
    await recompute(conn, cluster_id, prior=float(decision["prior"]), failure_weight=float(decision["failure_weight"]))
    return True
