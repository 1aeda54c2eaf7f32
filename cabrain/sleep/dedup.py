"""*dedup*: near-duplicates among current memories of the same kind and readership are merged into
the earliest of them; the others are superseded by it (nothing is deleted). Only memories new since
the last dedup (its watermark) are compared with the rest.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import asyncpg
import numpy as np

from cabrain.sleep.context import StepContext, StepResult
from cabrain.sleep.rows import origin, readership_groups, unit_rows, vec
from cabrain.store import judgments
from cabrain.store import sleep as sleep_sql
from cabrain.write.decision import duplicates


async def dedup(ctx: StepContext, namespace: str, month: str = "") -> StepResult:
    """Merge near-duplicates (cosine >= sleep_dedup_similarity) among current memories of the same
    kind and readership: the earliest stays, absorbing the others' importance and use; the others
    are superseded by it. Only texts that say the same thing are duplicates
    (:func:`cabrain.write.decision.duplicates`): about another subject, or with a new value, a
    negation or a revision cue, they are kept apart (which one is current is reconsolidate's call).
    Only memories new since the last dedup are compared with the rest."""
    result = ctx.result()
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        since = await conn.fetchval(sleep_sql.WATERMARK, namespace, "dedup")
        upto = await conn.fetchval(sleep_sql.NOW)
        rows = await conn.fetch(sleep_sql.CURRENT, namespace, None)
    result.add("memories_compared", len(rows))
    threshold = ctx.settings.sleep_dedup_similarity
    for _key, group in sorted(readership_groups(rows).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        by_kind: dict[tuple[str, str], list[asyncpg.Record]] = defaultdict(list)
        for r in group:
            by_kind[(r["network"], r["memory_type"])].append(r)
        for members in by_kind.values():
            await _merge_duplicates(ctx, members, since, threshold, result)
    async with pool.acquire() as conn:
        await conn.execute(sleep_sql.SET_WATERMARK, namespace, "dedup", upto)
    return result


async def _merge_duplicates(
    ctx: StepContext, rows: list[asyncpg.Record], since: Any, threshold: float, result: StepResult
) -> None:
    if len(rows) < 2:
        return
    unit = unit_rows(np.array([vec(r["embedding"]) for r in rows]))
    origins = [origin(r, ctx.settings.record_source_kinds) for r in rows]  # two turns are never one
    new = [i for i, r in enumerate(rows) if since is None or r["created_at"] >= since]
    parent = list(range(len(rows)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    best: dict[tuple[int, int], float] = {}
    for start in range(0, len(new), 512):
        block = new[start : start + 512]
        sims = unit[block] @ unit.T
        for bi, i in enumerate(block):
            for hit in np.flatnonzero(sims[bi] >= threshold):
                j = int(hit)
                if j != i and not (rows[i]["pinned"] or rows[j]["pinned"]):  # a pinned memory stands alone
                    if not duplicates(
                        rows[i]["content"], rows[j]["content"], float(sims[bi, j]), threshold, origins[i], origins[j]
                    ):
                        continue  # close but not the same (another subject, a new value): kept apart
                    a, b = find(i), find(j)
                    if a != b:
                        parent[max(a, b)] = min(a, b)  # rows are oldest first: the root is the earliest
                    best[(min(i, j), max(i, j))] = float(sims[bi, j])
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(rows)):
        groups[find(i)].append(i)
    pool = await ctx.pool()
    for root, members in groups.items():
        if len(members) < 2:
            continue
        keeper = rows[root]
        async with pool.acquire() as conn, conn.transaction():
            merged = []
            judgment = judgments.Judgment(
                keeper["namespace"],
                "merge",
                "dedup",
                f"dedup: near-duplicates of {keeper['id']}",
                run_id=ctx.run_id,
                inputs={"keeper": str(keeper["id"]), "text": keeper["content"], "similarities": {}},
            )
            now = await conn.fetchval(sleep_sql.NOW)
            for i in sorted(members):
                if i == root:
                    continue
                sim = best.get((min(i, root), max(i, root))) or float(unit[i] @ unit[root])
                reason = {
                    "superseded_reason": f"dedup: near-duplicate of {keeper['id']} (similarity {sim:.3f})",
                    "sleep_run": str(ctx.run_id),
                }
                if await judgments.supersede(conn, judgment, rows[i]["id"], by=keeper["id"], metadata=reason, now=now):
                    merged.append(rows[i])
                    judgment.inputs["similarities"][str(rows[i]["id"])] = round(sim, 4)
                    result.change(memory_id=rows[i]["id"], action="merged", into=keeper["id"], similarity=round(sim, 4))
            if merged:
                await judgments.change(
                    conn,
                    judgment,
                    keeper["id"],
                    {
                        "importance": max(float(keeper["importance"]), *(float(r["importance"]) for r in merged)),
                        "access_count": int(keeper["access_count"]) + sum(int(r["access_count"]) for r in merged),
                    },
                )
                added = await conn.fetch(
                    sleep_sql.ADD_SOURCES, keeper["id"], [r["id"] for r in merged], "merged", ctx.run_id
                )
                judgment.links = [
                    {
                        "memory_id": str(keeper["id"]),
                        "source_id": str(a["source_id"]),
                        "relation": "merged",
                        "run_id": str(ctx.run_id),
                        "op": "add",
                    }
                    for a in added
                ]
                await judgments.record(conn, judgment)
                result.add("merged", len(merged))
                result.add("survivors")


__all__ = ["dedup"]
