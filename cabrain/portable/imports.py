"""Importing another memory tool's records (:mod:`cabrain.importers`) into a namespace.

Each record is retained through the write decisions like any memory (a record the namespace
already knows is a NOOP that reinforces it), as the importing agent, with its source's time and
author kept: ``valid_at`` is when the source says it was made, ``metadata.author`` who made it (and
``speaker`` within a ``thread``).

**Keys.** A record's provenance is ``source_kind`` ``import:FORMAT`` and ``source_ref`` its key in
its scope: ``<source>#<scope>#<key>``, where the source is the file read (its real path, or what
``--source`` names) and the scope what the importer says the key is unique within (a claude-mem
project); or ``<scope>#<key>`` for a scope that names the source on its own (a Letta agent, a mem0
user), so a newer export of the same agent or user is the same source. Two files never share keys.

**A re-import** compares each record with what the namespace holds under its key:

- the same content (``metadata.import_hash``): nothing is written (``already``);
- new content, its memory current: the new text supersedes it (a revision: a judgment that
  ``cabrain revert`` undoes); a record of a group (a section's bullets, whose keys follow their
  text) that is new is paired with a record of its group gone from the source, most alike first;
- forgotten here since it was imported: skipped (a forget is never undone by an import);
- with ``mirror``, the current records of the sources read that the source no longer holds are
  forgotten (never erased).

**Whole, then written.** The file is parsed and every record checked (the edge guard, the content
limit) before anything is written; the writes go in batches, each under an idempotency key made of
its keys and contents, so a run that stopped is answered again, not written twice, and a second
run takes up where it stopped. ``dry_run`` plans and writes nothing.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cabrain.engine import Engine
from cabrain.importers.records import ImportRecord, Parsed
from cabrain.progress import Say, as_progress
from cabrain.store import access, requests
from cabrain.store import portable as sql
from cabrain.types import MemoryInput, MemoryType, Network, Visibility
from cabrain.write import changes
from cabrain.write import retain as retain_pipeline
from cabrain.write.tally import REVERT_HINT, SHOWN, Decided

__all__ = ["ImportReport", "import_parsed", "source_ref"]

_LONG = "longer than CABRAIN_MAX_CONTENT_CHARS"
_FORGOTTEN = "forgotten here since it was imported"
_PAIRED = 0.4  # how alike (difflib's ratio) a group's new record and a gone one must be to be paired


@dataclass
class ImportReport(Decided):
    """What an import read, skipped, revised and wrote; what the write decisions did to its new
    records (added, duplicates, retracted, superseded, with their reasons:
    :class:`cabrain.write.tally.Decided`). With ``dry_run``, what it would do: ``added`` counts
    the records that would be written (the write decisions may then merge some as duplicates)."""

    format: str
    namespace: str
    source: str = ""
    read: int = 0
    already: int = 0  # imported before, unchanged
    revised: int = 0  # imported before, changed at the source: the new text superseded the memory
    forgotten: int = 0  # gone from the source (mirror): forgotten
    forgotten_ids: list[str] = field(default_factory=list)  # the first SHOWN of them
    skipped: dict[str, int] = field(default_factory=dict)  # what was read but is no memory, by reason
    dry_run: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "revert": REVERT_HINT}

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n


def source_ref(record: ImportRecord, source: str, *, named: bool = False) -> str:
    """The record's key in its scope (see the module's doc); ``named``: ``source`` is what the
    importer named (``--source``), which then scopes every record."""
    if record.own_scope and not named:
        return f"{record.scope}#{record.key}"
    return f"{source}#{record.scope}#{record.key}" if record.scope else f"{source}#{record.key}"


def _prefix(record: ImportRecord, source: str, named: bool) -> str:
    return source_ref(record, source, named=named)[: -len(record.key)]


def group_of(record: ImportRecord, ref: str) -> str | None:
    """The record's group in its scope (``ref`` is its key there), or None."""
    return f"{ref[: -len(record.key)]}{record.group}" if record.group else None


def content_hash(record: ImportRecord) -> str:
    return hashlib.sha256(record.content.encode("utf-8")).hexdigest()[:32]


