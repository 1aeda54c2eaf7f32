"""``cabrain bench portable``: export and import throughput at scale (issue 21).

On the benchmark corpus (the one ``cabrain bench --sizes N --keep`` builds and keeps, reused when
it is there), it measures:

- **export** of the large namespace, without vectors and with them: memories per second, the
  file's size;
- **import** of ``--sample`` of those memories into an empty database, vectors re-made by the
  embedder (what importing an export without vectors costs), beside the bare embedder on the very
  same texts (each memory's text and its passages, in the embedder's batch size): the ratio is
  what import keeps of the embedder's throughput;
- **import with the vectors kept** (an export made with ``--with-embeddings``) of the same sample:
  the write path alone, with no model in it, row by row and in bulk (:mod:`cabrain.portable.bulk`,
  what an import of such an export takes);
- **another tool's file**: the sample's texts as a mem0 export, imported through the write decisions
  into an empty database, then imported again unchanged (reading it, and comparing each record with
  what is held).

Importing the whole corpus would embed every memory again (hours on a CPU); the import's cost per
memory does not grow with the namespace (each memory is one row, its postings and passages, under
one writer lock per batch), so the sample's rate is the rate at any size, which the numbers show.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from cabrain.bench.corpus import NAMESPACE
from cabrain.bench.progress import say
from cabrain.bench.scale import corpus_brain
from cabrain.bench.scale_spec import ScaleSpec, corpus_for
from cabrain.portable.export import export
from cabrain.portable.facade import Portable
from cabrain.portable.imports import ImportReport
from cabrain.portable.restore import restore
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.text.chunking import chunk

__all__ = ["render_portable", "run_portable_bench"]


def _sample(path: Path, sample: int) -> tuple[list[str], list[str]]:
    """The export's lines reduced to its first ``sample`` memories of the large namespace (with the
    header, agents and namespaces they need, and an end record that counts them), and their texts."""
    head: list[str] = []
    memories: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            kind = record["type"]
            if kind in ("cabrain-export", "agent"):
                head.append(line)
            elif kind == "namespace" and record["name"] == NAMESPACE:
                head.append(line)
            elif kind == "memory" and record["namespace"] == NAMESPACE:
                memories.append(line)
                if len(memories) >= sample:
                    break
    header = json.loads(head[0])
    header["namespaces"] = [NAMESPACE]
    head[0] = json.dumps(header) + "\n"
    counts = {"agent": sum(1 for h in head if '"type": "agent"' in h), "namespace": 1, "memory": len(memories)}
    texts = [json.loads(m)["content"] for m in memories]
    return [*head, *memories, json.dumps({"type": "end", "counts": counts}) + "\n"], texts


async def run_portable_bench(
    settings: Settings,
    *,
    memories: int,
    sample: int,
    bulk_sample: int | None = None,
    keep: bool = True,
    quiet: bool = False,
) -> dict[str, Any]:
    """``bulk_sample``: the memories the bulk import (vectors kept) takes, when more than ``sample``
    (the other imports re-embed, or go row by row: a large sample would take hours)."""
    embedder = load_embedder(settings)
    spec = ScaleSpec(sizes=[memories], keep=keep, quiet=quiet)
    corpus = corpus_for(memories, spec)
    result: dict[str, Any] = {"memories": memories, "sample": sample, "bulk_sample": bulk_sample or sample}
    async with corpus_brain(settings, embedder, corpus, spec) as (brain, _facts, _dsn, load):
        result["load"] = load
        with tempfile.TemporaryDirectory(prefix="cabrain-bench-portable-") as folder:
            plain, vectors = Path(folder) / "plain.jsonl", Path(folder) / "vectors.jsonl"
            for path, with_embeddings in ((plain, False), (vectors, True)):
                say(f"  export of {memories:,} memories {'with' if with_embeddings else 'without'} vectors", quiet)
                with path.open("w", encoding="utf-8") as out:
                    report = await export(brain.engine, [NAMESPACE], out, with_embeddings=with_embeddings)
                key = "export_vectors" if with_embeddings else "export"
                result[key] = {
                    "memories": report.counts.get("memory", 0),
                    "seconds": round(report.seconds, 2),
                    "per_s": round(report.counts.get("memory", 0) / report.seconds, 1),
                    "mb": round(path.stat().st_size / 2**20, 1),
                }
            lines, texts = _sample(plain, sample)
            with_vectors, _ = _sample(vectors, sample)
            bulk_vectors = _sample(vectors, bulk_sample)[0] if bulk_sample else with_vectors

        s = brain.settings
        pieces = [
            t for text in texts for t in [text, *chunk(text, target_chars=s.chunk_chars, min_chars=s.chunk_min_chars)]
        ]
        say(f"  the bare embedder on the sample's {len(pieces):,} texts", quiet)
        await embedder.embed_documents(pieces[:8])  # warm-up
        started = time.perf_counter()
        for start in range(0, len(pieces), s.embed_batch_size):
            await embedder.embed_documents(pieces[start : start + s.embed_batch_size])
        bare_s = time.perf_counter() - started
        result["bare_embedder"] = {"texts": len(pieces), "memories_per_s": round(len(texts) / bare_s, 1)}

        for key, source, bulk in (
            ("import", lines, False),
            ("import_vectors_rows", with_vectors, False),
            ("import_vectors", bulk_vectors, True),
        ):
            say(f"  import of {len(source) - 4:,} memories {IMPORTS[key]}", quiet)
            async with scratch_brain(settings, embedder, prefix="cabrain_bench_import") as (target, _, _):
                restored = await restore(target.engine, io.StringIO("".join(source)), bulk=bulk)
                added = restored.added.get("memory", 0)
                result[key] = {
                    "memories": added,
                    "seconds": round(restored.seconds, 2),
                    "per_s": round(added / restored.seconds, 1),
                }
        result["import_ratio"] = round(result["import"]["per_s"] / result["bare_embedder"]["memories_per_s"], 3)
        say(f"  import of the {len(texts):,} texts as a mem0 export, then again unchanged", quiet)
        result.update(await _tool_import(settings, embedder, texts))
        result["machine"] = {
            "cpus": os.cpu_count(),
            "embedder": str(s.embedding_provider.value),
            "model": s.embedding_model,
        }
    return result


IMPORTS = {
    "import": "re-embedded",
    "import_vectors_rows": "with their vectors, row by row",
    "import_vectors": "with their vectors, in bulk (staged with COPY)",
}


def mem0_export(texts: list[str]) -> dict[str, Any]:
    """``texts`` as mem0's ``get_all()`` answer: one user's memories, each with an id and a time."""
    return {
        "results": [
            {"id": f"bench-{n:06d}", "memory": text, "user_id": "bench", "created_at": "2025-01-01T00:00:00+00:00"}
            for n, text in enumerate(texts)
        ]
    }


async def _tool_import(settings: Settings, embedder: Any, texts: list[str]) -> dict[str, Any]:
    """Another tool's file (mem0) imported into an empty database through the write decisions, then
    imported again unchanged (what a re-import costs: reading, and comparing with what is held)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cabrain-bench-mem0-") as folder:
        path = Path(folder) / "mem0.json"
        path.write_text(json.dumps(mem0_export(texts)), encoding="utf-8")
        async with scratch_brain(settings, embedder, prefix="cabrain_bench_mem0") as (target, _, _):
            await target.create_agent("bench")
            await target.create_namespace("bench", "bench")
            for key in ("import_mem0", "reimport_mem0"):
                started = time.perf_counter()
                report = await Portable(target.engine).import_file("bench", "mem0", path, "bench")
                seconds = time.perf_counter() - started
                assert isinstance(report, ImportReport)
                out[key] = {
                    "records": report.read,
                    "added": report.added,
                    "unchanged": report.already,
                    "seconds": round(seconds, 2),
                    "per_s": round(report.read / seconds, 1),
                }
    return out


