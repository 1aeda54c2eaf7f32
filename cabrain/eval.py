"""``cabrain eval``: retrieval quality on question -> passage sets, every mode side by side.

The evaluation format (the project's own; ``../shared/eval/dev/`` uses it) is a folder per set
with two JSON-lines files:

- ``corpus.jsonl``: one memory per line, ``{"id", "namespace", "text", "time"?, "speaker"?,
  "thread"?}``; ``speaker`` and ``thread`` go to the memory's metadata, where recall reads a
  conversation's turns by them. Rows are loaded as a chat source loads them: a row with a
  ``speaker`` and no ``thread`` is a turn of the loader's conversation in its namespace, and its
  sitting is found from the turns' times as for any source (cabrain.write.threads). Rows are
  retained in file order;
- ``queries.jsonl``: one question per line, ``{"id", "namespace", "query", "gold": [corpus ids],
  "category"?}``.

A query is answered from the memories of its own namespace only. Metrics, per mode, overall and
per category:

- ``recall_any@k``: the share of queries with at least one gold id in the top k (hit@k);
- ``recall_all@k``: the mean share of a query's gold ids found in the top k;
- ``MRR``: the mean of 1 / rank of the first gold id (0 when none is returned);
- ``nDCG@10``: binary relevance, ideal DCG from the number of gold ids.

Each set is loaded into a scratch database created for the run (on the configured server, or the
embedded one) and dropped at the end; ``time`` becomes ``valid_at``. Query latency is measured
around ``Brain.recall`` (no cache), with the embedding time reported separately.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cabrain.errors import InputError, UsageError
from cabrain.eval_dialogue import DIALOGUES, dialogue, speakers_by_namespace
from cabrain.providers.embedders import load_embedder
from cabrain.providers.rerankers import load_reranker
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.types import Decision, MemoryInput, RecallMode, RecallQuery, Visibility

MODES = ("vector", "bm25", "hybrid", "hybrid+rerank")
AGENT = "eval"


@dataclass(frozen=True)
class Query:
    id: str
    namespace: str
    query: str
    gold: tuple[str, ...]
    category: str | None


@dataclass
class EvalSet:
    name: str
    corpus: list[dict[str, Any]]
    queries: list[Query]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows, number = [], 0
    try:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{number} is not valid JSON: {exc.msg}") from None
    except UnicodeDecodeError:
        raise InputError(
            f"{path} is not UTF-8 text (line {number + 1})", hint="save the set as UTF-8 JSON lines"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if not rows:
        raise InputError(f"{path} is empty", hint="a set needs at least one JSON object per line")
    return rows


def load_set(folder: Path) -> EvalSet:
    """Read and check one set folder."""
    corpus_path, queries_path = folder / "corpus.jsonl", folder / "queries.jsonl"
    for path in (corpus_path, queries_path):
        if not path.is_file():
            raise InputError(f"{path} is missing", hint="a set folder holds corpus.jsonl and queries.jsonl")
    corpus = read_jsonl(corpus_path)
    ids = set()
    for number, row in enumerate(corpus, start=1):
        for key in ("id", "namespace", "text"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise InputError(f"{corpus_path}:{number}: {key!r} must be a non-empty string")
        if row["id"] in ids:
            raise InputError(f"{corpus_path}:{number}: duplicate id {row['id']!r}")
        ids.add(row["id"])
    queries = []
    for number, row in enumerate(read_jsonl(queries_path), start=1):
        for key in ("id", "namespace", "query"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise InputError(f"{queries_path}:{number}: {key!r} must be a non-empty string")
        gold = row.get("gold")
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) for g in gold):
            raise InputError(f"{queries_path}:{number}: 'gold' must be a non-empty list of corpus ids")
        unknown = [g for g in gold if g not in ids]
        if unknown:
            raise InputError(f"{queries_path}:{number}: gold id(s) not in the corpus: {', '.join(unknown)}")
        queries.append(Query(row["id"], row["namespace"], row["query"], tuple(gold), row.get("category")))
    return EvalSet(folder.name, corpus, queries)


def find_sets(path: Path) -> list[Path]:
    """``path`` itself when it is a set folder, else its set subfolders."""
    if (path / "corpus.jsonl").exists():
        return [path]
    sets = sorted(p for p in path.iterdir() if (p / "corpus.jsonl").exists()) if path.is_dir() else []
    if not sets:
        raise InputError(f"{path} holds no evaluation set (no corpus.jsonl in it or its subfolders)")
    return sets


# --- metrics -----------------------------------------------------------------------------------
def metrics(ranked: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], ks: Sequence[int]) -> dict[str, float]:
    """Retrieval metrics for queries whose ranked results and gold ids are given in order."""
    n = len(ranked)
    out: dict[str, float] = {}
    if n == 0:
        return out
    for k in ks:
        any_hits = sum(1 for r, g in zip(ranked, gold, strict=True) if set(r[:k]) & set(g))
        all_share = sum(len(set(r[:k]) & set(g)) / len(set(g)) for r, g in zip(ranked, gold, strict=True))
        out[f"recall_any@{k}"] = any_hits / n
        out[f"recall_all@{k}"] = all_share / n
    mrr = 0.0
    ndcg = 0.0
    for r, g in zip(ranked, gold, strict=True):
        gs = set(g)
        first = next((i for i, doc in enumerate(r, start=1) if doc in gs), None)
        mrr += 1.0 / first if first else 0.0
        dcg = sum(1.0 / math.log2(i + 1) for i, doc in enumerate(r[:10], start=1) if doc in gs)
        ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gs), 10) + 1))
        ndcg += dcg / ideal
    out["mrr"] = mrr / n
    out["ndcg@10"] = ndcg / n
    return out


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]

    return {"p50": pct(50), "p95": pct(95), "p99": pct(99), "mean": statistics.fmean(ordered)}


# --- running -----------------------------------------------------------------------------------
@dataclass
class ModeResult:
    overall: dict[str, float]
    by_category: dict[str, dict[str, float]]
    latency_ms: dict[str, float]
    embed_ms: dict[str, float]
    by_namespace: dict[str, dict[str, float]] = field(default_factory=dict)  # in the JSON only


@dataclass
class SetResult:
    name: str
    memories: int
    queries: int
    load_s: float
    decide: bool = False  # loaded through the write decisions
    decisions: Counter[str] = field(default_factory=Counter)  # ADD/UPDATE/INVALIDATE/NOOP, and "taken out"
    modes: dict[str, ModeResult] = field(default_factory=dict)


def _progress(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def _valid_at(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"corpus time {value!r} is not an ISO 8601 date/time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    """A corpus row's memory metadata: its id, and its speaker and thread when it has them."""
    metadata: dict[str, Any] = {"eval_id": row["id"]}
    for name in ("speaker", "thread"):
        if row.get(name):
            metadata[name] = str(row[name])
    return metadata