def _input(
    record: ImportRecord,
    ref: str,
    fmt: str,
    namespace: str,
    visibility: Visibility,
    max_metadata: int,
    reason: str | None = None,
) -> MemoryInput:
    metadata: dict[str, Any] = {**record.metadata, "imported_from": fmt, "import_hash": content_hash(record)}
    if reason:
        metadata["reason"] = reason
    if record.group:  # scoped as the key is: a group of this source only
        metadata["import_group"] = group_of(record, ref)
    if record.ref:
        metadata["ref"] = record.ref
    if record.author:
        metadata["author"] = record.author
    if record.thread:
        metadata["thread"] = record.thread[:200]
        if record.author:
            metadata["speaker"] = record.author[:200]
    if len(json.dumps(metadata, ensure_ascii=False, default=str).encode()) > max_metadata:
        kept = ("imported_from", "import_hash", "import_group", "reason", "ref", "author", "thread", "speaker")
        metadata = {k: metadata[k] for k in kept if k in metadata}
    return MemoryInput(
        content=record.content,
        namespace=namespace,
        visibility=visibility,
        network=Network(record.network),
        memory_type=MemoryType(record.memory_type),
        source_kind=f"import:{fmt}",
        source_ref=ref,
        valid_at=record.valid_at,
        metadata=json.loads(json.dumps(metadata, ensure_ascii=False, default=str)),
    )


@dataclass
class _Plan:
    """What a batch of records comes to against what the namespace holds."""

    adds: list[tuple[ImportRecord, str]] = field(default_factory=list)
    revisions: list[tuple[ImportRecord, str, uuid.UUID]] = field(default_factory=list)


class _Importer:
    def __init__(
        self,
        engine: Engine,
        agent: str,
        namespace: str,
        fmt: str,
        report: ImportReport,
        *,
        source: str,
        named: bool,
        visibility: Visibility,
    ) -> None:
        self.engine, self.agent, self.namespace, self.fmt = engine, agent, namespace, fmt
        self.report, self.source, self.named, self.visibility = report, source, named, visibility
        self.kind = f"import:{fmt}"
        self.read_refs: set[str] = set()
        self.paired: set[uuid.UUID] = set()  # gone records a group's new one revised

    def ref(self, record: ImportRecord) -> str:
        return source_ref(record, self.source, named=self.named)

    async def plan(self, records: Sequence[ImportRecord]) -> _Plan:
        """``records`` (a batch of the source's) against what is held; :attr:`read_refs` must hold
        the keys of every record of the source, so no record of a later batch is taken for gone."""
        refs = [self.ref(r) for r in records]
        async with self.engine.pool.acquire() as conn:
            rows = await conn.fetch(sql.HELD, self.namespace, self.kind, refs, self.agent)
        held: dict[str, list[Any]] = {}
        for row in rows:
            held.setdefault(row["source_ref"], []).append(row)
        plan, new = _Plan(), []
        for record, ref in zip(records, refs, strict=True):
            versions = held.get(ref)
            if not versions:
                new.append((record, ref))
                continue
            current = [v for v in versions if v["current"]]
            latest = current[-1] if current else versions[-1]
            same = latest["hash"] == content_hash(record) or latest["content"] == record.content  # or before hashes
            if same:
                self.report.already += 1
            elif current:
                plan.revisions.append((record, ref, current[-1]["id"]))
            elif latest["forgotten"]:
                self.report.skip(_FORGOTTEN)
            else:  # superseded by another memory, or demoted: the new version is a new memory
                plan.adds.append((record, ref))
        await self._pair(new, plan)
        return plan

    async def _pair(self, new: list[tuple[ImportRecord, str]], plan: _Plan) -> None:
        """A group's new records revise its records gone from the source, most alike first; the
        rest are added."""
        grouped = {ref: g for r, ref in new if (g := group_of(r, ref))}
        groups = sorted(set(grouped.values()))
        if not groups:
            plan.adds.extend(new)
            return
        async with self.engine.pool.acquire() as conn:
            rows = await conn.fetch(sql.HELD_GROUPS, self.namespace, self.kind, groups, self.agent)
        gone: dict[str, list[Any]] = {}
        for row in rows:
            if row["source_ref"] not in self.read_refs and row["id"] not in self.paired:
                gone.setdefault(row["grp"], []).append(row)
        for group in groups:
            fresh = [(r, ref) for r, ref in new if grouped.get(ref) == group]
            old = gone.get(group, [])
            scored = sorted(
                (
                    (difflib.SequenceMatcher(None, r.content, o["content"]).ratio(), i, j)
                    for i, (r, _) in enumerate(fresh)
                    for j, o in enumerate(old)
                ),
                reverse=True,
            )
            taken_new: set[int] = set()
            taken_old: set[int] = set()
            for ratio, i, j in scored:
                lone = len(fresh) == len(old) == 1  # one bullet rewritten: the same field, whatever it says now
                if i in taken_new or j in taken_old or (ratio < _PAIRED and not lone):
                    continue
                taken_new.add(i)
                taken_old.add(j)
                self.paired.add(old[j]["id"])
                plan.revisions.append((fresh[i][0], fresh[i][1], old[j]["id"]))
            plan.adds.extend(x for i, x in enumerate(fresh) if i not in taken_new)
        plan.adds.extend((r, ref) for r, ref in new if not r.group)

    async def write(self, plan: _Plan, *, decide: bool) -> None:
        settings = self.engine.settings
        if plan.adds:
            inputs = [
                _input(r, ref, self.fmt, self.namespace, self.visibility, settings.max_metadata_bytes)
                for r, ref in plan.adds
            ]
            key = (
                "import-"
                + requests.digest(
                    self.fmt, self.namespace, [f"{i.source_ref}:{i.metadata['import_hash']}" for i in inputs]
                ).hex()[:48]
            )
            results = await retain_pipeline.retain(
                self.engine, self.agent, inputs, decide_writes=decide, idempotency_key=key
            )
            for result in results:
                self.report.decided(result)
        for record, ref, old_id in plan.revisions:
            reason = f"a newer version of the record in the re-imported {self.fmt} source"
            item = _input(record, ref, self.fmt, self.namespace, self.visibility, settings.max_metadata_bytes, reason)
            key = "import-revise-" + requests.digest(old_id, item.metadata["import_hash"]).hex()[:40]
            await retain_pipeline.retain(
                self.engine, self.agent, [item], decide_writes=False, supersede=old_id, idempotency_key=key
            )
            self.report.revised += 1
            if len(self.report.taken_out) < SHOWN:
                self.report.taken_out.append(str(old_id))

    async def mirror(self, prefixes: Sequence[str], *, dry_run: bool) -> None:
        """Forget the current records under ``prefixes`` the source no longer holds."""
        async with self.engine.pool.acquire() as conn:
            rows = await conn.fetch(sql.HELD_UNDER, self.namespace, self.kind, list(prefixes), self.agent)
        for row in rows:
            if row["source_ref"] in self.read_refs or row["id"] in self.paired:
                continue
            if not dry_run:
                await changes.forget(
                    self.engine,
                    self.agent,
                    row["id"],
                    reason=f"gone from the source at a re-import of {self.source} (--mirror)",
                )
            self.report.forgotten += 1
            if len(self.report.forgotten_ids) < SHOWN:
                self.report.forgotten_ids.append(str(row["id"]))


