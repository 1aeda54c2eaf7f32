"""``cabrain eval facts SET``: how close sleep's facts come to the facts people distilled by hand.

A facts set is a folder with ``facts.jsonl`` (one annotated fact per line: ``{"id", "namespace",
"text", "evidence": [corpus ids], "speaker"?, "session"?, "time"?}``) and, optionally,
``summaries.jsonl`` (``{"id", "namespace", "session", "text"}``). The conversations they were
distilled from are an evaluation set of :mod:`cabrain.eval` (``corpus.jsonl``, ``queries.jsonl``):
by default the sibling folder named without ``-facts`` (``locomo-dev-facts`` -> ``locomo-dev``).

In a scratch database dropped afterwards, the corpus is retained through the real batch path
(decisions on), recall is measured over the turns alone, one sleep ``consolidate`` step runs, and
then:

- **facts**: a produced fact (a memory sleep wrote to the fact network) *matches* an annotated fact
  when one of the turns it was distilled from is among the annotated fact's evidence, and the two
  texts are close by a judge model other than the product's embedder (the English MiniLM,
  ``sentence-transformers/all-MiniLM-L6-v2``, cosine at least ``--threshold``, 0.6 by default: see
  docs/EVAL.md for how it was chosen). **Coverage** is the share of annotated facts some produced
  fact matches; **precision** the share of produced facts that match some annotated fact;
- **summaries**: the same for the sitting summaries sleep wrote against the annotated session
  summaries, a summary's turns being those of the facts it summarizes and a session's those of
  the session; and how often a produced summary is closer to its own session's annotated summary
  than to every other session's of its conversation (``own_best``: the judge alone, no turns);
- **recall over facts plus turns**: the set's questions again, hybrid, a fact in the results
  standing for the turns it came from (first place it appears), against recall over turns alone,
  overall and per category (multi-hop among them); then over facts, turns and sitting summaries (a
  summary standing for the turns of its facts), as ``CABRAIN_RECALL_SITTING_SUMMARIES`` would
  have it.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cabrain.errors import InputError
from cabrain.eval import AGENT, EvalSet, corpus_input, load_set, metrics, read_jsonl
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import EmbeddingProvider, Settings
from cabrain.sleep.cycle import run_cycle
from cabrain.store import sleep as sleep_sql
from cabrain.types import Network, RecallMode, RecallQuery

JUDGE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
THRESHOLD = 0.6
KS = (1, 5, 10)


@dataclass
class Match:
    produced: int = 0
    annotated: int = 0
    covered: int = 0  # annotated items some produced one matches
    precise: int = 0  # produced items that match some annotated one
    examples: list[dict[str, str]] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return self.covered / self.annotated if self.annotated else 0.0

    @property
    def precision(self) -> float:
        return self.precise / self.produced if self.produced else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "produced": self.produced,
            "annotated": self.annotated,
            "coverage": self.coverage,
            "precision": self.precision,
            "examples": self.examples,
        }


@dataclass
class FactsResult:
    name: str
    corpus: str
    threshold: float
    seconds: float = 0.0
    facts: Match = field(default_factory=Match)
    summaries: Match = field(default_factory=Match)
    summaries_own_best: float | None = None
    recall: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # turns / facts+turns -> cat -> m

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "corpus": self.corpus,
            "threshold": self.threshold,
            "judge": JUDGE_MODEL,
            "seconds": round(self.seconds, 1),
            "facts": self.facts.to_json(),
            "summaries": {**self.summaries.to_json(), "own_best": self.summaries_own_best},
            "recall": self.recall,
        }


def load_annotations(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    path = folder / "facts.jsonl"
    if not path.is_file():
        raise InputError(f"{path} is missing", hint="a facts set holds facts.jsonl (and summaries.jsonl)")
    facts = read_jsonl(path)
    for number, row in enumerate(facts, start=1):
        if not isinstance(row.get("text"), str) or not isinstance(row.get("evidence"), list):
            raise InputError(f"{path}:{number}: needs 'text' and 'evidence' (a list of corpus ids)")
    summaries_path = folder / "summaries.jsonl"
    summaries = read_jsonl(summaries_path) if summaries_path.is_file() else []
    return facts, summaries


def corpus_of(folder: Path, corpus: Path | None) -> Path:
    if corpus is not None:
        return corpus
    name = folder.resolve().name
    if not name.endswith("-facts"):
        raise InputError(f"{folder}: which conversations were these facts distilled from?", hint="give --corpus SET")
    return folder.resolve().parent / name.removesuffix("-facts")


def match(
    produced: Sequence[tuple[str, set[str]]],
    annotated: Sequence[tuple[str, set[str]]],
    produced_vectors: np.ndarray,
    annotated_vectors: np.ndarray,
    threshold: float,
) -> Match:
    """Produced and annotated items (text, turns) matched: a shared turn and cosine >= threshold."""
    out = Match(produced=len(produced), annotated=len(annotated))
    covered: set[int] = set()
    for i, (text, turns) in enumerate(produced):
        best, best_j = -1.0, -1
        for j, (_, evidence) in enumerate(annotated):
            if turns & evidence:
                sim = float(produced_vectors[i] @ annotated_vectors[j])
                if sim >= threshold:
                    covered.add(j)
                if sim > best:
                    best, best_j = sim, j
        if best >= threshold:
            out.precise += 1
        if len(out.examples) < 8 and best_j >= 0:
            out.examples.append(
                {"produced": text[:200], "closest": annotated[best_j][0][:200], "cosine": f"{best:.3f}"}
            )
    out.covered = len(covered)
    return out


# every network named: sitting summaries compete too (by default recall leaves them out)
WITH_SUMMARIES = tuple(Network)


async def _recall(
    brain,
    eval_set: EvalSet,
    prefix: str,
    turns_of: dict[uuid.UUID, list[str]],
    networks: tuple[Network, ...] | None = None,
) -> dict[str, Any]:
    """Hybrid recall of every question; a fact stands for the turns it came from."""
    ranked, gold, cats = [], [], []
    for q in eval_set.queries:
        answer = await brain.recall(
            AGENT,
            RecallQuery(
                q.query, prefix + q.namespace, k=max(KS), mode=RecallMode.HYBRID, expand=False, networks=networks
            ),
        )
        ids: list[str] = []
        for hit in answer.hits:  # a hit stands for its turns and those of what it covers
            for memory_id in (hit.memory.id, *hit.covers):
                for turn in turns_of.get(memory_id, []):
                    if turn not in ids:
                        ids.append(turn)
        ranked.append(ids)
        gold.append(q.gold)
        cats.append(q.category or "-")
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(cats):
        by_cat[c].append(i)
    out = {"all": metrics(ranked, gold, KS)}
    for c, idx in sorted(by_cat.items()):
        out[c] = metrics([ranked[i] for i in idx], [gold[i] for i in idx], KS)
    return out


async def evaluate(
    settings: Settings,
    facts_set: Path,
    corpus: Path | None = None,
    *,
    threshold: float = THRESHOLD,
    quiet: bool = False,
) -> FactsResult:
    """The whole measurement for one facts set (see the module docstring)."""
    say = (lambda line: None) if quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.perf_counter()
    corpus_folder = corpus_of(facts_set, corpus)
    eval_set = load_set(corpus_folder)
    annotated, sessions = load_annotations(facts_set)
    result = FactsResult(facts_set.resolve().name, corpus_folder.name, threshold)
    settings = settings.model_copy(update={"sleep_consolidate_window_days": 36500, "sleep_consolidate_batch": 100000})
    judge_settings = settings.model_copy(
        update={"embedding_provider": EmbeddingProvider.SENTENCE_TRANSFORMERS, "embedding_model": JUDGE_MODEL}
    )
    judge = load_embedder(judge_settings)
    prefix = f"evalfacts-{uuid.uuid4().hex[:8]}-"
    async with scratch_brain(settings, load_embedder(settings), prefix="cabrain_evalfacts") as (brain, _, dsn):
        await brain.create_agent(AGENT, display_name="cabrain eval")
        for ns in sorted({r["namespace"] for r in eval_set.corpus}):
            await brain.create_namespace(AGENT, prefix + ns)
        turns_of: dict[uuid.UUID, list[str]] = {}
        size = brain.settings.max_batch
        for start in range(0, len(eval_set.corpus), size):
            rows = eval_set.corpus[start : start + size]
            for row, answer in zip(
                rows, await brain.retain(AGENT, [corpus_input(r, prefix) for r in rows]), strict=True
            ):
                if answer.memory_id is not None:
                    turns_of.setdefault(answer.memory_id, []).append(row["id"])
            say(f"  {eval_set.name}: {min(start + size, len(eval_set.corpus))}/{len(eval_set.corpus)} turns")
        result.recall["turns"] = await _recall(brain, eval_set, prefix, turns_of)
        say("  recall over turns: done; consolidating")
        namespaces = sorted({prefix + r["namespace"] for r in eval_set.corpus})
        await run_cycle(settings, dsn, namespaces=namespaces, steps=["consolidate"], use_ray=False)
        async with brain.engine.pool.acquire() as conn:
            facts = await conn.fetch(sleep_sql.DISTILLED_FACTS, namespaces)
            summaries = await conn.fetch(sleep_sql.SITTING_SUMMARY_SOURCES, namespaces)
        for f in facts:
            turns_of[f["id"]] = list(f["turns"] or [])
        result.recall["facts+turns"] = await _recall(brain, eval_set, prefix, turns_of)
        say("  recall over facts and turns: done")
        for summary in summaries:
            turns_of[summary["id"]] = sorted(summary["turns"] or [])
        if summaries:
            result.recall["+summaries"] = await _recall(brain, eval_set, prefix, turns_of, WITH_SUMMARIES)
    produced = [(f["content"], set(f["turns"] or [])) for f in facts]
    wanted = [(a["text"], set(a["evidence"])) for a in annotated]
    result.facts = match(produced, wanted, *(await _vectors(judge, produced, wanted)), threshold)
    by_session: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in eval_set.corpus:  # a session's turns: ids "conv:D1:3" belong to session "D1"
        parts = row["id"].split(":")
        if len(parts) >= 3:
            by_session[(row["namespace"], parts[-2])].add(row["id"])
    summarised = [(s["summary"], set(s["turns"] or [])) for s in summaries]
    wanted_summaries = [(s["text"], by_session.get((s["namespace"], s["session"]), set())) for s in sessions]
    produced_vectors, wanted_vectors = await _vectors(judge, summarised, wanted_summaries)
    result.summaries = match(summarised, wanted_summaries, produced_vectors, wanted_vectors, threshold)
    result.summaries_own_best = own_best(
        [str(s["namespace"]) for s in summaries],
        [prefix + s["namespace"] for s in sessions],
        [t for _, t in summarised],
        [t for _, t in wanted_summaries],
        produced_vectors @ wanted_vectors.T if len(summarised) and len(sessions) else np.zeros((0, 0)),
    )
    result.seconds = time.perf_counter() - started
    return result


def own_best(
    produced_ns: list[str], wanted_ns: list[str], produced: list[set[str]], wanted: list[set[str]], sims: np.ndarray
) -> float | None:
    """Of the produced summaries whose turns lie in one annotated session, the share the judge finds
    closer to that session's summary than to any other session's of the same conversation: how much
    of the summaries' match is theirs, and how much is only the conversation's names and topics."""
    scored = []
    for i, turns in enumerate(produced):
        own = [j for j, session in enumerate(wanted) if turns and turns <= session]
        if len(own) != 1:
            continue
        same = [j for j in range(len(wanted)) if wanted_ns[j] == produced_ns[i]]
        scored.append(all(sims[i, own[0]] >= sims[i, j] for j in same))
    return round(sum(scored) / len(scored), 3) if scored else None


async def _vectors(judge, produced, annotated) -> tuple[np.ndarray, np.ndarray]:
    async def embed(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, judge.dim), dtype=np.float32)
        vectors = np.asarray(await judge.embed_documents(texts), dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    return await embed([t for t, _ in produced]), await embed([t for t, _ in annotated])


def render(result: FactsResult) -> str:
    lines = [
        f"{result.name} (conversations: {result.corpus}); judge {JUDGE_MODEL}, cosine >= {result.threshold:g}",
        "",
        f"{'':<12} {'produced':>9} {'annotated':>9} {'coverage':>9} {'precision':>9}",
    ]
    for label, m in (("facts", result.facts), ("summaries", result.summaries)):
        lines.append(f"{label:<12} {m.produced:>9} {m.annotated:>9} {m.coverage:>9.3f} {m.precision:>9.3f}")
    if result.summaries_own_best is not None:
        lines.append(
            f"summaries closer to their own session's than to any other of its conversation: "
            f"{result.summaries_own_best:.3f}"
        )
    lines += ["", f"{'recall (hybrid)':<16} {'category':<12} " + " ".join(f"{'hit@' + str(k):>7}" for k in KS)]
    for over, cats in result.recall.items():
        for cat, scores in cats.items():
            cells = " ".join(f"{scores.get(f'recall_any@{k}', 0.0):7.3f}" for k in KS)
            lines.append(f"{over:<16} {cat:<12} {cells}")
    return "\n".join(lines)


def to_json(result: FactsResult) -> str:
    return json.dumps(result.to_json(), ensure_ascii=False, indent=2) + "\n"
