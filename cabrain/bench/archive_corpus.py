"""``cabrain bench archive --corpus DIR``: the cold index's answers on real text, against the scan.

The synthetic corpus of :mod:`cabrain.bench.archive` times the index at millions of rows, but its
words are drawn uniformly (every word in a few percent of the rows), which real text is not. Here
the rows are a question -> passage set's passages (``corpus.jsonl``: ``id``, ``text``; its
``queries.jsonl``: ``query`` and the ``gold`` passage ids, as in ``../shared/eval``), each really
embedded, demoted into one namespace's cold tier as demotion writes them, and indexed as maintain
indexes them. Each query then asks archive recall scanning every row (the exact answer) and through
the index, in hybrid and vector mode: the index's recall@k against the scan, and how often each
finds a gold passage in its k hits (hit@k).

The corpus lives in a scratch database and a temporary warehouse, both removed at the end.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from cabrain.bench.archive import ID_COLUMNS, cold_table, recall_at_k
from cabrain.bench.corpus import AGENT, NAMESPACE
from cabrain.bench.progress import bar, say
from cabrain.errors import UsageError
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.search.archive import recall_archive
from cabrain.settings import Settings
from cabrain.sleep.index_cold import build
from cabrain.types import ArchiveQuery, RecallMode

EMBED_CHUNK = 64  # passages embedded per call (progress between)


def read_set(folder: Path, queries: int | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The set's passages and its first ``queries`` questions (all: None); a clear error when the
    folder is not such a set."""
    paths = folder / "corpus.jsonl", folder / "queries.jsonl"
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{path} not found", hint="--corpus names a folder with corpus.jsonl and queries.jsonl")
    try:
        passages = [json.loads(line) for line in paths[0].read_text(encoding="utf-8").splitlines() if line.strip()]
        asked = [json.loads(line) for line in paths[1].read_text(encoding="utf-8").splitlines() if line.strip()]
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{folder} is not a question -> passage set: {exc}") from exc
    if not passages or not asked or not all("id" in p and "text" in p for p in passages):
        raise UsageError(f"{folder}: passages need an id and a text, and there must be questions")
    if not all("query" in q for q in asked):
        raise UsageError(f"{folder}: every question needs a query")
    return passages, asked if queries is None else asked[:queries]


async def run_archive_corpus_bench(
    settings: Settings,
    folder: Path,
    *,
    queries: int | None = None,
    k: int = 10,
    probes: int | None = None,
    seed: int = 7,
    quiet: bool = False,
) -> dict[str, Any]:
    """The index's recall@k against the scan and both's hit@k on the set in ``folder``."""
    passages, asked = read_set(folder, queries)
    probes = settings.cold_index_probes if probes is None else probes
    embedder = load_embedder(settings)
    work = tempfile.mkdtemp(prefix="cabrain-archivebench-")
    os.makedirs(f"{work}/warehouse", exist_ok=True)
    run_settings = settings.model_copy(
        update={"cold_catalog_uri": f"sqlite:///{work}/catalog.db", "cold_warehouse": f"file://{work}/warehouse"}
    )
    result: dict[str, Any] = {"corpus": str(folder), "rows": len(passages), "queries": len(asked), "k": k}
    try:
        async with scratch_brain(run_settings, embedder, prefix="cabrain_bench_archive") as (brain, _facts, _dsn):
            await brain.create_agent(AGENT)
            await brain.create_namespace(AGENT, NAMESPACE)
            texts = [str(p["text"]) for p in passages]
            vectors: list[list[float]] = []
            for start in range(0, len(texts), EMBED_CHUNK):
                vectors.extend(await brain.engine.embed_documents(texts[start : start + EMBED_CHUNK]))
                bar("passages embedded", len(vectors), len(texts), quiet)
            matrix = np.asarray(vectors, dtype=np.float32)
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
            table = cold_table(random.Random(seed), texts, matrix, datetime.now(UTC))
            row_ids = table.column("id").to_pylist()
            passage_of = {row: str(p["id"]) for row, p in zip(row_ids, passages, strict=True)}
            batch = uuid.UUID(table.column("demote_batch")[0].as_py())
            cold = brain.engine.cold_tier()
            cold.append_batch(batch, table)
            records = [
                (uuid.UUID(i), v, NAMESPACE, "cold", batch, d, AGENT, "team")
                for i, v, d in zip(
                    row_ids, table.column("valid_at").to_pylist(), table.column("demoted_at").to_pylist(), strict=True
                )
            ]
            async with brain.engine.pool.acquire() as conn:
                await conn.copy_records_to_table("memory_ids", records=records, columns=ID_COLUMNS)
                built = await build(conn, cold, NAMESPACE)
            if built is None:
                raise UsageError(f"{folder}: no passage could be indexed")
            result.update({"clusters": len(built.centroids), "probes": probes, "modes": {}})
            for mode in (RecallMode.HYBRID, RecallMode.VECTOR):
                exact, approximate, read, scanned = [], [], 0, 0
                exact_hits, approximate_hits = 0, 0
                for n, question in enumerate(asked, start=1):
                    query = ArchiveQuery(str(question["query"]), NAMESPACE, k=k, mode=mode)
                    full = await recall_archive(brain.engine, AGENT, query, probes=0)
                    probed = await recall_archive(brain.engine, AGENT, query, probes=probes)
                    exact.append([str(h.memory.id) for h in full.hits])
                    approximate.append([str(h.memory.id) for h in probed.hits])
                    gold = {str(g) for g in question.get("gold") or []}
                    exact_hits += bool(gold & {passage_of.get(i) for i in exact[-1]})
                    approximate_hits += bool(gold & {passage_of.get(i) for i in approximate[-1]})
                    read, scanned = read + probed.scanned, scanned + full.scanned
                    bar(f"{mode.value} queries", n, len(asked), quiet)
                result["modes"][mode.value] = {
                    "recall_at_k": round(recall_at_k(approximate, exact), 4),
                    "exact_hit_at_k": round(exact_hits / len(asked), 4),
                    "index_hit_at_k": round(approximate_hits / len(asked), 4),
                    "rows_read_share": round(read / max(scanned, 1), 4),
                }
                say(f"  {mode.value}: {result['modes'][mode.value]}", quiet)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def render_corpus(result: dict[str, Any]) -> str:
    k = result["k"]
    lines = [
        f"archive recall on {result['corpus']}: {result['rows']:,} passages, {result['queries']} queries, k={k}, "
        f"{result['probes']} of {result['clusters']} clusters probed:",
        f"  {'mode':>7} {'recall@' + str(k) + ' vs scan':>17} {'scan hit@' + str(k):>12} "
        f"{'index hit@' + str(k):>13} {'rows read':>10}",
    ]
    for mode, e in result["modes"].items():
        lines.append(
            f"  {mode:>7} {e['recall_at_k']:>17.3f} {e['exact_hit_at_k']:>12.3f} {e['index_hit_at_k']:>13.3f} "
            f"{e['rows_read_share']:>10.1%}"
        )
    return "\n".join(lines)


__all__ = ["read_set", "render_corpus", "run_archive_corpus_bench"]
