"""``cabrain eval decisions SET``: how right CaBrain's automatic judgments are, on labelled pairs.

A set is a JSON-lines file (or a folder of them, each reported on its own), one statement pair
per line::

    {"id": "en-0001", "lang": "en", "kind": "hard_negative", "old": "...", "new": "...",
     "label": "ADD|UPDATE|INVALIDATE|NOOP", "same_subject": true|false}

Every pair is played through the real code paths in a scratch database dropped afterwards:

- **write**: ``old`` is retained into a namespace of its own, then ``new`` with the write
  decision (the deterministic rules, or the configured chat model with ``--decider llm``); the
  decision is compared with ``label``;
- **sleep**: ``old`` and then ``new`` (a day later) are stored side by side as facts in another
  namespace, and sleep's ``dedup`` and ``reconsolidate`` steps run over it: a merge is judged as
  a NOOP, a supersession as an UPDATE/INVALIDATE, both kept as an ADD.

Reported per set: precision and recall of each decision, the confusion matrix, accuracy per kind
and language, and the **false-supersede rate**: the share of pairs about different subjects
(``same_subject`` false) that the write decision (or sleep) superseded, invalidated or merged.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cabrain.errors import InputError, UsageError
from cabrain.providers.embedders import load_embedder
from cabrain.providers.llm import load_chat_model
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.sleep.context import StepContext
from cabrain.sleep.steps import dedup, reconsolidate
from cabrain.types import Decision, MemoryInput, MemoryType, Network

AGENT = "eval"
LABELS = ("ADD", "UPDATE", "INVALIDATE", "NOOP")
DECIDERS = ("deterministic", "llm")
SUPERSEDING = {"UPDATE", "INVALIDATE"}
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # pairs' valid_at: fixed, so results never depend on the day


@dataclass(frozen=True)
class Pair:
    id: str
    old: str
    new: str
    label: str
    same_subject: bool
    lang: str = ""
    kind: str = ""


@dataclass
class Scores:
    """Predictions against labels, and what follows from them."""

    confusion: Counter = field(default_factory=Counter)  # (label, predicted) -> n
    by_kind: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    by_lang: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    different_subject: int = 0
    false_supersedes: list[str] = field(default_factory=list)  # different subjects, one superseded
    false_merges: list[str] = field(default_factory=list)  # different subjects, one absorbed (NOOP)
    errors: list[dict[str, str]] = field(default_factory=list)

    def add(self, pair: Pair, predicted: str, why: str = "") -> None:
        self.confusion[(pair.label, predicted)] += 1
        right = "right" if predicted == pair.label else "wrong"
        self.by_kind[pair.kind or "-"][right] += 1
        self.by_lang[pair.lang or "-"][right] += 1
        if not pair.same_subject:
            self.different_subject += 1
            if predicted in SUPERSEDING:
                self.false_supersedes.append(pair.id)
            elif predicted == "NOOP":
                self.false_merges.append(pair.id)
        if predicted != pair.label:
            self.errors.append({"id": pair.id, "label": pair.label, "predicted": predicted, "why": why})

    def per_label(self) -> dict[str, dict[str, float | None]]:
        out = {}
        for label in LABELS:
            tp = self.confusion[(label, label)]
            predicted = sum(self.confusion[(x, label)] for x in LABELS)
            actual = sum(self.confusion[(label, x)] for x in LABELS)
            precision = tp / predicted if predicted else None  # undefined when never predicted
            recall = tp / actual if actual else None
            f1 = 2 * precision * recall / (precision + recall) if precision and recall else 0.0
            out[label] = {"precision": precision, "recall": recall, "f1": f1, "n": actual, "predicted": predicted}
        return out

    @property
    def false_supersede_rate(self) -> float:
        return len(self.false_supersedes) / self.different_subject if self.different_subject else 0.0

    @property
    def accuracy(self) -> float:
        total = sum(self.confusion.values())
        return sum(self.confusion[(x, x)] for x in LABELS) / total if total else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "accuracy": self.accuracy,
            "false_supersede_rate": self.false_supersede_rate,
            "false_supersedes": self.false_supersedes,
            "false_merges": self.false_merges,
            "different_subject_pairs": self.different_subject,
            "per_label": self.per_label(),
            "confusion": {f"{a}->{b}": n for (a, b), n in sorted(self.confusion.items())},
            "by_kind": {k: dict(v) for k, v in sorted(self.by_kind.items())},
            "by_lang": {k: dict(v) for k, v in sorted(self.by_lang.items())},
            "errors": self.errors,
        }


@dataclass
class SetResult:
    name: str
    pairs: int
    decider: str
    write: Scores
    sleep: Scores
    seconds: float


def load_pairs(path: Path) -> list[Pair]:
    pairs, seen = [], set()
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{where}: each line must be a JSON object")
            missing = [k for k in ("id", "old", "new", "label", "same_subject") if k not in row]
            if missing:
                raise InputError(f"{where}: missing {', '.join(missing)}")
            if row["label"] not in LABELS:
                raise InputError(f"{where}: label must be one of {', '.join(LABELS)}, got {row['label']!r}")
            if not isinstance(row["same_subject"], bool):
                raise InputError(f"{where}: same_subject must be true or false")
            if not all(isinstance(row[k], str) and row[k].strip() for k in ("id", "old", "new")):
                raise InputError(f"{where}: id, old and new must be non-empty strings")
            if row["id"] in seen:
                raise InputError(f"{where}: duplicate id {row['id']!r}")
            seen.add(row["id"])
            pairs.append(
                Pair(
                    row["id"],
                    row["old"],
                    row["new"],
                    row["label"],
                    row["same_subject"],
                    str(row.get("lang") or ""),
                    str(row.get("kind") or ""),
                )
            )
    if not pairs:
        raise InputError(f"{path}: no pairs")
    return pairs


def find_sets(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        if files:
            return files
    raise InputError(f"{path}: no decision set here", hint="give a .jsonl file of pairs, or a folder holding some")


def _progress(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


async def _retain(brain, items: list[MemoryInput], *, decide: bool = True) -> list:
    """Retain in batches the size the settings allow (each item alone in its namespace)."""
    size = brain.settings.max_batch
    out = []
    for start in range(0, len(items), size):
        out.extend(await brain.retain(AGENT, items[start : start + size], decide=decide))
    return out


async def evaluate_set(brain, ctx, name: str, pairs: Sequence[Pair], decider: str, *, quiet: bool) -> SetResult:
    """Play every pair through retain and through sleep's dedup and reconsolidate."""
    started = time.perf_counter()
    tag = uuid.uuid4().hex[:8]
    write, sleep = Scores(), Scores()
    spaces = [(f"eval-w-{tag}-{i}", f"eval-s-{tag}-{i}") for i in range(len(pairs))]
    for w, s in spaces:
        await brain.create_namespace(AGENT, w)
        await brain.create_namespace(AGENT, s)
    # write: the old statements in one batch (each alone in its namespace), then the new ones decided
    olds = await _retain(brain, [MemoryInput(p.old, w, valid_at=T0) for p, (w, _) in zip(pairs, spaces, strict=True)])
    news = await _retain(
        brain, [MemoryInput(p.new, w, valid_at=T0 + timedelta(days=1)) for p, (w, _) in zip(pairs, spaces, strict=True)]
    )
    for pair, old, new in zip(pairs, olds, news, strict=True):
        target = new.superseded[0] if new.superseded else new.memory_id
        if new.decision is not Decision.ADD and target != old.memory_id:  # cannot happen: one neighbour
            raise RuntimeError(f"pair {pair.id}: decided against a memory of another pair")
        write.add(pair, new.decision.value, new.reason)
    _progress(f"  {name}: write decisions done", quiet)
    # sleep: both stored as facts, side by side, then dedup and reconsolidate over each namespace
    facts = []
    for pair, (_, s) in zip(pairs, spaces, strict=True):
        for text, day in ((pair.old, 0), (pair.new, 1)):
            facts.append(
                MemoryInput(
                    text, s, network=Network.FACT, memory_type=MemoryType.SEMANTIC, valid_at=T0 + timedelta(days=day)
                )
            )
    stored = await _retain(brain, facts, decide=False)
    for index, (pair, (_, s)) in enumerate(zip(pairs, spaces, strict=True)):
        old_id = stored[2 * index].memory_id
        merged = await dedup(ctx, s)
        superseded = await reconsolidate(ctx, s)
        if merged.counts.get("merged"):
            predicted, why = "NOOP", "dedup merged them"
        elif superseded.counts.get("superseded"):
            gone = {c.get("memory_id") for c in superseded.changes}
            if str(old_id) not in gone:
                raise RuntimeError(f"pair {pair.id}: reconsolidate superseded the newer statement")
            why = "; ".join(str(c.get("reason")) for c in superseded.changes)
            # sleep supersedes the older either way: a retraction's supersession is its invalidation
            predicted = "INVALIDATE" if "retracts" in why else "UPDATE"
        else:
            predicted, why = "ADD", "both kept"
        sleep.add(pair, predicted, why)
        if (index + 1) % 100 == 0:
            _progress(f"  {name}: sleep {index + 1}/{len(pairs)}", quiet)
    return SetResult(name, len(pairs), decider, write, sleep, time.perf_counter() - started)


