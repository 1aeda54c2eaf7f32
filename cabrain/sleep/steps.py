"""The knowledge steps of the sleep cycle, each over one namespace: *consolidate*, *dedup*,
*reconsolidate* (decay, demote and maintain have their own modules). Registry: STEP_FUNCTIONS.

Every step only ever adds rows and supersedes rows (``invalid_at`` + ``superseded_by``, with the
reason in ``metadata``); nothing is deleted. Each is idempotent: a re-run after a crash finds the
work it committed done and does the rest.

Scoping is kept: memories are only clustered, merged or compared within one owner-and-visibility
group (a private memory never feeds a fact another agent can read), and a memory is only
superseded by one at least as widely visible.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import asyncpg
import numpy as np

from cabrain.providers.llm import LLMError
from cabrain.search.keyword import IndexedDoc, PostgresBM25
from cabrain.sleep.context import StepContext, StepResult
from cabrain.store import judgments
from cabrain.store import memories as sql
from cabrain.write.decision import RETRACTION_MARGIN, compare, contradiction, duplicates

WIDTH = {"private": 0, "team": 1, "global": 2}
MAX_FACT_CHARS = 400

EPISODES = """
SELECT m.id, m.owner_agent_id, m.visibility, m.content, m.embedding, m.importance, m.valid_at, m.created_at
FROM memories m
WHERE m.namespace = $1 AND m.tier = 'hot' AND m.invalid_at IS NULL AND m.memory_type = 'episodic'
  AND m.consolidated_at IS NULL AND m.embedding IS NOT NULL
  AND m.created_at > $4::timestamptz - make_interval(secs => $2)
ORDER BY m.created_at DESC, m.id
LIMIT $3
"""
EXISTING_FACT = """
SELECT id FROM memories WHERE namespace = $1 AND content_hash = $2 AND invalid_at IS NULL AND tier = 'hot'
  AND network = 'fact' AND owner_agent_id IS NOT DISTINCT FROM $3 AND visibility = $4
LIMIT 1
"""
ADD_SOURCES = """
INSERT INTO memory_sources (memory_id, source_id, relation, run_id)
SELECT $1, s, $3, $4 FROM unnest($2::uuid[]) AS s
ON CONFLICT DO NOTHING
RETURNING source_id
"""
MARK_CONSOLIDATED = """
UPDATE memories m SET consolidated_at = now()
FROM memory_ids i WHERE i.id = ANY($1::uuid[]) AND m.id = i.id AND m.valid_at = i.valid_at
"""
ENTITY_LINKS = """
SELECT me.memory_id, me.entity_id FROM memory_entities me WHERE me.memory_id = ANY($1::uuid[])
"""
LINK = """
INSERT INTO memory_entities (memory_id, entity_id) SELECT $1, e FROM unnest($2::uuid[]) AS e ON CONFLICT DO NOTHING
"""
ENTITY_FACTS = """
SELECT e.id AS entity_id, e.name, m.id, m.content, m.importance, m.embedding
FROM entities e
JOIN memory_entities me ON me.entity_id = e.id
JOIN memory_ids i ON i.id = me.memory_id AND i.tier = 'hot'
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE e.id = ANY($1::uuid[]) AND m.invalid_at IS NULL AND m.network = 'fact' AND m.visibility <> 'private'
ORDER BY e.id, m.importance DESC, m.valid_at DESC, m.content, m.id
"""
SET_SUMMARY = """
UPDATE entities SET summary = $2, summary_sources = $3, summarized_at = now(), updated_at = now(), embedding = $4
WHERE id = $1
"""
CURRENT = """
SELECT m.id, m.namespace, m.owner_agent_id, m.visibility, m.network, m.memory_type, m.content, m.embedding,
       m.importance, m.access_count, m.valid_at, m.created_at, m.pinned
FROM memories m
WHERE m.namespace = $1 AND m.tier = 'hot' AND m.invalid_at IS NULL AND m.embedding IS NOT NULL
  AND ($2::text[] IS NULL OR m.network = ANY($2::text[]))
