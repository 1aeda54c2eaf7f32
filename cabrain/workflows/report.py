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

from cabrain.settings import Settings
from cabrain.store import workflow_report as sql
from cabrain.workflows import clusters


def _money(x: float) -> float:
    return round(x, 8)


async def build(
    conn: asyncpg.Connection, settings: Settings, *, namespaces: list[str] | None = None, days: int | None = None
) -> dict[str, Any]:
    """The report over ``namespaces`` (None: all) for the last ``days`` (None: all time), by
    ``settings``' thresholds: the score an attempt is accepted at, and a chain's routing confidence,
    accuracy and latency."""
    accept = settings.workflow_accept_score
    since = datetime.now(UTC) - timedelta(days=days) if days else datetime(1970, 1, 1, tzinfo=UTC)
    args = (namespaces, since)
    per_agent: dict[str, dict[str, Any]] = {}
    totals = {"frontier": 0, "local": 0, "fallback": 0}
    frontier_cost = local_cost = would_have = wasted = 0.0
    unpriced = 0
    for row in await conn.fetch(sql.TASKS, *args):
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
    learning = await conn.fetchrow(sql.LEARNING_COST, *args)
    saved = would_have - local_cost  # local_cost: the local-routed tasks' calls and the fallbacks' wasted ones
    return {
        "since": since.isoformat() if days else None,
        "namespaces": namespaces,
        "tasks": {
            "done": done,
            **totals,
            "failed": await conn.fetchval(sql.FAILED, *args),
            "local_share": round(totals["local"] / done, 4) if done else 0.0,
        },
        "cost_usd": {
            "frontier": _money(frontier_cost),
            "local": _money(local_cost),
            "learning": _money(float(learning["cost"])),
            "audits": _money(float(learning["audits"])),
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
            for r in await conn.fetch(sql.ACCURACY, *args, accept)
        ],
        "routed_by_day": [
            {
                "day": r["day"],
                "local": r["local_ok"],
                "fallback": r["fallback"],
                "pass_rate": round(r["local_ok"] / (r["local_ok"] + r["fallback"]), 4),
            }
            for r in await conn.fetch(sql.ROUTED, *args)
        ],
        "chains": [
            {"chain": r["chain_key"], "mean_score": round(r["mean_score"], 4), "attempts": r["attempts"]}
            for r in await conn.fetch(sql.CHAIN_SCORES, *args)
        ],
        "agents": per_agent,
        "kinds": await _kinds(conn, args, namespaces, settings),
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
            for r in await conn.fetch(sql.MODELS, *args)
        },
    }


async def _kinds(
    conn: asyncpg.Connection,
    args: tuple[Any, ...],
    namespaces: list[str] | None,
    s: Settings,
) -> list[dict[str, Any]]:
    """Per kind of task (a cluster with tasks in the period): its tasks by route, its best chain and
    whether it is trusted (and if not, why), the chains demoted in it with the judgment to revert, and
    its live accuracy from the audits."""
    demotions = {
        (int(r["cluster"]), r["chain"]): str(r["id"])
        for r in await conn.fetch(sql.DEMOTIONS, namespaces)
        if r["op"] == "demote"
    }
    out = []
    for r in await conn.fetch(sql.KINDS, *args):
        cluster = clusters.Cluster.from_row(r)
        why = cluster.why_not(s.workflow_route_confidence, s.workflow_route_accuracy, s.workflow_max_local_ms)
        out.append(
            {
                "id": cluster.id,
                "namespace": cluster.namespace,
                "task_type": r["task_type"],
                "example": r["example"],
                "tasks": r["tasks"],
                "frontier": r["frontier"],
                "local": r["local"],
                "fallback": r["fallback"],
                "local_share": round(r["local"] / r["tasks"], 4) if r["tasks"] else 0.0,
                "best_chain": None if cluster.best_chain is None else cluster.best_chain["key"],
                "accuracy": None if cluster.avg_accuracy is None else round(cluster.avg_accuracy, 4),
                "confidence": round(cluster.confidence, 4),
                "samples": cluster.samples,
                "latency_ms": None if cluster.latency_ms is None else round(cluster.latency_ms, 1),
                "structure": None if cluster.structure is None else round(cluster.structure, 4),
                "trusted": why is None,
                "why_frontier": why,
                "demoted": list(cluster.demoted),
                "demotions": {
                    key: demotions[(cluster.id, key)] for key in cluster.demoted if (cluster.id, key) in demotions
                },
                "live": {
                    "audited": r["audited"],
                    "failed": r["audit_failed"],
                    "mean": None if r["live_mean"] is None else round(r["live_mean"], 4),
                },
            }
        )
    return out


def render(report: dict[str, Any]) -> str:
    t, c = report["tasks"], report["cost_usd"]
    lines = [
        f"tasks done {t['done']}: frontier {t['frontier']}, local {t['local']}, fallback {t['fallback']} "
        f"(local share {t['local_share']:.0%}); failed {t['failed']}",
        f"cost (USD): frontier {c['frontier']:.6f}, local {c['local']:.6f}, learning {c['learning']:.6f}, "
        f"audits {c['audits']:.6f}",
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
    if report["kinds"]:
        lines.append("per kind of task:")
        for k in report["kinds"]:
            state = (
                f"trusted chain {k['best_chain']} (accuracy {k['accuracy']:.2f}, confidence {k['confidence']:.2f})"
                if k["trusted"]
                else f"on the frontier: {k['why_frontier']}"
            )
            lines.append(
                f'  #{k["id"]} {k["namespace"]} {k["task_type"]} "{k["example"]}": {k["tasks"]} task(s), local '
                f"{k['local']}, fallback {k['fallback']}; {state}"
            )
            if k["live"]["audited"]:
                mean = "-" if k["live"]["mean"] is None else f"{k['live']['mean']:.2f}"
                lines.append(f"    live: {k['live']['audited']} audited, mean score {mean}")
            lines += [
                f"    demoted {key}"
                + (f" (undo: cabrain revert --judgment {j})" if (j := k["demotions"].get(key)) else "")
                for key in k["demoted"]
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
