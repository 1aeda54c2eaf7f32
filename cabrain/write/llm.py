"""The write decision and entity extraction by a chat model (when one is configured).

Neighbour ids are never shown to the model: neighbours are numbered 1..n in the prompt and the
answer's number is mapped back, so a model cannot point at a memory it was not shown. Any answer
that is not the JSON asked for - unknown decision, number out of range, missing target - is
logged and replaced by the deterministic decision (:mod:`cabrain.write.decision`) or extractor.
"""

from __future__ import annotations

import json
import logging

from cabrain.providers.llm import ChatModel, LLMError
from cabrain.types import Decision
from cabrain.write.decision import Neighbour, WriteDecision, check_decision
from cabrain.write.decision.origin import PLAIN, Origin

log = logging.getLogger(__name__)

DECISION_SYSTEM = """You keep an agent memory store clean. Compare a NEW memory with EXISTING ones \
from the same namespace and answer with one JSON object:
{"decision": "ADD" | "UPDATE" | "INVALIDATE" | "NOOP", "target": <number of an existing memory or null>, "reason": "<short>"}
- ADD: the new memory is new information (target null).
- UPDATE: it corrects or revises existing memory <target> about the same subject; the new one replaces it.
- INVALIDATE: it only retracts existing memory <target> (says it is no longer true) and adds nothing else.
- NOOP: it says the same as existing memory <target>; nothing is stored.
Memories may be in Arabic or English. Answer with the JSON object only."""

ENTITY_SYSTEM = """Extract the named entities (people, organisations, projects, products, tools, \
places, files, identifiers) from the text, Arabic or English, as written in it. Answer with one JSON \
object: {"entities": ["...", ...]} (at most 20; an empty list when there are none)."""


def decision_prompt(text: str, neighbours: list[Neighbour]) -> str:
    lines = [f"NEW: {json.dumps(text, ensure_ascii=False)}", "EXISTING:"]
    lines += [f"{i}. {json.dumps(n.content, ensure_ascii=False)}" for i, n in enumerate(neighbours, start=1)]
    if not neighbours:
        lines.append("(none)")
    return "\n".join(lines)


def parse_decision(answer: str, neighbours: list[Neighbour]) -> WriteDecision:
    """Map the model's answer back to neighbour ids; raise ValueError when it is unusable."""
    start, end = answer.find("{"), answer.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the answer")
    data = json.loads(answer[start : end + 1])
    decision = Decision(str(data.get("decision", "")).upper())
    reason = str(data.get("reason") or "decided by the chat model")[:500]
    if decision is Decision.ADD:
        return WriteDecision(Decision.ADD, None, reason)
    target = data.get("target")
    if isinstance(target, str) and target.strip().isdigit():
        target = int(target)
    if not isinstance(target, int) or isinstance(target, bool) or not 1 <= target <= len(neighbours):
        raise ValueError(f"{decision.value} needs a target between 1 and {len(neighbours)}, got {target!r}")
    return WriteDecision(decision, neighbours[target - 1].id, reason)


async def llm_decide(
    model: ChatModel, text: str, neighbours: list[Neighbour], fallback: WriteDecision, origin: Origin = PLAIN
) -> WriteDecision:
    if not neighbours:
        return fallback
    try:
        answer = await model.complete(DECISION_SYSTEM, decision_prompt(text, neighbours))
        return check_decision(text, parse_decision(answer, neighbours), neighbours, origin)
    except (LLMError, ValueError, json.JSONDecodeError) as exc:
        log.warning("write_decision.llm_fallback", extra={"error": str(exc), "fallback": fallback.decision.value})
        return fallback


async def llm_entities(model: ChatModel, text: str, fallback: list[str]) -> list[str]:
    try:
        answer = await model.complete(ENTITY_SYSTEM, text)
        start, end = answer.find("{"), answer.rfind("}")
        data = json.loads(answer[start : end + 1]) if start >= 0 and end > start else None
        names = data.get("entities") if isinstance(data, dict) else None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError("'entities' must be a list of strings")
    except (LLMError, ValueError, json.JSONDecodeError) as exc:
        log.warning("entities.llm_fallback", extra={"error": str(exc)})
        return fallback
    cleaned = []
    for name in names:
        name = " ".join(name.split())[:200]
        if name and name not in cleaned:
            cleaned.append(name)
    return cleaned[:20]