ORDER BY m.created_at, m.id
"""
WATERMARK = "SELECT upto FROM sleep_watermarks WHERE namespace = $1 AND step = $2"
SET_WATERMARK = """
INSERT INTO sleep_watermarks (namespace, step, upto) VALUES ($1, $2, $3)
ON CONFLICT (namespace, step) DO UPDATE SET upto = greatest(sleep_watermarks.upto, EXCLUDED.upto)
"""


def vec(value: Any) -> np.ndarray:
    """A stored vector (pgvector's ``Vector``, or an array) as float32."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def _groups(rows: Sequence[asyncpg.Record]) -> dict[tuple[str | None, str], list[asyncpg.Record]]:
    """Rows by who can read them: (owner, visibility); only private rows are kept apart by owner."""
    out: dict[tuple[str | None, str], list[asyncpg.Record]] = defaultdict(list)
    for r in rows:
        out[(r["owner_agent_id"] if r["visibility"] == "private" else None, r["visibility"])].append(r)
    return out


def star_clusters(vectors: np.ndarray, threshold: float, min_size: int) -> list[list[int]]:
    """Deterministic star clustering: the row with the most unassigned neighbours (cosine >=
    ``threshold``) seeds a cluster of itself and those neighbours; repeat. Every member is close to
    its seed, so clusters never chain unrelated texts together."""
    if len(vectors) == 0:
        return []
    unit = _unit(vectors.astype(np.float32))
    near = (unit @ unit.T) >= threshold
    free = np.ones(len(vectors), dtype=bool)
    degree = near.sum(axis=1).astype(np.int64)  # unassigned neighbours (itself included), kept current
    clusters = []
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
    unit = _unit(vectors.astype(np.float32))
    sims = unit @ unit.T
    centrality = sims.mean(axis=1)
    chosen: list[int] = []
    for i in np.argsort(-centrality, kind="stable"):
        if all(sims[i, j] < redundant for j in chosen):
            chosen.append(int(i))
        if len(chosen) == limit:
            break
    return chosen


def _statement(text: str) -> str:
    """A fact's text from an episode: its leading sentences, at most MAX_FACT_CHARS."""
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= MAX_FACT_CHARS:
        return text
    sentences = re.split(r"(?<=[.!?؟])\s+", text)
    out = ""
    for s in sentences:
        if len(out) + len(s) + 1 > MAX_FACT_CHARS:
            break
        out = f"{out} {s}".strip()
    return out or text[: MAX_FACT_CHARS - 1] + "…"


# --- consolidate -----------------------------------------------------------------------------------
async def consolidate(ctx: StepContext, namespace: str, month: str = "") -> StepResult:
    """Cluster recent episodes (stored within ``sleep_consolidate_window_days`` of the step's clock)
    and distill each cluster into facts (with their sources), then refresh the summaries of the
    entities those facts touch."""
    result = ctx.result()
    s = ctx.settings
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        episodes = await conn.fetch(
            EPISODES, namespace, s.sleep_consolidate_window_days * 86400, s.sleep_consolidate_batch, ctx.clock()
        )
    result.add("episodes_read", len(episodes))
    touched_entities: set[uuid.UUID] = set()
    for (owner, visibility), rows in sorted(_groups(episodes).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        vectors = np.array([vec(r["embedding"]) for r in rows])
        for members in star_clusters(vectors, s.sleep_cluster_similarity, s.sleep_min_cluster):
            cluster = [rows[i] for i in members]
            method, facts = await _distill(ctx, cluster, vectors[members], result)
            async with pool.acquire() as conn, conn.transaction():
                written = await _write_facts(ctx, conn, namespace, owner, visibility, cluster, facts, method, result)
                links = await conn.fetch(ENTITY_LINKS, [r["id"] for r in cluster])
                by_source = defaultdict(set)
                for link in links:
                    by_source[link["memory_id"]].add(link["entity_id"])
                for fact_id, sources in written:
                    entities = sorted({e for src in sources for e in by_source.get(src, ())})
                    if entities:
                        await conn.execute(LINK, fact_id, entities)
                        if visibility != "private":
                            touched_entities.update(entities)
                await conn.execute(MARK_CONSOLIDATED, [r["id"] for r in cluster])
            result.add("clusters")
            result.add("episodes_consolidated", len(cluster))
    if touched_entities:
        await _summarise_entities(ctx, sorted(touched_entities), result)
    return result


async def _distill(
    ctx: StepContext, cluster: list[asyncpg.Record], vectors: np.ndarray, result: StepResult
) -> tuple[str, list[tuple[str, list[uuid.UUID], np.ndarray | None]]]:
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
    out = []
    for i in picked:
        text = _statement(cluster[i]["content"])
        same = text == re.sub(r"\s+", " ", cluster[i]["content"]).strip()
        out.append((text, ids, vectors[i] if same else None))
    return "extractive", out


FACT_PROMPT = (
    "You distill an agent's episodic memories into durable facts. Given numbered episodes, answer with "
    'JSON {"facts": [{"text": "<one self-contained factual statement>", "sources": [<episode numbers>]}]}. '
    "At most {limit} facts, only what the episodes state (never guess), each citing the episodes it rests on."
)


async def _distill_llm(chat: Any, cluster: list[asyncpg.Record], limit: int) -> list[tuple[str, list[uuid.UUID], None]]:
    listing = "\n".join(f"{n}. {_statement(r['content'])}" for n, r in enumerate(cluster, start=1))
    answer = await chat.complete(FACT_PROMPT.replace("{limit}", str(limit)), listing)
    try:
        facts = json.loads(answer)["facts"]
        out = []
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


async def _write_facts(
    ctx: StepContext,
    conn: asyncpg.Connection,
    namespace: str,
    owner: str | None,
    visibility: str,
    cluster: list[asyncpg.Record],
    facts: list[tuple[str, list[uuid.UUID], np.ndarray | None]],
    method: str,
    result: StepResult,
) -> list[tuple[uuid.UUID, list[uuid.UUID]]]:
    owner = owner or cluster[0]["owner_agent_id"]
    to_embed = [i for i, (_, _, v) in enumerate(facts) if v is None]
    vectors = {i: v for i, (_, _, v) in enumerate(facts) if v is not None}
    if to_embed:
        embedder = await ctx.embedder()
        for i, vector in zip(to_embed, await embedder.embed_documents([facts[i][0] for i in to_embed]), strict=True):
            vectors[i] = np.asarray(vector, dtype=np.float32)
    written = []
    by_id = {r["id"]: r for r in cluster}
    for i, (text, sources, _) in enumerate(facts):
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        existing = await conn.fetchval(EXISTING_FACT, namespace, digest, owner, visibility)
        fact_id = existing or uuid.uuid4()
        if existing is None:
            evidence = [by_id[s] for s in sources]
            await sql.insert_memories(
                conn,
                [
                    {
                        "id": fact_id,
                        "namespace": namespace,
                        "owner_agent_id": owner,
                        "visibility": visibility,
                        "network": "fact",
                        "memory_type": "semantic",
                        "content": text,
                        "source_kind": "sleep",
                        "source_ref": f"sleep:{ctx.run_id}",
                        "embedding": vectors[i],
                        "importance": min(1.0, max(float(r["importance"]) for r in evidence) + 0.1),
                        "valid_at": max(r["valid_at"] for r in evidence),
                        "metadata": {
                            "distilled_from": [str(x) for x in sources],
                            "method": method,
                            "sleep_run": str(ctx.run_id),
                        },
                        "content_hash": digest,
                    }
                ],
            )
            valid_at = max(r["valid_at"] for r in evidence)
            await PostgresBM25(k1=ctx.settings.bm25_k1, b=ctx.settings.bm25_b).index(
                conn, [IndexedDoc(fact_id, namespace, valid_at, text)]
            )
            result.add("facts_created")
            result.change(memory_id=fact_id, action="fact distilled", sources=len(sources), text=text[:160])
        else:
            result.add("facts_reinforced")
        await conn.execute(ADD_SOURCES, fact_id, list(sources), "distilled_from", ctx.run_id)
        written.append((fact_id, list(sources)))
    return written


async def _summarise_entities(ctx: StepContext, entity_ids: list[uuid.UUID], result: StepResult) -> None:
    """An entity's summary: its most important current shared facts (their text, their sources)."""
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        rows = await conn.fetch(ENTITY_FACTS, entity_ids)
    by_entity: dict[uuid.UUID, list[asyncpg.Record]] = defaultdict(list)
    for r in rows:
        by_entity[r["entity_id"]].append(r)
    chat = ctx.chat()
    async with pool.acquire() as conn:
        for entity_id, facts in sorted(by_entity.items()):
            top = facts[:3]
            summary = " ".join(f["content"] for f in top)
            if chat is not None:
                try:
                    answer = await chat.complete(
                        'Summarise what is known about the named entity from these facts only. JSON {"summary": "..."}',
                        f"Entity: {top[0]['name']}\n" + "\n".join(f"- {f['content']}" for f in facts[:10]),
                    )
                    summary = str(json.loads(answer)["summary"]).strip() or summary
                except (LLMError, ValueError, KeyError, TypeError):
                    result.add("llm_fallbacks")
            vector = _unit(np.array([vec(f["embedding"]) for f in top])).mean(axis=0)
            await conn.execute(SET_SUMMARY, entity_id, summary[:2000], [f["id"] for f in top], vector)
            result.add("entity_summaries")
            result.change(entity=top[0]["name"], action="summary", sources=len(top))


# --- dedup -----------------------------------------------------------------------------------------
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
        since = await conn.fetchval(WATERMARK, namespace, "dedup")
        upto = await conn.fetchval("SELECT now()")
        rows = await conn.fetch(CURRENT, namespace, None)
    result.add("memories_compared", len(rows))
    threshold = ctx.settings.sleep_dedup_similarity
    for _key, group in sorted(_groups(rows).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        by_kind: dict[tuple[str, str], list[asyncpg.Record]] = defaultdict(list)
        for r in group:
            by_kind[(r["network"], r["memory_type"])].append(r)
        for members in by_kind.values():
            await _merge_duplicates(ctx, members, since, threshold, result)
    async with pool.acquire() as conn:
        await conn.execute(SET_WATERMARK, namespace, "dedup", upto)
    return result


async def _merge_duplicates(ctx: StepContext, rows: list, since: Any, threshold: float, result: StepResult) -> None:
    if len(rows) < 2:
        return
    unit = _unit(np.array([vec(r["embedding"]) for r in rows]))
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
            for j in np.flatnonzero(sims[bi] >= threshold):
                j = int(j)
                if j != i and not (rows[i]["pinned"] or rows[j]["pinned"]):  # a pinned memory stands alone
                    if not duplicates(rows[i]["content"], rows[j]["content"], float(sims[bi, j]), threshold):
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
            now = await conn.fetchval("SELECT now()")
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
                added = await conn.fetch(ADD_SOURCES, keeper["id"], [r["id"] for r in merged], "merged", ctx.run_id)
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


# --- reconsolidate ---------------------------------------------------------------------------------
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
        rows = await conn.fetch(CURRENT, namespace, ["fact", "belief"])
    result.add("facts_compared", len(rows))
    if len(rows) < 2:
        return result
    unit = _unit(np.array([vec(r["embedding"]) for r in rows]))
    sims = unit @ unit.T
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["valid_at"], rows[i]["created_at"], str(rows[i]["id"])))
    rank = {i: n for n, i in enumerate(order)}
    gone: set[int] = set()
    chat = ctx.chat()
    for newer in reversed(order):
        if newer in gone:
            continue
        for older in order:
            if (
                rank[older] >= rank[newer]
                or older in gone
                or sims[newer, older] < s.revision_similarity - RETRACTION_MARGIN
            ):
                continue
            a, b = rows[newer], rows[older]
            if WIDTH[a["visibility"]] < WIDTH[b["visibility"]]:
                continue  # never hide a wider-visible fact behind a narrower one
            if b["visibility"] == "private" and a["owner_agent_id"] != b["owner_agent_id"]:
                continue
            if b["pinned"]:
                continue  # pinned (a memory-tool file, an important memory): only its writer replaces it
            why = contradiction(
                a["content"],
                b["content"],
                float(sims[newer, older]),
                revision_similarity=s.revision_similarity,
                duplicate_similarity=s.duplicate_similarity,
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
                inputs={"newer": str(a["id"]), "text": a["content"], "similarity": round(float(sims[newer, older]), 4)},
            )
            async with pool.acquire() as conn, conn.transaction():
                if await judgments.supersede(
                    conn, judgment, b["id"], by=a["id"], metadata=reason, now=await conn.fetchval("SELECT now()")
                ):
                    await judgments.record(conn, judgment)
                    gone.add(older)
                    result.add("superseded")
                    result.change(memory_id=b["id"], action="superseded", by=a["id"], reason=why)
    return result


def _step_functions() -> dict[str, Any]:
    from cabrain.sleep.decay import decay
    from cabrain.sleep.demote import demote
    from cabrain.sleep.maintain import maintain
    from cabrain.sleep.purge import purge

    return {
        "consolidate": consolidate,
        "dedup": dedup,
        "reconsolidate": reconsolidate,
        "decay": decay,
        "demote": demote,
        "purge": purge,
        "maintain": maintain,
    }


STEP_FUNCTIONS = _step_functions()

__all__ = ["STEP_FUNCTIONS", "central_statements", "consolidate", "dedup", "reconsolidate", "star_clusters"]