def corpus_input(row: dict[str, Any], prefix: str) -> MemoryInput:
    """A corpus row as the memory it is retained as (in the namespace ``prefix + row's``)."""
    return MemoryInput(
        content=row["text"],
        namespace=prefix + row["namespace"],
        visibility=Visibility.PRIVATE,
        source_kind="eval",
        source_ref=row["id"],
        valid_at=_valid_at(row.get("time")),
        importance=0.5,
        metadata=_metadata(row),
    )


async def evaluate_set(
    brain,
    eval_set: EvalSet,
    modes: Sequence[str],
    ks: Sequence[int],
    *,
    quiet: bool,
    decide: bool = False,
    dialogues: Sequence[str] = (),
) -> SetResult:
    """Load one set into ``brain`` (fresh namespaces) and run every query in every mode. ``decide``:
    through the write decisions, as every chat source loads turns (else each row is added as it is).
    ``dialogues``: also ask every query as the latest turn of these shapes of dialogue
    (cabrain.eval_dialogue), each reported as a mode of its own (``hybrid [filler]``)."""
    prefix = f"eval-{uuid.uuid4().hex[:8]}-"
    namespaces = {row["namespace"] for row in eval_set.corpus} | {q.namespace for q in eval_set.queries}
    for ns in sorted(namespaces):
        await brain.create_namespace(AGENT, prefix + ns)
    started = time.perf_counter()
    batch_size = brain.settings.max_batch
    id_of: dict[uuid.UUID, str] = {}
    result_counts: Counter[str] = Counter()
    for start in range(0, len(eval_set.corpus), batch_size):
        rows = eval_set.corpus[start : start + batch_size]
        results = await brain.retain(AGENT, [corpus_input(row, prefix) for row in rows], decide=decide)
        for row, result in zip(rows, results, strict=True):
            if result.decision in (Decision.ADD, Decision.UPDATE):  # NOOP names what absorbed it
                id_of[result.memory_id] = row["id"]
            result_counts[result.decision.value] += 1
            result_counts["taken out"] += len(result.superseded) + (result.decision is Decision.NOOP)
        _progress(
            f"  {eval_set.name}: loaded {min(start + batch_size, len(eval_set.corpus))}/{len(eval_set.corpus)}", quiet
        )
    result = SetResult(
        eval_set.name, len(eval_set.corpus), len(eval_set.queries), time.perf_counter() - started, decide, result_counts
    )
    k_max = max(ks)
    names = speakers_by_namespace(eval_set.corpus)
    for mode, shape in [(m, s) for s in ("", *dialogues) for m in modes]:
        recall_mode = RecallMode.HYBRID if mode.startswith("hybrid") else RecallMode(mode)
        ranked, gold, latencies, embeds = [], [], [], []
        for i, q in enumerate(eval_set.queries, start=1):
            context, latest = dialogue(q.query, shape, names.get(q.namespace, ())) if shape else ((), q.query)
            t0 = time.perf_counter()
            answer = await brain.recall(
                AGENT,
                RecallQuery(
                    latest,
                    prefix + q.namespace,
                    k=k_max,
                    mode=recall_mode,
                    rerank=mode == "hybrid+rerank",
                    expand=False,
                    context=context,
                ),
            )
            latencies.append((time.perf_counter() - t0) * 1000)
            if "embed_ms" in answer.timings_ms:
                embeds.append(answer.timings_ms["embed_ms"])
            ranked.append([id_of.get(h.memory.id, "?") for h in answer.hits])
            gold.append(q.gold)
            if i % 200 == 0:
                _progress(f"  {eval_set.name} [{mode}]: {i}/{len(eval_set.queries)} queries", quiet)
        by_cat: dict[str, list[int]] = defaultdict(list)
        by_ns: dict[str, list[int]] = defaultdict(list)
        for idx, q in enumerate(eval_set.queries):
            by_ns[q.namespace].append(idx)
            if q.category:
                by_cat[q.category].append(idx)
        result.modes[f"{mode} [{shape}]" if shape else mode] = ModeResult(
            overall=metrics(ranked, gold, ks),
            by_category={
                cat: metrics([ranked[i] for i in idx], [gold[i] for i in idx], ks)
                for cat, idx in sorted(by_cat.items())
            },
            latency_ms=percentiles(latencies),
            embed_ms=percentiles(embeds),
            by_namespace={
                ns: metrics([ranked[i] for i in idx], [gold[i] for i in idx], ks) for ns, idx in sorted(by_ns.items())
            },
        )
        _progress(f"  {eval_set.name} [{mode}]: done", quiet)
    return result