async def run_decision_eval(
    settings: Settings, path: Path, *, decider: str = "deterministic", quiet: bool = False
) -> list[SetResult]:
    """Evaluate every set under ``path`` in a scratch database that is dropped afterwards."""
    if decider not in DECIDERS:
        raise UsageError(f"--decider: unknown decider {decider!r}", hint=f"choose from {', '.join(DECIDERS)}")
    if decider == "llm":
        if load_chat_model(settings) is None:
            raise InputError(
                "--decider llm needs a chat model",
                hint="set CABRAIN_LLM_URL (and CABRAIN_LLM_MODEL) to an OpenAI-compatible chat server",
            )
        settings = settings.model_copy(update={"write_decider": "llm"})
    else:
        settings = settings.model_copy(update={"write_decider": "deterministic", "llm_url": None})
    sets = [(p, load_pairs(p)) for p in find_sets(path)]
    root = path if path.is_dir() else path.parent
    embedder = load_embedder(settings)
    results = []
    async with scratch_brain(settings, embedder, prefix="cabrain_evaldec") as (brain, _, dsn):
        await brain.create_agent(AGENT, display_name="cabrain eval")
        sleep_settings = settings.model_copy(update={"llm_url": None})  # sleep's own rules are measured
        ctx = StepContext(sleep_settings, dsn, uuid.uuid4())
        try:
            for file, pairs in sets:
                name = str(file.relative_to(root)) if file.is_relative_to(root) else file.name
                _progress(f"{name}: {len(pairs)} pairs", quiet)
                results.append(await evaluate_set(brain, ctx, name, pairs, decider, quiet=quiet))
        finally:
            await ctx.close()
    return results


