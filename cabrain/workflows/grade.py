"""Scoring a local answer against the frontier's reference: the embedding similarity, the judge
model's rating (when ``CABRAIN_WORKFLOW_JUDGE`` names an active model) and the structural comparison,
combined by their weights (:mod:`cabrain.workflows.scoring`). Learning scores its attempts this way
(:mod:`cabrain.workflows.learn`), and the audit the answers trusted chains gave live
(:mod:`cabrain.workflows.audit`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from cabrain.engine import Engine
from cabrain.errors import NotFound
from cabrain.providers.llm_calls import ModelCallError
from cabrain.settings import Settings
from cabrain.workflows import chains, registry, scoring
from cabrain.workflows.calls import Caller


async def score(
    engine: Engine,
    caller: Caller,
    judge: registry.ModelAgent | None,
    row: Mapping[str, Any],
    output: str,
    weights: scoring.Weights,
) -> scoring.Score:
    """``output``'s score against the reference answer ``row["output"]`` to the task ``row`` describes
    (its description, context, task_type and task_id: the judge's call is recorded against it)."""
    reference = row["output"]
    ref_vec, out_vec = await engine.embed_documents([reference, output])
    embedding = scoring.cosine(ref_vec, out_vec)
    structural = scoring.structural(row["task_type"], reference, output)
    if judge is None:
        return scoring.combine(
            embedding, None, structural, weights, "no judge model configured (CABRAIN_WORKFLOW_JUDGE)"
        )
    try:
        step = await caller.call(
            judge,
            scoring.JUDGE_SYSTEM,
            scoring.judge_prompt(
                chains.TaskPrompt(row["description"], row["context"], row["task_type"]).text(), reference, output
            ),
            purpose="judge",
            task_id=row["task_id"],
            role="judge",
        )
        value, reason = scoring.parse_judge(step.output)
    except (ModelCallError, ValueError) as exc:
        return scoring.combine(embedding, None, structural, weights, f"the judge failed: {str(exc)[:300]}")
    return scoring.combine(embedding, value, structural, weights, None, reason)


async def judge_model(conn: asyncpg.Connection, settings: Settings) -> registry.ModelAgent | None:
    """The judge model: ``CABRAIN_WORKFLOW_JUDGE`` when it names an active registered model, else None."""
    if not settings.workflow_judge:
        return None
    try:
        agent = await registry.get(conn, settings.workflow_judge)
    except NotFound:
        return None
    return agent if agent.active else None
