"""Statements over the model registry and its calls (``llm_agents``, ``llm_calls``: schema 0008):
registering, editing and reading model agents (:mod:`cabrain.workflows.registry`) and recording a
call with the agent's counts and measured latency (:mod:`cabrain.workflows.calls`)."""

from __future__ import annotations

from collections.abc import Iterable

# --- model agents (cabrain.workflows.registry) ----------------------------------------------------
COLUMNS = (
    "name",
    "layer",
    "provider",
    "model",
    "endpoint",
    "api_key_env",
    "capabilities",
    "cost_in_per_1k",
    "cost_out_per_1k",
    "latency_ms",
    "calls",
    "failures",
    "active",
    "tokens_per_s",
    "source",
)
INSERT = f"""
INSERT INTO llm_agents (name, layer, provider, model, endpoint, api_key_env, capabilities, cost_in_per_1k,
                        cost_out_per_1k, active)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (name) DO NOTHING
RETURNING {", ".join(COLUMNS)}
"""
GET = f"SELECT {', '.join(COLUMNS)} FROM llm_agents WHERE name = $1"
LISTED = (
    f"SELECT {', '.join(COLUMNS)} FROM llm_agents WHERE ($1::text IS NULL OR layer = $1) AND (NOT $2 OR active) "
    "ORDER BY layer, coalesce(cost_in_per_1k, 0) + coalesce(cost_out_per_1k, 0), name"
)


# a local model CaBrain serves (cabrain.localmodels.serve): made, or brought up to date if CaBrain
# served it before (never one registered by hand: its source is NULL, and nothing is returned)
SERVE_LOCAL = f"""
INSERT INTO llm_agents AS a (name, layer, provider, model, endpoint, api_key_env, cost_in_per_1k, cost_out_per_1k,
                             latency_ms, tokens_per_s, source, active)
VALUES ($1, 'local', 'openai', $2, $3, $4, 0, 0, $5, $6, $7, true)
ON CONFLICT (name) DO UPDATE SET model = EXCLUDED.model, endpoint = EXCLUDED.endpoint, api_key_env = EXCLUDED.api_key_env,
    latency_ms = EXCLUDED.latency_ms, tokens_per_s = EXCLUDED.tokens_per_s, source = EXCLUDED.source, active = true,
    updated_at = now()
WHERE a.source IS NOT NULL
RETURNING {", ".join(COLUMNS)}
"""
RETIRE_LOCAL = (
    "UPDATE llm_agents SET active = false, updated_at = now() WHERE name = ANY($1::text[]) AND source IS NOT NULL"
)


def update(fields: Iterable[str]) -> str:
    """The UPDATE of an agent's ``fields`` (``$1`` its name, then the fields' values in order)."""
    sets = ", ".join(f"{k} = ${i + 2}" for i, k in enumerate(fields))
    return f"UPDATE llm_agents SET {sets}, updated_at = now() WHERE name = $1 RETURNING {', '.join(COLUMNS)}"


# --- calls (cabrain.workflows.calls) --------------------------------------------------------------
RECORD = """
WITH call AS (
    INSERT INTO llm_calls (task_id, agent, purpose, model, tokens_in, tokens_out, cost_usd, duration_ms, attempts, error)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
    RETURNING agent
)
UPDATE llm_agents a SET calls = a.calls + 1, failures = a.failures + ($10::text IS NOT NULL)::int,
       latency_ms = CASE WHEN $10::text IS NOT NULL THEN a.latency_ms
                         ELSE coalesce(a.latency_ms * 0.8 + $8 * 0.2, $8) END
FROM call WHERE a.name = call.agent
"""
