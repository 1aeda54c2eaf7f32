"""*consolidate*: recent episodes are distilled into facts (with their sources) - a conversation's
turns one by one (:mod:`cabrain.sleep.sittings`), other episodes by clusters - each sitting whose
turns were read gets its summary (re)written, and the summaries of the entities those facts touch
are refreshed.

The turns' part is :mod:`cabrain.sleep.turns`, the writing of what is distilled
:mod:`cabrain.sleep.writing`. It only adds rows (and marks episodes consolidated); a re-run after a crash finds the facts it
committed (by their text's hash) and reinforces them instead of writing them again.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import defaultdict

import asyncpg
import numpy as np

from cabrain.providers.llm import ChatModel, LLMError
from cabrain.sleep.aliases import merge_aliases
from cabrain.sleep.context import StepContext, StepResult
from cabrain.sleep.rows import readership_groups, unit_rows, vec
from cabrain.sleep.turns import distill_turns
from cabrain.sleep.writing import MAX_FACT_CHARS, Fact, settle, statement
from cabrain.store import judgments
from cabrain.store import sleep as sleep_sql


def star_clusters(vectors: np.ndarray, threshold: float, min_size: int) -> list[list[int]]:
    """Deterministic star clustering: the row with the most unassigned neighbours (cosine >=
    ``threshold``) seeds a cluster of itself and those neighbours; repeat. Every member is close to
    its seed, so clusters never chain unrelated texts together."""
    if len(vectors) == 0:
        return []
    unit = unit_rows(vectors.astype(np.float32))
    near = (unit @ unit.T) >= threshold
    free = np.ones(len(vectors), dtype=bool)
    degree = near.sum(axis=1).astype(np.int64)  # unassigned neighbours (itself included), kept current
    clusters: list[list[int]] = []
    while True:
        seed = int(np.argmax(np.where(free, degree, -1)))
        if not free[seed] or degree[seed] < min_size:
            return clusters
        members = np.flatnonzero(near[seed] & free)
        free[members] = False
        degree -= near[:, members].sum(axis=1)
        clusters.append(sorted(int(i) for i in members))


def central_statements(vectors: np.ndarray, limit: int, redundant: float) -> list[int]:
    """Indices of the most central rows (highest mean similarity to the cluster), skipping any too
    similar to one already chosen (maximal marginal relevance with a hard redundancy cut)."""
    unit = unit_rows(vectors.astype(np.float32))
    sims = unit @ unit.T
    centrality = sims.mean(axis=1)
    chosen: list[int] = []
    for i in np.argsort(-centrality, kind="stable"):
        if all(sims[i, j] < redundant for j in chosen):
            chosen.append(int(i))
        if len(chosen) == limit:
            break
    return chosen


# --- consolidate -----------------------------------------------------------------------------------
async def consolidate(ctx: StepContext, namespace: str, month: str = "") -> StepResult:
    """Distill recent episodes (stored within ``sleep_consolidate_window_days`` of the step's clock)
    into facts with their sources: a conversation's turns each by the sitting distiller
    (:mod:`cabrain.sleep.sittings`), other episodes by clusters; then refresh the summaries of the
    entities those facts touch."""
    result = ctx.result()
    s = ctx.settings
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        episodes = await conn.fetch(
            sleep_sql.EPISODES,
            namespace,
            s.sleep_consolidate_window_days * 86400,
            s.sleep_consolidate_batch,
            ctx.clock(),
        )
    result.add("episodes_read", len(episodes))
    touched_entities: set[uuid.UUID] = set()
    turns = [r for r in episodes if r["speaker"] and r["speaker"].strip()]
    if turns:  # a conversation's turns: the sitting distiller (cabrain.sleep.sittings)
        touched_entities |= await distill_turns(ctx, namespace, turns, result)
        episodes = [r for r in episodes if not (r["speaker"] and r["speaker"].strip())]
    for (owner, visibility), rows in sorted(
        readership_groups(episodes).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
    ):
        vectors = np.array([vec(r["embedding"]) for r in rows])
        for members in star_clusters(vectors, s.sleep_cluster_similarity, s.sleep_min_cluster):
            cluster = [rows[i] for i in members]
            method, facts = await _distill(ctx, cluster, vectors[members], result)
            touched_entities |= await settle(ctx, namespace, owner, visibility, cluster, facts, method, result)
            result.add("clusters")
            result.add("episodes_consolidated", len(cluster))
    touched_entities |= await merge_aliases(ctx, namespace, result)
    if touched_entities:
        await _summarise_entities(ctx, namespace, sorted(touched_entities), result)
    return result


async def _distill(
    ctx: StepContext, cluster: list[asyncpg.Record], vectors: np.ndarray, result: StepResult
) -> tuple[str, list[Fact]]:
    """(fact text, source ids, vector or None to embed) for one cluster: through the chat model
    when one is configured (falling back to extraction if it fails), else extractive."""
    chat = ctx.chat()
    if chat is not None:
        try:
            return "llm", await _distill_llm(chat, cluster, ctx.settings.sleep_facts_per_cluster)
        except LLMError as exc:
            result.add("llm_fallbacks")
            result.change(action="llm fallback", error=str(exc)[:200])
    # a statement as close to one already chosen as cluster members are to their seed says the same thing
    picked = central_statements(vectors, ctx.settings.sleep_facts_per_cluster, ctx.settings.sleep_cluster_similarity)
    ids = [r["id"] for r in cluster]
    out: list[Fact] = []
    for i in picked:
        text = statement(cluster[i]["content"])
        same = text == re.sub(r"\s+", " ", cluster[i]["content"]).strip()
        out.append((text, ids, vectors[i] if same else None))
    return "extractive", out


FACT_PROMPT = (
    "You distill an agent's episodic memories into durable facts. Given numbered episodes, answer with "
    'JSON {"facts": [{"text": "<one self-contained factual statement>", "sources": [<episode numbers>]}]}. '
    "At most {limit} facts, only what the episodes state (never guess), each citing the episodes it rests on."
)


async def _distill_llm(chat: ChatModel, cluster: list[asyncpg.Record], limit: int) -> list[Fact]:
    listing = "\n".join(f"{n}. {statement(r['content'])}" for n, r in enumerate(cluster, start=1))
    answer = await chat.complete(FACT_PROMPT.replace("{limit}", str(limit)), listing)
    try:
        facts = json.loads(answer)["facts"]
        out: list[Fact] = []
        for fact in facts[:limit]:
            text = re.sub(r"\s+", " ", str(fact["text"])).strip()[:MAX_FACT_CHARS]
            sources = [cluster[int(n) - 1]["id"] for n in fact["sources"] if 1 <= int(n) <= len(cluster)]
            if text and sources:
                out.append((text, sources, None))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise LLMError(f"the chat model's facts are not usable JSON: {exc}") from exc
    if not out:
        raise LLMError("the chat model distilled no facts with sources")
    return out


async def _summarise_entities(
    ctx: StepContext, namespace: str, entity_ids: list[uuid.UUID], result: StepResult
) -> None:
    """An entity's summary: sentences about it from its most important current shared facts, each
    citing the fact it comes from (``[n]``: the n-th of ``summary_sources``); or, with a chat model,
    what it writes from them. Recorded as one ``summarize`` judgment of the run (before and after)."""
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        rows = await conn.fetch(sleep_sql.ENTITY_FACTS, entity_ids)
    by_entity: dict[uuid.UUID, list[asyncpg.Record]] = defaultdict(list)
    for r in rows:
        by_entity[r["entity_id"]].append(r)
    chat = ctx.chat()
    limit = ctx.settings.sleep_summary_facts
    judgment = judgments.Judgment(namespace, "summarize", "consolidate", "", run_id=ctx.run_id)
    async with pool.acquire() as conn, conn.transaction():
        before = {r["id"]: judgments.entity_state(r) for r in await conn.fetch(judgments.ENTITY_STATE, list(by_entity))}
        for entity_id, facts in sorted(by_entity.items()):
            top = facts[:limit]
            summary = " ".join(f"{_sentence(f['content'])} [{n}]" for n, f in enumerate(top, start=1))
            if chat is not None:
                try:
                    answer = await chat.complete(
                        "Summarise what is known about the named entity from these numbered facts only, citing "
                        'each fact you use as [n]. JSON {"summary": "..."}',
                        f"Entity: {top[0]['name']}\n"
                        + "\n".join(f"[{n}] {f['content']}" for n, f in enumerate(top, 1)),
                    )
                    summary = str(json.loads(answer)["summary"]).strip() or summary
                except (LLMError, ValueError, KeyError, TypeError):
                    result.add("llm_fallbacks")
            vector = unit_rows(np.array([vec(f["embedding"]) for f in top])).mean(axis=0)
            await conn.execute(sleep_sql.SET_SUMMARY, entity_id, summary[:2000], [f["id"] for f in top], vector)
            after = judgments.entity_state((await conn.fetch(judgments.ENTITY_STATE, [entity_id]))[0])
            judgment.entities.append(
                {"entity_id": str(entity_id), "name": top[0]["name"], "before": before[entity_id], "after": after}
            )
            judgment.related.update(f["id"] for f in top)  # both summaries' sources: read-checked when shown
            judgment.related.update(uuid.UUID(x) for x in before[entity_id]["summary_sources"])
            result.add("entity_summaries")
            result.change(entity=top[0]["name"], action="summary", sources=len(top))
        if judgment.entities:
            judgment.reason = (
                f"summarised {len(judgment.entities)} entit{'ies' if len(judgment.entities) != 1 else 'y'}"
            )
            await judgments.record(conn, judgment)


def _sentence(text: str) -> str:
    """A fact as a sentence of a summary: ends with its stop."""
    text = text.strip()
    return text if text.endswith((".", "!", "?", "؟")) else text + "."


__all__ = ["central_statements", "consolidate", "star_clusters"]
