"""What workflow learning is worth, from what was recorded: the share of tasks routed locally, the
frontier cost saved, the accuracy of local outputs over time, per agent.

Savings use recorded costs only. A task answered locally saved what its kind's frontier answers
cost on average (the mean recorded cost of the references in its cluster), less what its local
calls cost; a fallback saved nothing and wasted its local calls. Tasks whose kind has no priced
reference are counted as ``unpriced`` rather than guessed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

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
SELECT coalesce(sum(c.cost_usd), 0)::float8 AS cost, count(*) AS calls
FROM llm_calls c JOIN workflow_tasks t ON t.id = c.task_id
WHERE c.purpose IN ('learn', 'judge') AND {SCOPE}
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


def _money(x: float) -> float:
    return round(x, 8)


async def build(
    conn: asyncpg.Connection, *, namespaces: list[str] | None = None, days: int | None = None, accept: float = 0.9
) -> dict[str, Any]:
    """The report over ``namespaces`` (None: all) for the last ``days`` (None: all time)."""
    since = datetime.now(UTC) - timedelta(days=days) if days else datetime(1970, 1, 1, tzinfo=UTC)
    args = (namespaces, since)
    per_agent: dict[str, dict[str, Any]] = {}
    totals = {"frontier": 0, "local": 0, "fallback": 0}
    frontier_cost = local_cost = would_have = wasted = 0.0
    unpriced = 0
    for row in await conn.fetch(TASKS, *args):
        agent = per_agent.setdefault(
            row["submitted_by"],
            {"tasks": 0, "frontier": 0, "local": 0, "fallback": 0, "saved_usd": 0.0, "spent_usd": 0.0},
        )
        route, n = row["route"], row["tasks"]
        totals[route] += n
        agent["tasks"] += n
        agent[route] += n
        spent = float(row["local_cost"]) + float(row["frontier_cost"])
        agent["spent_usd"] += spent
        frontier_cost += float(row["frontier_cost"])
        local_cost += float(row["local_cost"])
        if route == "local":
            saving = float(row["would_have_cost"]) - float(row["local_cost"])
            would_have += float(row["would_have_cost"])
            unpriced += row["unpriced"]
        elif route == "fallback":
            saving = -float(row["local_cost"])
            wasted += float(row["local_cost"])
        else:
            saving = 0.0
        agent["saved_usd"] += saving
    done = sum(totals.values())
    for agent in per_agent.values():
        agent["local_share"] = round(agent["local"] / agent["tasks"], 4) if agent["tasks"] else 0.0
        agent["saved_usd"], agent["spent_usd"] = _money(agent["saved_usd"]), _money(agent["spent_usd"])
    learning = await conn.fetchrow(LEARNING_COST, *args)
    saved = would_have - local_cost  # local_cost: the local-routed tasks' calls and the fallbacks' wasted ones
    return {
        "since": since.isoformat() if days else None,
        "namespaces": namespaces,
        "tasks": {
            "done": done,
            **totals,
            "failed": await conn.fetchval(FAILED, *args),
            "local_share": round(totals["local"] / done, 4) if done else 0.0,
        },
        "cost_usd": {
            "frontier": _money(frontier_cost),
            "local": _money(local_cost),
            "learning": _money(float(learning["cost"])),
            "saved": _money(saved),
            "frontier_cost_avoided": _money(would_have),
            "wasted_on_fallbacks": _money(wasted),
            "unpriced_local_tasks": unpriced,
        },
        "accuracy_by_day": [
            {
                "day": r["day"],
                "mean_score": round(r["mean_score"], 4),
                "attempts": r["attempts"],
                "accepted": r["accepted"],
            }
            for r in await conn.fetch(ACCURACY, *args, accept)
        ],
        "routed_by_day": [
            {
                "day": r["day"],
                "local": r["local_ok"],
                "fallback": r["fallback"],
                "pass_rate": round(r["local_ok"] / (r["local_ok"] + r["fallback"]), 4),
            }
            for r in await conn.fetch(ROUTED, *args)
        ],
        "chains": [
            {"chain": r["chain_key"], "mean_score": round(r["mean_score"], 4), "attempts": r["attempts"]}
            for r in await conn.fetch(CHAIN_SCORES, *args)
        ],
        "agents": per_agent,
        "models": {
            r["agent"]: {
                "layer": r["layer"],
                "calls": r["calls"],
                "failures": r["failures"],
                "tokens_in": r["tokens_in"],
                "tokens_out": r["tokens_out"],
                "cost_usd": _money(r["cost"]),
                "unpriced_calls": r["unpriced_calls"],
                "mean_ms": None if r["mean_ms"] is None else round(r["mean_ms"], 1),
                "purposes": sorted(r["purposes"]),
            }
            for r in await conn.fetch(MODELS, *args)
        },
    }


def render(report: dict[str, Any]) -> str:
    t, c = report["tasks"], report["cost_usd"]
    lines = [
        f"tasks done {t['done']}: frontier {t['frontier']}, local {t['local']}, fallback {t['fallback']} "
        f"(local share {t['local_share']:.0%}); failed {t['failed']}",
        f"cost (USD): frontier {c['frontier']:.6f}, local {c['local']:.6f}, learning {c['learning']:.6f}",
        f"saved (USD): {c['saved']:.6f} = frontier cost avoided {c['frontier_cost_avoided']:.6f} - local calls "
        f"{c['local']:.6f}"
        + (f"; {c['unpriced_local_tasks']} local task(s) unpriced" if c["unpriced_local_tasks"] else ""),
    ]
    if report["accuracy_by_day"]:
        lines.append("local accuracy (learning attempts, complete scores):")
        lines += [
            f"  {d['day']}: mean {d['mean_score']:.3f} over {d['attempts']} ({d['accepted']} accepted)"
            for d in report["accuracy_by_day"]
        ]
    if report["routed_by_day"]:
        lines.append("routed locally:")
        lines += [
            f"  {d['day']}: {d['local']} passed, {d['fallback']} fell back ({d['pass_rate']:.0%})"
            for d in report["routed_by_day"]
        ]
    if report["agents"]:
        lines.append("per agent:")
        lines += [
            f"  {name}: {a['tasks']} task(s), local {a['local_share']:.0%}, saved {a['saved_usd']:.6f}, "
            f"spent {a['spent_usd']:.6f}"
            for name, a in sorted(report["agents"].items())
        ]
    if report["models"]:
        lines.append("per model:")
        lines += [
            f"  {name} ({m['layer']}): {m['calls']} call(s), {m['failures']} failed, {m['tokens_in']}/{m['tokens_out']} "
            f"tokens, {m['cost_usd']:.6f} USD, {m['mean_ms'] or 0:.0f} ms mean"
            for name, m in sorted(report["models"].items())
        ]
    return "\n".join(lines)