async def run_eval(
    settings: Settings,
    path: Path,
    *,
    modes: Sequence[str],
    ks: Sequence[int],
    quiet: bool = False,
    decide: bool = False,
    dialogues: Sequence[str] = (),
) -> list[SetResult]:
    """Evaluate every set under ``path`` in a scratch database that is dropped afterwards."""
    if unknown_shapes := [d for d in dialogues if d not in DIALOGUES]:
        raise UsageError(
            f"--dialogue: unknown shape(s) {', '.join(unknown_shapes)}", hint=f"choose from {', '.join(DIALOGUES)}"
        )
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:  # the command's --mode and --k: a bad one is a usage error
        raise UsageError(
            f"--mode: unknown mode(s) {', '.join(unknown) or '(none given)'}", hint=f"choose from {', '.join(MODES)}"
        )
    if not ks or any(k < 1 or k > settings.recall_max_k for k in ks):
        raise UsageError(f"--k: every k must be between 1 and {settings.recall_max_k}, got {list(ks)}")
    sets = [load_set(p) for p in find_sets(path)]
    embedder = load_embedder(settings)
    if "hybrid+rerank" in modes:
        if load_reranker(settings) is None:
            raise InputError(
                "mode hybrid+rerank needs a reranker", hint="set CABRAIN_RERANKER_PROVIDER and its model or URL"
            )
    results = []
    async with scratch_brain(settings, embedder, prefix="cabrain_eval") as (brain, _, _dsn):
        await brain.create_agent(AGENT, display_name="cabrain eval")
        for eval_set in sets:
            _progress(f"{eval_set.name}: {len(eval_set.corpus)} memories, {len(eval_set.queries)} queries", quiet)
            results.append(
                await evaluate_set(brain, eval_set, modes, ks, quiet=quiet, decide=decide, dialogues=dialogues)
            )
    return results


