"""Importing another memory tool's records (:mod:`cabrain.importers`) into a namespace.

Each record is retained through the write decisions like any memory (a record the namespace
already knows is a NOOP that reinforces it; one that revises a stored fact supersedes it), as the
importing agent, with its source's time and author kept: ``valid_at`` is when the source says it
was made, ``metadata.author`` who made it (and ``speaker`` within a ``thread``).

Idempotent: a record's provenance is ``source_kind`` ``import:FORMAT`` and ``source_ref`` its key
in the source, and a record whose key the namespace already holds - current, superseded or
forgotten - is skipped, so a second import of the same file adds nothing (and never brings back
what was forgotten since). Each batch is retained under an idempotency key made of its keys, so a
batch whose answer was lost to a crash is answered again rather than written twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cabrain.engine import Engine
from cabrain.importers.records import ImportRecord, Parsed
from cabrain.store import access, requests
from cabrain.store import portable as sql
from cabrain.types import MemoryInput, MemoryType, Network, Visibility
from cabrain.write import retain as retain_pipeline
from cabrain.write.tally import REVERT_HINT, Decided

__all__ = ["ImportReport", "import_parsed"]


@dataclass
class ImportReport(Decided):
    """What an import read, skipped and wrote; what the write decisions did to its records (added,
    duplicates, retracted, superseded, with their reasons: :class:`cabrain.write.tally.Decided`)."""

    format: str
    namespace: str
    read: int = 0
    already: int = 0  # imported before
    skipped: dict[str, int] = field(default_factory=dict)  # what the source held that is no memory, by reason
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "revert": REVERT_HINT}


def _input(record: ImportRecord, fmt: str, namespace: str, visibility: Visibility, max_metadata: int) -> MemoryInput:
    metadata: dict[str, Any] = {**record.metadata, "imported_from": fmt}
    if record.ref:
        metadata["ref"] = record.ref
    if record.author:
        metadata["author"] = record.author
    if record.thread:
        metadata["thread"] = record.thread[:200]
        if record.author:
            metadata["speaker"] = record.author[:200]
    if len(json.dumps(metadata, ensure_ascii=False, default=str).encode()) > max_metadata:
        metadata = {k: metadata[k] for k in ("imported_from", "ref", "author", "thread", "speaker") if k in metadata}
    return MemoryInput(
        content=record.content,
        namespace=namespace,
        visibility=visibility,
        network=Network(record.network),
        memory_type=MemoryType(record.memory_type),
        source_kind=f"import:{fmt}",
        source_ref=record.key,
        valid_at=record.valid_at,
        metadata=json.loads(json.dumps(metadata, ensure_ascii=False, default=str)),
    )


async def import_parsed(
    engine: Engine,
    agent: str,
    namespace: str,
    fmt: str,
    parsed: Parsed,
    *,
    visibility: Visibility = Visibility.TEAM,
    decide: bool = True,
    progress: Callable[[str], None] = lambda line: None,
    batch: int | None = None,
) -> ImportReport:
    started = time.perf_counter()
    settings = engine.settings
    report = ImportReport(fmt, namespace, read=len(parsed.records), skipped=dict(parsed.skipped))
    async with engine.pool.acquire() as conn:
        await access.require_writer(conn, agent, namespace)
    size = batch or min(settings.max_batch, 256)
    said = time.monotonic()
    for start in range(0, len(parsed.records), size):
        group = parsed.records[start : start + size]
        async with engine.pool.acquire() as conn:
            seen = {
                r["source_ref"]
                for r in await conn.fetch(sql.IMPORTED, namespace, f"import:{fmt}", [r.key for r in group])
            }
        todo = []
        for record in group:
            if record.key in seen:
                report.already += 1
            elif len(record.content) > settings.max_content_chars:
                report.skipped["longer than CABRAIN_MAX_CONTENT_CHARS"] = (
                    report.skipped.get("longer than CABRAIN_MAX_CONTENT_CHARS", 0) + 1
                )
            else:
                todo.append(record)
                seen.add(record.key)
        if not todo:
            continue
        inputs = [_input(r, fmt, namespace, visibility, settings.max_metadata_bytes) for r in todo]
        key = "import-" + requests.digest(fmt, namespace, [r.key for r in todo]).hex()[:48]
        results = await retain_pipeline.retain(engine, agent, inputs, decide_writes=decide, idempotency_key=key)
        for result in results:
            report.decided(result)
        if time.monotonic() - said >= 5.0:
            said = time.monotonic()
            progress(f"imported {start + len(group)}/{len(parsed.records)} records")
    report.seconds = time.perf_counter() - started
    progress(
        f"{fmt}: {report.read} records read, {report.added} added, {report.duplicates} duplicates, "
        f"{report.already} imported before" + (f", skipped {report.skipped}" if report.skipped else "")
    )
    if report.decisions_line():
        progress(report.decisions_line())
    return report
