"""Writing what sleep distils: facts (and sitting summaries) with their sources, linked to the
entities they name, journaled as the run's ``distill`` judgment so that reverting it takes them out
of recall (never deleting them). Used by :mod:`cabrain.sleep.consolidate` and
:mod:`cabrain.sleep.turns`."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections import defaultdict
from datetime import datetime

import asyncpg
import numpy as np

from cabrain.sleep.context import StepContext, StepResult
from cabrain.store import entities as entity_sql
from cabrain.store import judgments
from cabrain.store import memories as sql
from cabrain.store import sleep as sleep_sql
from cabrain.store.keyword import IndexedDoc, PostgresBM25
from cabrain.text import entities as entity_extraction

MAX_FACT_CHARS = 400
# A fact to write: its text, its source memories, and its vector (None: still to embed).
Fact = tuple[str, list[uuid.UUID], np.ndarray | None]


def statement(text: str) -> str:
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


async def settle(
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
        written = await write_facts(ctx, conn, namespace, owner, visibility, episodes, facts, method, result)
        await journal_facts(ctx, conn, namespace, written, facts, method)
        by_source = defaultdict(set)
        for link in await conn.fetch(sleep_sql.ENTITY_LINKS, [r["id"] for r in episodes]):
            by_source[link["memory_id"]].add(link["entity_id"])
        texts = {fact_id: facts[i][0] for i, (fact_id, _, _) in enumerate(written)}
        for fact_id, sources, _ in written:
            named = await name_entities(conn, namespace, fact_id, texts[fact_id])  # "I" became a name
            entities = sorted({e for src in sources for e in by_source.get(src, ())} | named)
            if entities:
                await conn.execute(sleep_sql.LINK, fact_id, entities)
                if visibility != "private":
                    touched.update(entities)
        await conn.execute(sleep_sql.MARK_CONSOLIDATED, [r["id"] for r in episodes])
    return touched


def said(evidence: list[asyncpg.Record]) -> dict[str, str]:
    """Where a fact of one sitting was said, and by whom: its turns' ``thread`` and ``sitting`` and
    speaker (as ``said_by``: a fact is no utterance, so write decisions treat it as a claim), so that
    recall's sitting cohesion and speaker nudge reach it as they reach its turns."""
    speakers = {(r["speaker"] or "").strip() for r in evidence}
    out = {}
    for name in ("thread", "sitting"):
        values = {r[name] for r in evidence}
        if len(values) == 1 and None not in values:
            out[name] = str(next(iter(values)))
    if len(speakers) == 1 and "" not in speakers:
        out["said_by"] = next(iter(speakers))
    return out


async def name_entities(conn: asyncpg.Connection, namespace: str, fact_id: uuid.UUID, text: str) -> set[uuid.UUID]:
    """The entities a fact's own text names (the speaker it resolved "I" to, a name at a sentence's
    start), made if new and linked: the ids."""
    phrases = entity_extraction.phrases(text)
    known = (
        {r["key"] for r in await conn.fetch(entity_sql.KNOWN_ENTITY_KEYS, namespace, list(phrases))}
        if phrases
        else set()
    )
    names = entity_extraction.extract(text, known)
    if not names:
        return set()
    keys = [entity_extraction.entity_key(n) for n in names]
    await conn.execute(entity_sql.UPSERT_AND_LINK, namespace, names, keys, [fact_id] * len(keys), keys)
    rows = await conn.fetch(entity_sql.ENTITY_IDS, namespace, keys)
    return {r["id"] for r in rows}


async def journal_facts(
    ctx: StepContext,
    conn: asyncpg.Connection,
    namespace: str,
    written: list[tuple[uuid.UUID, list[uuid.UUID], datetime | None]],
    facts: list[Fact],
    method: str,
    *,
    label: str = "fact",
) -> None:
    """The facts (or sitting summaries: ``label``) this transaction wrote, as one ``distill``
    judgment of the run: each current after it and not before, so reverting it (or the run) takes
    them out of recall; never deleted."""
    created = [(i, fact_id, sources, at) for i, (fact_id, sources, at) in enumerate(written) if at is not None]
    if not created:
        return
    now = ctx.clock().isoformat()
    judgment = judgments.Judgment(
        namespace,
        "distill",
        "consolidate",
        f"distilled {len(created)} {label}{'s' if len(created) != 1 else ''} ({method})",
        run_id=ctx.run_id,
        inputs={
            "method": method,
            "kind": label,
            "facts": {str(f): {"text": facts[i][0], "sources": [str(x) for x in src]} for i, f, src, _ in created},
        },
        # before the run the fact did not hold: reverting it invalidates the fact (never deletes it)
        changes=[judgments.Change(f, at, {"invalid_at": now}, {"invalid_at": None}) for _, f, _, at in created],
        related={x for _, _, src, _ in created for x in src},  # the turns they come from: shown, read-checked
    )
    await judgments.record(conn, judgment)


async def write_facts(
    ctx: StepContext,
    conn: asyncpg.Connection,
    namespace: str,
    owner: str | None,
    visibility: str,
    cluster: list[asyncpg.Record],
    facts: list[Fact],
    method: str,
    result: StepResult,
    *,
    network: str = "fact",
    relation: str = "distilled_from",
    label: str = "fact",
    boost: float = 0.1,
) -> list[tuple[uuid.UUID, list[uuid.UUID], datetime | None]]:
    """Write (or, written already, reinforce) each fact: (its id, its sources, its valid_at when it
    is new, None when it was reinforced). ``network``, ``relation`` and ``label``: a sitting's
    summary is written the same way, as an observation that summarizes its facts. A fact is a little
    more important than its sources (``boost``); a summary is as important as its facts."""
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
        existing = await conn.fetchval(sleep_sql.EXISTING_FACT, namespace, digest, owner, visibility, network)
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
                        "network": network,
                        "memory_type": "semantic",
                        "content": text,
                        "source_kind": "sleep",
                        "source_ref": f"sleep:{ctx.run_id}",
                        "embedding": vectors[i],
                        "importance": min(1.0, max(float(r["importance"]) for r in evidence) + boost),
                        "valid_at": max(r["valid_at"] for r in evidence),
                        "metadata": {
                            "distilled_from" if relation == "distilled_from" else "summary_of": [
                                str(x) for x in sources
                            ],
                            "method": method,
                            "sleep_run": str(ctx.run_id),
                            **said(evidence),
                        },
                        "content_hash": digest,
                    }
                ],
            )
            valid_at = max(r["valid_at"] for r in evidence)
            await PostgresBM25(k1=ctx.settings.bm25_k1, b=ctx.settings.bm25_b, dates=ctx.settings.index_dates).index(
                conn, [IndexedDoc(fact_id, namespace, valid_at, text)]
            )
            result.add("facts_created" if label == "fact" else "sitting_summaries")
            result.change(memory_id=fact_id, action=f"{label} distilled", sources=len(sources), text=text[:160])
        else:
            result.add("facts_reinforced" if label == "fact" else "sitting_summaries_reinforced")
        await conn.execute(sleep_sql.ADD_SOURCES, fact_id, list(sources), relation, ctx.run_id)
        written.append((fact_id, list(sources), max(r["valid_at"] for r in evidence) if existing is None else None))
    return written


__all__ = ["MAX_FACT_CHARS", "Fact", "journal_facts", "said", "settle", "statement", "write_facts"]