def render(results: Sequence[SetResult], ks: Sequence[int]) -> str:
    """Plain-text tables: every metric per set and mode, then hit@k and MRR per category."""
    names = [f"hit@{k}" for k in ks] + [f"all@{k}" for k in ks] + ["MRR", "nDCG@10", "p50 ms", "p95 ms", "p99 ms"]
    width = max([14, *(len(mode) for r in results for mode in r.modes)])
    header = f"{'set':<14} {'mode':<{width}} " + " ".join(f"{m:>8}" for m in names)
    lines = [header, "-" * len(header)]
    categories: list[str] = []
    summary: list[str] = []
    for r in results:
        for mode, m in r.modes.items():
            o = m.overall
            values = [o.get(f"recall_any@{k}", 0.0) for k in ks] + [o.get(f"recall_all@{k}", 0.0) for k in ks]
            cells = [f"{v:8.3f}" for v in [*values, o["mrr"], o["ndcg@10"]]]
            cells += [f"{m.latency_ms.get(p, 0):8.1f}" for p in ("p50", "p95", "p99")]
            lines.append(f"{r.name:<14} {mode:<{width}} " + " ".join(cells))
            for category, c in m.by_category.items():
                cells = [f"{c.get(f'recall_any@{k}', 0.0):8.3f}" for k in ks] + [f"{c['mrr']:8.3f}"]
                categories.append(f"{r.name:<14} {mode:<{width}} {category[:14]:<14} " + " ".join(cells))
        if r.decide:
            d = r.decisions
            summary.append(
                f"{r.name}: loaded through the write decisions: {r.memories} rows, {d['taken out']} taken out of "
                f"recall ({d['taken out'] / max(r.memories, 1):.2%}; {d['UPDATE']} UPDATE, {d['INVALIDATE']} "
                f"INVALIDATE, {d['NOOP']} NOOP)"
            )
    if categories:
        cat_header = f"{'set':<14} {'mode':<{width}} {'category':<14} " + " ".join(
            f"{m:>8}" for m in [*(f"hit@{k}" for k in ks), "MRR"]
        )
        lines += ["", cat_header, "-" * len(cat_header), *categories]
    if summary:
        lines += ["", *summary]
    return "\n".join(lines)


def to_json(results: Sequence[SetResult], settings: Settings) -> dict[str, Any]:
    return {
        "embedding": {"provider": settings.embedding_provider.value, "model": settings.embedding_model},
        "reranker": settings.reranker_provider.value,
        "fusion": {
            "method": settings.fusion,
            "alpha": settings.fusion_alpha,
            "rrf_k": settings.rrf_k,
            "bm25_coverage_power": settings.bm25_coverage_power,
            "salience_weight": settings.salience_weight,
        },
        "bm25": {"k1": settings.bm25_k1, "b": settings.bm25_b},
        "sets": [
            {
                "name": r.name,
                "memories": r.memories,
                "queries": r.queries,
                "load_s": r.load_s,
                "decide": r.decide,
                "decisions": dict(r.decisions),
                "modes": {mode: m.__dict__ for mode, m in r.modes.items()},
            }
            for r in results
        ],
    }
