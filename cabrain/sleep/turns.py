"""A conversation's turns in sleep's *consolidate*: each turn's own claims become a fact
(:mod:`cabrain.sleep.distillers`), and each sitting whose turns were read gets its summary
(re)written from all its facts."""

from __future__ import annotations

import re
import uuid
from collections import defaultdict

import asyncpg

from cabrain.sleep.context import StepContext, StepResult
from cabrain.sleep.distillers import Sitting, Turn, TurnDistiller, turn_distiller
from cabrain.sleep.rows import readership_groups
from cabrain.sleep.sittings import MIN_SUMMARY_FACTS
from cabrain.sleep.writing import Fact, journal_facts, settle, statement, write_facts
from cabrain.store import judgments
from cabrain.store import sleep as sleep_sql

MAX_SUMMARY_CHARS = 2000
TURNS_PER_TRANSACTION = 200


async def distill_turns(
    ctx: StepContext, namespace: str, turns: list[asyncpg.Record], result: StepResult
) -> set[uuid.UUID]:
    """Each turn's own claims as facts in third person, its times resolved, each linked to its turn;
    every turn read is marked consolidated. The entities of shared facts, to summarise."""
    touched: set[uuid.UUID] = set()
    distiller = turn_distiller(ctx.settings, ctx.chat())
    for (owner, visibility), rows in sorted(
        readership_groups(turns).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
    ):
        rows = sorted(rows, key=lambda r: (r["valid_at"], r["created_at"], r["content"], str(r["id"])))
        for start in range(0, len(rows), TURNS_PER_TRANSACTION):
            chunk = rows[start : start + TURNS_PER_TRANSACTION]
            said = [Turn(r["content"], r["speaker"].strip(), r["valid_at"], r["sitting"]) for r in chunk]
            facts: list[Fact] = [
                (statement(text), [chunk[i]["id"] for i in cited], None)
                for text, cited in await distiller.distill(said, result)
            ]
            touched |= await settle(ctx, namespace, owner, visibility, chunk, facts, distiller.name, result)
            result.add("turns_distilled", len(chunk))
        sittings = sorted({r["sitting"] for r in rows if r["sitting"]})
        for start in range(0, len(sittings), TURNS_PER_TRANSACTION):
            await summarise_sittings(
                ctx,
                namespace,
                owner or rows[0]["owner_agent_id"],
                visibility,
                sittings[start : start + TURNS_PER_TRANSACTION],
                distiller,
                result,
            )
    return touched


async def summarise_sittings(
    ctx: StepContext,
    namespace: str,
    owner: str | None,
    visibility: str,
    sittings: list[str],
    distiller: TurnDistiller,
    result: StepResult,
) -> None:
    """(Re)write the summary of each of these sittings (the turns of one ``metadata.sitting``, of one
    readership) from all its current facts, this run's and earlier ones': a new summary memory
    (network ``observation``, ``metadata.sitting``) linked to its facts as ``summarizes``, journaled
    as the run's ``distill``; the sitting's previous summary is superseded by it (a revertible
    judgment), an unchanged one left alone. A sitting needs ``MIN_SUMMARY_FACTS`` facts."""
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        facts = await conn.fetch(sleep_sql.SITTING_FACTS, namespace, sittings, owner, visibility)
        speakers = await conn.fetch(sleep_sql.SITTING_SPEAKERS, namespace, sittings, owner, visibility)
        previous = {
            r["sitting"]: r
            for r in await conn.fetch(sleep_sql.SITTING_SUMMARIES, namespace, sittings, owner, visibility)
        }
    by_sitting: dict[str, list[asyncpg.Record]] = defaultdict(list)
    for f in facts:
        by_sitting[f["sitting"]].append(f)
    who: dict[str, list[asyncpg.Record]] = defaultdict(list)
    for r in speakers:
        who[r["sitting"]].append(r)
    summaries: list[Fact] = []
    replaces: list[asyncpg.Record | None] = []
    for name in sittings:
        rows = by_sitting.get(name, [])
        if len(rows) < MIN_SUMMARY_FACTS or not who.get(name):
            continue
        sitting = Sitting(
            speakers=tuple(r["speaker"] for r in who[name]),
            first=min(r["first"] for r in who[name]),
            last=max(r["last"] for r in who[name]),
            facts=tuple(r["content"] for r in rows),
        )
        text = re.sub(r"\s+", " ", await distiller.summarise(sitting, result)).strip()[:MAX_SUMMARY_CHARS]
        old = previous.get(name)
        if old is not None and old["content"] == text:
            result.add("sitting_summaries_unchanged")
            continue
        summaries.append((text, [r["id"] for r in rows], None))
        replaces.append(old)
    if not summaries:
        return
    async with pool.acquire() as conn, conn.transaction():
        written = await write_facts(
            ctx,
            conn,
            namespace,
            owner,
            visibility,
            facts,
            summaries,
            distiller.name,
            result,
            network="observation",
            relation="summarizes",
            label="sitting summary",
            boost=0.0,
        )
        await journal_facts(ctx, conn, namespace, written, summaries, distiller.name, label="sitting summary")
        now = await conn.fetchval(sleep_sql.NOW)
        for (new_id, _, _), (text, _, _), old in zip(written, summaries, replaces, strict=True):
            if old is None or old["id"] == new_id:
                continue
            why = f"the sitting's summary rewritten with its facts as they stand: {new_id}"
            judgment = judgments.Judgment(
                namespace,
                "supersede",
                "consolidate",
                why,
                run_id=ctx.run_id,
                inputs={"newer": str(new_id), "text": text},
            )
            if await judgments.supersede(
                conn,
                judgment,
                old["id"],
                by=new_id,
                metadata={"superseded_reason": why, "sleep_run": str(ctx.run_id)},
                now=now,
            ):
                await judgments.record(conn, judgment)
                result.add("sitting_summaries_replaced")


__all__ = ["distill_turns", "summarise_sittings"]
