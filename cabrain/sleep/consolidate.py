"""*consolidate*: recent episodes are distilled into facts (with their sources) - a conversation's
turns one by one (:mod:`cabrain.sleep.sittings`), other episodes by clusters - and the summaries of
the entities those facts touch are refreshed.

It only adds rows (and marks episodes consolidated); a re-run after a crash finds the facts it
committed (by their text's hash) and reinforces them instead of writing them again.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import defaultdict
from datetime import datetime

import asyncpg
import numpy as np

from cabrain.providers.llm import ChatModel, LLMError
from cabrain.search.keyword import IndexedDoc, PostgresBM25
from cabrain.sleep.aliases import merge_aliases
from cabrain.sleep.context import StepContext, StepResult
from cabrain.sleep.distillers import Turn, turn_distiller
from cabrain.sleep.rows import ADD_SOURCES, readership_groups, unit_rows, vec
from cabrain.store import entities as entity_sql
from cabrain.store import judgments
from cabrain.store import memories as sql
from cabrain.write import entities as entity_extraction
from cabrain.write.writer import KNOWN_ENTITY_KEYS, UPSERT_AND_LINK

MAX_FACT_CHARS = 400
TURNS_PER_TRANSACTION = 200
# A fact to write: its text, its source memories, and its vector (None: still to embed).
Fact = tuple[str, list[uuid.UUID], np.ndarray | None]

EPISODES = """
SELECT m.id, m.owner_agent_id, m.visibility, m.content, m.embedding, m.importance, m.valid_at, m.created_at,
       m.metadata ->> 'speaker' AS speaker, m.metadata ->> 'thread' AS thread
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
    """Distill recent episodes (stored within ``sleep_consolidate_window_days`` of the step's clock)
    into facts with their sources: a conversation's turns each by the sitting distiller
    (:mod:`cabrain.sleep.sittings`), other episodes by clusters; then refresh the summaries of the
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
    turns = [r for r in episodes if r["speaker"] and r["speaker"].strip()]
    if turns:  # a conversation's turns: the sitting distiller (cabrain.sleep.sittings)
        touched_entities |= await _distill_turns(ctx, namespace, turns, result)
        episodes = [r for r in episodes if not (r["speaker"] and r["speaker"].strip())]
    for (owner, visibility), rows in sorted(
        readership_groups(episodes).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
    ):
        vectors = np.array([vec(r["embedding"]) for r in rows])
        for members in star_clusters(vectors, s.sleep_cluster_similarity, s.sleep_min_cluster):
            cluster = [rows[i] for i in members]
            method, facts = await _distill(ctx, cluster, vectors[members], result)
            touched_entities |= await _settle(ctx, namespace, owner, visibility, cluster, facts, method, result)
            result.add("clusters")
            result.add("episodes_consolidated", len(cluster))
    touched_entities |= await merge_aliases(ctx, namespace, result)
    if touched_entities:
        await _summarise_entities(ctx, namespace, sorted(touched_entities), result)
    return result


async def _settle(
    ctx: StepContext,
    namespace: str,
    owner: str | None,
    visibility: str,
    episodes: list[asyncpg.Record],
    facts: list[Fact],
    method: str,
    result: StepResult,
) -> set[uuid.UUID]:
    """In one transaction: write ``facts``, link each to the entities its sources mention, mark the
    episodes consolidated. The entities of shared facts (their summaries to refresh)."""
    touched: set[uuid.UUID] = set()
    pool = await ctx.pool()
    async with pool.acquire() as conn, conn.transaction():
        written = await _write_facts(ctx, conn, namespace, owner, visibility, episodes, facts, method, result)
        await _journal_facts(ctx, conn, namespace, written, facts, method)
        by_source = defaultdict(set)
        for link in await conn.fetch(ENTITY_LINKS, [r["id"] for r in episodes]):
            by_source[link["memory_id"]].add(link["entity_id"])
        texts = {fact_id: facts[i][0] for i, (fact_id, _, _) in enumerate(written)}
        for fact_id, sources, _ in written:
            named = await _name_entities(conn, namespace, fact_id, texts[fact_id])  # "I" became a name
            entities = sorted({e for src in sources for e in by_source.get(src, ())} | named)
            if entities:
                await conn.execute(LINK, fact_id, entities)
                if visibility != "private":
                    touched.update(entities)
        await conn.execute(MARK_CONSOLIDATED, [r["id"] for r in episodes])
    return touched


def _said(evidence: list[asyncpg.Record]) -> dict[str, str]:
    """Where a fact of one sitting was said, and by whom: its turns' ``thread`` and speaker (as
    ``said_by``: a fact is no utterance, so write decisions treat it as a claim), so that recall's
    sitting cohesion and speaker nudge reach it as they reach its turns."""
    threads = {r["thread"] for r in evidence}
    speakers = {(r["speaker"] or "").strip() for r in evidence}
    out = {}
    if len(threads) == 1 and None not in threads:
        out["thread"] = str(next(iter(threads)))
    if len(speakers) == 1 and "" not in speakers:
        out["said_by"] = next(iter(speakers))
    return out


async def _name_entities(conn: asyncpg.Connection, namespace: str, fact_id: uuid.UUID, text: str) -> set[uuid.UUID]:
    """The entities a fact's own text names (the speaker it resolved "I" to, a name at a sentence's
    start), made if new and linked: the ids."""
    phrases = entity_extraction.phrases(text)
    known = {r["key"] for r in await conn.fetch(KNOWN_ENTITY_KEYS, namespace, list(phrases))} if phrases else set()
    names = entity_extraction.extract(text, known)
    if not names:
        return set()
    keys = [entity_extraction.entity_key(n) for n in names]
    await conn.execute(UPSERT_AND_LINK, namespace, names, keys, [fact_id] * len(keys), keys)
    rows = await conn.fetch(entity_sql.ENTITY_IDS, namespace, keys)
    return {r["id"] for r in rows}


async def _journal_facts(
    ctx: StepContext,
    conn: asyncpg.Connection,
    namespace: str,
    written: list[tuple[uuid.UUID, list[uuid.UUID], datetime | None]],
    facts: list[Fact],
    method: str,
) -> None:
    """The facts this transaction wrote, as one ``distill`` judgment of the run: each current after
    it and not before, so reverting it (or the run) takes them out of recall; never deleted."""
    created = [(i, fact_id, sources, at) for i, (fact_id, sources, at) in enumerate(written) if at is not None]
    if not created:
        return
    now = ctx.clock().isoformat()
    judgment = judgments.Judgment(
        namespace,
        "distill",
        "consolidate",
        f"distilled {len(created)} fact{'s' if len(created) != 1 else ''} ({method})",
        run_id=ctx.run_id,
        inputs={
            "method": method,
            "facts": {str(f): {"text": facts[i][0], "sources": [str(x) for x in src]} for i, f, src, _ in created},
        },
        # before the run the fact did not hold: reverting it invalidates the fact (never deletes it)
        changes=[judgments.Change(f, at, {"invalid_at": now}, {"invalid_at": None}) for _, f, _, at in created],
        related={x for _, _, src, _ in created for x in src},  # the turns they come from: shown, read-checked
    )
    await judgments.record(conn, judgment)


async def _distill_turns(
    ctx: StepContext, namespace: str, turns: list[asyncpg.Record], result: StepResult
) -> set[uuid.UUID]:
    """Each turn's own claims as facts in third person, its times resolved, each linked to its turn;
    every turn read is marked consolidated. The entities of shared facts, to summarise."""
    touched: set[uuid.UUID] = set()
    distiller = turn_distiller(ctx.settings, ctx.chat())
    for (owner, visibility), rows in sorted(
        readership_groups(turns).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
    ):
        rows = sorted(rows, key=lambda r: (r["valid_at"], r["created_at"], str(r["id"])))
        for start in range(0, len(rows), TURNS_PER_TRANSACTION):
            chunk = rows[start : start + TURNS_PER_TRANSACTION]
            said = [Turn(r["content"], r["speaker"].strip(), r["valid_at"], r["thread"]) for r in chunk]
            facts: list[Fact] = [
                (_statement(text), [chunk[i]["id"] for i in cited], None)
                for text, cited in await distiller.distill(said, result)
            ]
            touched |= await _settle(ctx, namespace, owner, visibility, chunk, facts, distiller.name, result)
            result.add("turns_distilled", len(chunk))
    return touched


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
        text = _statement(cluster[i]["content"])
        same = text == re.sub(r"\s+", " ", cluster[i]["content"]).strip()
        out.append((text, ids, vectors[i] if same else None))
    return "extractive", out


FACT_PROMPT = (
    "You distill an agent's episodic memories into durable facts. Given numbered episodes, answer with "
    'JSON {"facts": [{"text": "<one self-contained factual statement>", "sources": [<episode numbers>]}]}. '
    "At most {limit} facts, only what the episodes state (never guess), each citing the episodes it rests on."
)


async def _distill_llm(chat: ChatModel, cluster: list[asyncpg.Record], limit: int) -> list[Fact]:
    listing = "\n".join(f"{n}. {_statement(r['content'])}" for n, r in enumerate(cluster, start=1))
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


async def _write_facts(
    ctx: StepContext,
    conn: asyncpg.Connection,
    namespace: str,
    owner: str | None,
    visibility: str,
    cluster: list[asyncpg.Record],
    facts: list[Fact],
    method: str,
    result: StepResult,
) -> list[tuple[uuid.UUID, list[uuid.UUID], datetime | None]]:
    """Write (or, written already, reinforce) each fact: (its id, its sources, its valid_at when it
    is new, None when it was reinforced)."""
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
                            **_said(evidence),
                        },
                        "content_hash": digest,
                    }
                ],
            )
            valid_at = max(r["valid_at"] for r in evidence)
            await PostgresBM25(k1=ctx.settings.bm25_k1, b=ctx.settings.bm25_b, dates=ctx.settings.index_dates).index(
                conn, [IndexedDoc(fact_id, namespace, valid_at, text)]
            )
            result.add("facts_created")
            result.change(memory_id=fact_id, action="fact distilled", sources=len(sources), text=text[:160])
        else:
            result.add("facts_reinforced")
        await conn.execute(ADD_SOURCES, fact_id, list(sources), "distilled_from", ctx.run_id)
        written.append((fact_id, list(sources), max(r["valid_at"] for r in evidence) if existing is None else None))
    return written


async def _summarise_entities(
    ctx: StepContext, namespace: str, entity_ids: list[uuid.UUID], result: StepResult
) -> None:
    """An entity's summary: sentences about it from its most important current shared facts, each
    citing the fact it comes from (``[n]``: the n-th of ``summary_sources``); or, with a chat model,
    what it writes from them. Recorded as one ``summarize`` judgment of the run (before and after)."""
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        rows = await conn.fetch(ENTITY_FACTS, entity_ids)
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
            await conn.execute(SET_SUMMARY, entity_id, summary[:2000], [f["id"] for f in top], vector)
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
