"""*reconsolidate*: current facts and beliefs that contradict each other are resolved by
supersession, the newer evidence winning; the reason is recorded on the old row (nothing is deleted).
"""

from __future__ import annotations

import json

import numpy as np

from cabrain.providers.llm import LLMError
from cabrain.sleep.context import StepContext, StepResult
from cabrain.sleep.rows import WIDTH, origin, unit_rows, vec
from cabrain.store import judgments
from cabrain.store import sleep as sleep_sql
from cabrain.types import Decision
from cabrain.write.decision import RETRACTION_MARGIN, compare, contradiction, origin_refusal

CONTRADICTION_PROMPT = (
    "Two statements from an agent's memory. Do they contradict each other (cannot both be true now)? "
    'Answer JSON {"contradiction": true|false, "reason": "<short>"}.'
)


async def reconsolidate(ctx: StepContext, namespace: str, month: str = "") -> StepResult:
    """Facts that contradict each other are resolved by supersession: the newer evidence wins
    (later ``valid_at``, then later ``created_at``), the reason is recorded on the old row. A pair is
    a contradiction when the write decision (:func:`cabrain.write.decision.contradiction`) would have
    let the newer revise or retract the older - the same subject, a new value of the same attribute
    or a retraction - or, with a chat model configured, when the model says so of two statements
    about the same subject."""
    result = ctx.result()
    s = ctx.settings
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        rows = await conn.fetch(sleep_sql.CURRENT, namespace, ["fact", "belief"])
    result.add("facts_compared", len(rows))
    if len(rows) < 2:
        return result
    origins = [origin(r, s.record_source_kinds) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["valid_at"], rows[i]["created_at"], str(rows[i]["id"])))
    rank = np.empty(len(rows), dtype=np.int64)
    rank[order] = np.arange(len(rows))
    candidates = nearest_older(
        unit_rows(np.array([vec(r["embedding"]) for r in rows])),
        rank,
        floor=s.revision_similarity - RETRACTION_MARGIN,
        limit=s.sleep_reconsolidate_neighbours,
    )
    result.add("pairs_weighed", sum(len(c) for c in candidates))
    gone: set[int] = set()
    chat = ctx.chat()
    for newer in reversed(order):
        if newer in gone:
            continue
        for older, similarity in candidates[newer]:
            if older in gone:
                continue
            a, b = rows[newer], rows[older]
            pair = (origins[newer], origins[older])
            if WIDTH[a["visibility"]] < WIDTH[b["visibility"]]:
                continue  # never hide a wider-visible fact behind a narrower one
            if b["visibility"] == "private" and a["owner_agent_id"] != b["owner_agent_id"]:
                continue
            if b["pinned"]:
                continue  # pinned (a memory-tool file, an important memory): only its writer replaces it
            apart = origin_refusal(Decision.UPDATE, compare(a["content"], b["content"]), *pair, a["content"])
            if apart and not (origins[newer].plain and origins[older].plain):
                continue  # turns of different speakers, records of a source: distinct (write.decision.origin)
            why = contradiction(
                a["content"],
                b["content"],
                similarity,
                revision_similarity=s.revision_similarity,
                duplicate_similarity=s.duplicate_similarity,
                newer_origin=origins[newer],
                older_origin=origins[older],
            )
            if why is None and chat is not None and compare(a["content"], b["content"]).same_subject:
                try:
                    verdict = json.loads(
                        await chat.complete(
                            CONTRADICTION_PROMPT, f"A (newer): {a['content']}\nB (older): {b['content']}"
                        )
                    )
                    if verdict.get("contradiction") is True:
                        why = f"chat model: {str(verdict.get('reason') or 'contradiction')[:200]}"
                except (LLMError, ValueError, TypeError, AttributeError):
                    result.add("llm_fallbacks")
            if why is None:
                continue
            reason = {
                "superseded_reason": f"contradicted by newer evidence {a['id']}: {why}",
                "sleep_run": str(ctx.run_id),
            }
            judgment = judgments.Judgment(
                namespace,
                "supersede",
                "reconsolidate",
                reason["superseded_reason"],
                run_id=ctx.run_id,
                inputs={"newer": str(a["id"]), "text": a["content"], "similarity": round(similarity, 4)},
            )
            async with pool.acquire() as conn, conn.transaction():
                if await judgments.supersede(
                    conn, judgment, b["id"], by=a["id"], metadata=reason, now=await conn.fetchval(sleep_sql.NOW)
                ):
                    await judgments.record(conn, judgment)
                    gone.add(older)
                    result.add("superseded")
                    result.change(memory_id=b["id"], action="superseded", by=a["id"], reason=why)
    return result


# Similarities are computed this many cells at a time: bounded memory at any namespace size.
BLOCK_CELLS = 4_000_000


def nearest_older(unit: np.ndarray, rank: np.ndarray, *, floor: float, limit: int) -> list[list[tuple[int, float]]]:
    """For each row, its ``limit`` most similar rows of lower ``rank`` (older evidence) at cosine at least
    ``floor``, oldest first. The cut that keeps reconsolidate near-linear: a contradiction is about the
    same subject, so the older fact it contradicts is among the newer one's nearest."""
    n = len(unit)
    out: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    step = max(1, BLOCK_CELLS // max(n, 1))
    for start in range(0, n, step):
        sims = unit[start : start + step] @ unit.T
        rows = np.arange(start, start + len(sims))
        sims[rank[None, :] >= rank[rows, None]] = -np.inf  # only older rows, never the row itself
        sims[sims < floor] = -np.inf
        if limit < n:
            top = np.argpartition(-sims, limit - 1, axis=1)[:, :limit]
        else:
            top = np.broadcast_to(np.arange(n), sims.shape)
        for offset, row in enumerate(rows):
            picked = [(int(j), float(sims[offset, j])) for j in top[offset] if sims[offset, j] != -np.inf]
            picked.sort(key=lambda pair: rank[pair[0]])
            out[row] = picked
    return out


__all__ = ["nearest_older", "reconsolidate"]