def combined(results: Sequence[SetResult], name: str = "all") -> SetResult:
    """Every set's pairs counted together."""
    write, sleep = Scores(), Scores()
    for r in results:
        for mine, theirs in ((write, r.write), (sleep, r.sleep)):
            mine.confusion.update(theirs.confusion)
            for k, v in theirs.by_kind.items():
                mine.by_kind[k].update(v)
            for k, v in theirs.by_lang.items():
                mine.by_lang[k].update(v)
            mine.different_subject += theirs.different_subject
            mine.false_supersedes += theirs.false_supersedes
            mine.false_merges += theirs.false_merges
            mine.errors += theirs.errors
    return SetResult(
        name,
        sum(r.pairs for r in results),
        results[0].decider if results else "",
        write,
        sleep,
        sum(r.seconds for r in results),
    )


def _rows(results: Sequence[SetResult]) -> list[SetResult]:
    """Each set, then each folder holding more than one of them, then all of them together."""
    rows = list(results)
    folders: dict[str, list[SetResult]] = defaultdict(list)
    for r in results:
        if "/" in r.name:
            folders[r.name.rsplit("/", 1)[0]].append(r)
    rows += [combined(group, f"{folder}/*") for folder, group in sorted(folders.items()) if len(group) > 1]
    if len(results) > 1:
        rows.append(combined(results))
    return rows


def _cell(value: float | None) -> str:
    return f"{'-':>7}" if value is None else f"{value:7.3f}"


def render(results: Sequence[SetResult]) -> str:
    rows = _rows(results)
    header = f"{'set':<22} {'judge':<6} {'pairs':>5} {'acc':>6} {'false-sup':>9} " + " ".join(
        f"{label[:4] + ' P':>7} {label[:4] + ' R':>7}" for label in LABELS
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        for judge, scores in (("write", r.write), ("sleep", r.sleep)):
            per = scores.per_label()
            cells = " ".join(f"{_cell(per[label]['precision'])} {_cell(per[label]['recall'])}" for label in LABELS)
            lines.append(
                f"{r.name[:22]:<22} {judge:<6} {r.pairs:>5} {scores.accuracy:6.3f} "
                f"{scores.false_supersede_rate:9.3%} {cells}"
            )
    lines.append("")
    lines.append("false-sup: the share of pairs about different subjects that were superseded or invalidated.")
    lines.append("sleep judges with dedup (a merge reads as NOOP) and reconsolidate (a supersession as UPDATE).")
    return "\n".join(lines)


def to_json(results: Sequence[SetResult], settings: Settings) -> dict[str, Any]:
    return {
        "decider": results[0].decider if results else "",
        "thresholds": {
            "duplicate_similarity": settings.duplicate_similarity,
            "revision_similarity": settings.revision_similarity,
            "sleep_dedup_similarity": settings.sleep_dedup_similarity,
        },
        "embedding": {"provider": settings.embedding_provider.value, "model": settings.embedding_model},
        "sets": [
            {
                "name": r.name,
                "pairs": r.pairs,
                "seconds": round(r.seconds, 2),
                "write": r.write.to_json(),
                "sleep": r.sleep.to_json(),
            }
            for r in _rows(results)
        ],
    }