def render_portable(result: dict[str, Any]) -> str:
    lines = [f"export and import, {result['memories']:,} memories in one namespace"]
    for key, label in (("export", "export without vectors"), ("export_vectors", "export with vectors")):
        e = result[key]
        lines.append(
            f"  {label:<40} {e['per_s']:>10,.0f} memories/s  ({e['memories']:,} in {e['seconds']} s, {e['mb']} MB)"
        )
    b = result["bare_embedder"]
    lines.append(
        f"  {'bare embedder on the sample':<40} {b['memories_per_s']:>10,.1f} memories/s  ({b['texts']:,} texts)"
    )
    i = result["import"]
    lines.append(
        f"  {'import, re-embedded':<40} {i['per_s']:>10,.1f} memories/s  ({result['import_ratio']:.0%} of the embedder)"
    )
    for key, label in (
        ("import_vectors_rows", "import, vectors kept, row by row"),
        ("import_vectors", "import, vectors kept, bulk"),
    ):
        if key in result:
            v = result[key]
            lines.append(f"  {label:<40} {v['per_s']:>10,.1f} memories/s  ({v['memories']:,} in {v['seconds']} s)")
    for key, label in (("import_mem0", "import of a mem0 file"), ("reimport_mem0", "the same file again, unchanged")):
        if key in result:
            m = result[key]
            lines.append(
                f"  {label:<40} {m['per_s']:>10,.1f} records/s   "
                f"({m['records']:,} in {m['seconds']} s: {m['added']:,} added, {m['unchanged']:,} unchanged)"
            )
    return "\n".join(lines)
