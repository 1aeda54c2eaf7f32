"""``cabrain eval decisions SET`` on conversations: what the write decisions take out of a chat.

A conversation set is the evaluation format of :mod:`cabrain.eval` (a folder with ``corpus.jsonl``
and ``queries.jsonl``, or a folder of such folders, e.g. ``../shared/eval/dev/locomo-dev``). Its
rows are retained in file order through the real batch path (``Brain.retain`` with decisions on,
in batches of ``CABRAIN_MAX_BATCH``: what ``POST /v1/memories/batch`` and every chat source do),
with their speaker, thread and time. Every judgment that takes a turn out of recall is reported:

- **superseded**: an UPDATE's target (a later turn revised it);
- **invalidated**: an INVALIDATE's target (a later turn retracted it);
- **merged**: a NOOP (the new turn was absorbed by a stored one and is not stored itself);

each split by whether the two turns have the same speaker, another speaker, or one has none, with
examples (both texts and the reason recorded). The target (issue 32): at most 0.5% of turns taken
out, none by another speaker.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cabrain.eval import AGENT, EvalSet, corpus_input, find_sets, load_set
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.types import Decision

KINDS = ("superseded", "invalidated", "merged")
EXAMPLES = 5
UNKNOWN = {"id": "?", "text": "(a memory not of this set)"}


def is_conversation_set(path: Path) -> bool:
    """``path`` is a set of the evaluation format (or a folder of them), not labelled pairs."""
    if (path / "corpus.jsonl").is_file():
        return True
    return path.is_dir() and any((p / "corpus.jsonl").is_file() for p in path.iterdir())


@dataclass
class ConversationResult:
    name: str
    turns: int
    seconds: float = 0.0
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, same/other/none) -> n
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def taken_out(self) -> int:
        return sum(self.counts.values())

    @property
    def by_other_speaker(self) -> int:
        return sum(n for (_, who), n in self.counts.items() if who == "other")

    def note(self, kind: str, old: dict[str, Any], new: dict[str, Any], reason: str) -> None:
        a, b = old.get("speaker"), new.get("speaker")
        who = "none" if not a or not b else ("same" if a.casefold() == b.casefold() else "other")
        self.counts[(kind, who)] += 1
        shown = self.examples.setdefault(f"{kind}/{who}", [])
        if len(shown) < EXAMPLES:
            shown.append(
                {"taken_out": old["id"], "text": old["text"], "by": new["id"], "by_text": new["text"], "reason": reason}
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "turns": self.turns,
            "seconds": round(self.seconds, 2),
            "taken_out": self.taken_out,
            "taken_out_rate": self.taken_out / self.turns if self.turns else 0.0,
            "by_other_speaker": self.by_other_speaker,
            "counts": {f"{kind}/{who}": n for (kind, who), n in sorted(self.counts.items())},
            "examples": self.examples,
        }


async def evaluate_conversations(brain, eval_set: EvalSet, *, quiet: bool) -> ConversationResult:
    """Retain the set's rows with decisions on and account for every turn taken out of recall."""
    started = time.perf_counter()
    prefix = f"evalconv-{uuid.uuid4().hex[:8]}-"
    for ns in sorted({row["namespace"] for row in eval_set.corpus}):
        await brain.create_namespace(AGENT, prefix + ns)
    result = ConversationResult(eval_set.name, len(eval_set.corpus))
    row_of: dict[uuid.UUID, dict[str, Any]] = {}  # stored memory -> its corpus row
    size = brain.settings.max_batch
    for start in range(0, len(eval_set.corpus), size):
        rows = eval_set.corpus[start : start + size]
        answers = await brain.retain(AGENT, [corpus_input(row, prefix) for row in rows], decide=True)
        for row, answer in zip(rows, answers, strict=True):
            if answer.decision is Decision.NOOP:
                result.note("merged", row_of.get(answer.memory_id, UNKNOWN), row, answer.reason)
                continue
            kind = "superseded" if answer.decision is Decision.UPDATE else "invalidated"
            for target in answer.superseded:
                result.note(kind, row_of.get(target, UNKNOWN), row, answer.reason)
            if answer.memory_id is not None:
                row_of[answer.memory_id] = row
        if not quiet:
            done = min(start + size, len(eval_set.corpus))
            print(f"  {eval_set.name}: {done}/{len(eval_set.corpus)} turns", file=sys.stderr, flush=True)
    result.seconds = time.perf_counter() - started
    return result


async def run_conversation_eval(settings: Settings, path: Path, *, quiet: bool = False) -> list[ConversationResult]:
    """Every conversation set under ``path``, in a scratch database dropped afterwards. The
    deterministic decider: a chat model's decisions are held to the same rules (check_decision)."""
    settings = settings.model_copy(update={"write_decider": "deterministic", "llm_url": None})
    sets = [load_set(p) for p in find_sets(path)]
    results = []
    async with scratch_brain(settings, load_embedder(settings), prefix="cabrain_evalconv") as (brain, _, _dsn):
        await brain.create_agent(AGENT, display_name="cabrain eval")
        for eval_set in sets:
            if not quiet:
                print(f"{eval_set.name}: {len(eval_set.corpus)} turns", file=sys.stderr, flush=True)
            results.append(await evaluate_conversations(brain, eval_set, quiet=quiet))
    return results


def render(results: Sequence[ConversationResult]) -> str:
    cols = [f"{kind}/{who}" for kind in KINDS for who in ("same", "other", "none")]
    header = f"{'set':<18} {'turns':>6} {'taken out':>10} {'rate':>7} " + " ".join(f"{c:>18}" for c in cols)
    lines = [header, "-" * len(header)]
    for r in results:
        cells = " ".join(f"{r.counts[tuple(c.split('/'))]:>18}" for c in cols)  # type: ignore[index]
        rate = r.taken_out / r.turns if r.turns else 0.0
        lines.append(f"{r.name[:18]:<18} {r.turns:>6} {r.taken_out:>10} {rate:7.2%} {cells}")
    for r in results:
        for key, shown in sorted(r.examples.items()):
            lines += ["", f"{r.name}: {key}"]
            for e in shown:
                lines.append(f"  {e['taken_out']}: {e['text'][:100]}")
                lines.append(f"    by {e['by']}: {e['by_text'][:100]}")
                lines.append(f"    reason: {e['reason']}")
    lines += [
        "",
        "taken out: turns that no longer answer recall: superseded (UPDATE), invalidated (INVALIDATE) or merged",
        "into another (NOOP); same/other: the two turns' speakers; none: one of them has no speaker.",
    ]
    return "\n".join(lines)


def to_json(results: Sequence[ConversationResult], settings: Settings) -> dict[str, Any]:
    return {
        "mode": "conversations",
        "thresholds": {
            "duplicate_similarity": settings.duplicate_similarity,
            "revision_similarity": settings.revision_similarity,
        },
        "embedding": {"provider": settings.embedding_provider.value, "model": settings.embedding_model},
        "sets": [r.to_json() for r in results],
    }