async def import_parsed(
    engine: Engine,
    agent: str,
    namespace: str,
    fmt: str,
    parsed: Parsed,
    *,
    source: str,
    named: bool = False,
    visibility: Visibility = Visibility.TEAM,
    decide: bool = True,
    mirror: bool = False,
    dry_run: bool = False,
    progress: Say | None = None,
    batch: int | None = None,
) -> ImportReport:
    """Import the records of ``parsed``, read from ``source`` (the file's real path, or the name
    the caller gave: ``named``), as ``agent``. See the module's doc."""
    started = time.perf_counter()
    settings = engine.settings
    say = as_progress(progress)
    report = ImportReport(fmt, namespace, source=source, read=len(parsed.records), dry_run=dry_run)
    for reason, n in parsed.skipped.items():
        report.skip(reason, n)
    async with engine.pool.acquire() as conn:
        await access.require_writer(conn, agent, namespace)
    records = []
    for record in parsed.records:
        if len(record.content) > settings.max_content_chars:
            report.skip(_LONG)
        else:
            records.append(record)
    work = _Importer(engine, agent, namespace, fmt, report, source=source, named=named, visibility=visibility)
    work.read_refs = {work.ref(r) for r in parsed.records}  # a record skipped as too long is still at the source
    size = batch or min(settings.max_batch, 256)
    with say.track(f"{'planning' if dry_run else 'importing'} {fmt}", total=len(records), unit="records") as bar:
        for start in range(0, len(records), size):
            group = records[start : start + size]
            plan = await work.plan(group)
            if dry_run:
                report.added += len(plan.adds)
                report.revised += len(plan.revisions)
            else:
                await work.write(plan, decide=decide)
            bar.advance(len(group))
    if mirror:
        prefixes = {_prefix(r, source, named) for r in parsed.records} | {f"{source}#"}
        await work.mirror(sorted(prefixes), dry_run=dry_run)
    report.seconds = time.perf_counter() - started
    return report
