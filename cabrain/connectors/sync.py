"""One sync of one connector: list the source, stage what changed, index it, forget what is gone.

Incremental and idempotent by construction:

- the per-item versions in ``connector_items`` are the connector's cursor: an item whose version
  is the one indexed is not fetched again, so a second sync with nothing changed writes nothing;
- an item is **staged** (fetched, converted, redacted, its parts hashed) in one statement, then
  **indexed**: each new part is retained through the write decisions (ADD / UPDATE / INVALIDATE /
  NOOP), each part whose text changed supersedes its memory with the new text (a revision, kept as
  a revertible judgment), each part gone is forgotten; the item's row then records which memory
  holds which part, in one statement;
- a sync killed at any point resumes: staged items are indexed first, without a fetch; a write
  that committed before the kill is answered again under the same idempotency key, or found by
  its provenance (``source_ref`` = the item's URL and version, ``metadata.anchor`` = the part), so
  nothing is written twice;
- an item missing from a *complete* listing was deleted at the source: its memories are
  forgotten (never erased). A listing cut short by an error deletes nothing.

:mod:`cabrain.connectors.preview` is the same listing, fetching and comparing with nothing written
(a dry run). Progress (the listing, the items indexed) goes to a :data:`~cabrain.progress.Say`: bars
with rate and time left on a terminal, lines to a line callable.

Every write is the connector's agent's, so the namespace's access rules apply as to any retain.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cabrain import failpoints
from cabrain.connectors.base import Document, ItemRef, Source
from cabrain.engine import Engine
from cabrain.errors import SourceError
from cabrain.progress import Say, as_progress
from cabrain.redact import redact
from cabrain.store import connectors as sql
from cabrain.store import requests
from cabrain.types import Decision, MemoryInput, MemoryType, Network, Visibility
from cabrain.write import changes
from cabrain.write import retain as retain_pipeline
from cabrain.write.tally import Decided, skipped_line
from cabrain.write.threads import MAX_FIELD_CHARS

__all__ = ["Counts", "Plan", "Sync", "fate", "owned", "part_hash"]


@dataclass
class Counts(Decided):
    """What a sync did, item by item and part by part; what the write decisions did to its new parts
    (added, duplicates, retracted, superseded, with their reasons: :class:`cabrain.write.tally.Decided`)."""

    listed: int = 0
    unchanged: int = 0
    fetched: int = 0
    gone: int = 0  # listed, then missing when fetched (deleted meanwhile: the next listing decides)
    empty: int = 0  # no text to keep (a binary, an empty file)
    indexed: int = 0
    deleted: int = 0
    revised: int = 0  # parts whose memory was superseded by the new text
    kept: int = 0  # parts unchanged within a changed item
    forgotten: int = 0  # memories forgotten: their part or item is gone from the source
    # what the source held that is no memory, by reason (a system line, a deleted message, a file
    # too large), as the source counted it while listing and fetching
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, other: Counts) -> None:
        self.merge(other)

    def skipped_line(self) -> str:
        """What the source left out, in a sentence ("" when nothing): ``skipped 105: 94 attachment, 11 system``."""
        return skipped_line(self.skipped)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Plan:
    """A listing compared with what the connector holds: the items to fetch, and the items gone."""

    changed: list[ItemRef]
    gone: list[str]
    counts: Counts = field(default_factory=Counts)


def part_hash(text: str, speaker: str | None, valid_at: str | None, thread: str | None, title: str | None) -> str:
    """What makes a part "the same part": its text and who said it, when, where."""
    blob = json.dumps([text, speaker, valid_at, thread, title], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _short(value: str | None) -> str | None:
    return value[:MAX_FIELD_CHARS].strip() or None if value else None


class Sync:
    """One connector's sync on ``engine``, writing as the connector's agent. ``say`` gets its
    progress (a :class:`~cabrain.progress.Progress`, or a line callable); ``batch`` is how many
    changed items are staged and indexed together."""

    def __init__(
        self,
        engine: Engine,
        connector: sql.Connector,
        source: Source,
        *,
        say: Say | None = None,
        batch: int = 32,
    ) -> None:
        self.engine = engine
        self.connector = connector
        self.source = source
        self.progress = as_progress(say)
        self.batch = batch

    # --- listing -----------------------------------------------------------------------------------
    async def plan(self) -> Plan:
        """List the source and compare it with the items held: what changed, what is gone."""
        async with self.engine.pool.acquire() as conn:
            held = await sql.items(conn, self.connector.id)
        refs: list[ItemRef] = []
        seen: set[str] = set()

        def scan() -> None:
            with self.progress.track(f"{self.connector.name}: listing") as listing:
                for ref in self.source.scan():
                    if ref.key in seen:
                        continue
                    seen.add(ref.key)
                    refs.append(ref)
                    listing.advance()

        before = _skips(self.source)
        await asyncio.to_thread(scan)
        counts = Counts(listed=len(refs), skipped=_since(before, _skips(self.source)))
        changed = []
        for ref in refs:
            state = held.get(ref.key)
            if state is not None and state.stage == "indexed" and state.version == ref.version:
                counts.unchanged += 1
            else:
                changed.append(ref)
        gone = sorted(k for k, s in held.items() if s.stage != "deleted" and k not in seen)
        self._progress(f"listed {len(refs)} items: {len(changed)} new or changed, {len(gone)} gone")
        return Plan(changed, gone, counts)

    # --- staging and indexing ------------------------------------------------------------------------
    async def apply(self, refs: Sequence[ItemRef], counts: Counts | None = None) -> Counts:
        """Fetch, stage and index ``refs``, a batch at a time."""
        counts = counts if counts is not None else Counts()
        with self.progress.track(f"{self.connector.name}: indexing", len(refs)) as indexing:
            for start in range(0, len(refs), self.batch):
                chunk = refs[start : start + self.batch]
                docs = await asyncio.to_thread(self._fetch_all, chunk, counts)
                staged = await self._stage(docs)
                failpoints.hit("connector.after_stage")  # tests: killed between staging and indexing
                await self._index(staged, counts)
                indexing.advance(len(chunk))
        return counts

    async def fetch(self, refs: Sequence[ItemRef], counts: Counts) -> list[Document]:
        """``refs`` fetched and converted (in a worker thread), none staged: for a dry run."""
        return await asyncio.to_thread(self._fetch_all, refs, counts)

    async def resume(self, counts: Counts) -> int:
        """Index the items a previous, interrupted sync staged but did not index."""
        after, resumed = "", 0
        while True:
            async with self.engine.pool.acquire() as conn:
                rows = await sql.staged(conn, self.connector.id, after, self.batch)
            if not rows:
                return resumed
            await self._index(rows, counts)
            resumed += len(rows)
            after = rows[-1][0].key

    def _fetch_all(self, refs: Sequence[ItemRef], counts: Counts) -> list[Document]:
        docs = []
        before = _skips(self.source)
        try:
            for ref in refs:
                try:
                    docs.append(self.source.fetch(ref))
                except SourceError as exc:
                    if exc.status_code != 404:
                        raise
                    counts.gone += 1  # deleted since the listing: the next listing forgets it
                    continue
                counts.fetched += 1
        finally:  # what the source left out while fetching (a file too large, a link), by reason
            for why, n in _since(before, _skips(self.source)).items():
                counts.skipped[why] = counts.skipped.get(why, 0) + n
        return docs

    def pending(self, doc: Document) -> dict[str, Any]:
        """A fetched item as it is staged: its parts redacted, hashed, their anchors unique."""
        scrub = self.engine.settings.redact_secrets
        parts = []
        for part in doc.parts:
            text = redact(part.text) if scrub else part.text
            if not text.strip():
                continue
            # a part's own time is part of it; the item's (a file's mtime) is not: an edit
            # elsewhere in the file moves it, and must leave this part alone
            own = part.valid_at.isoformat() if part.valid_at else None
            when = part.valid_at or doc.valid_at
            speaker, thread = _short(part.speaker), _short(part.thread)
            title = _short(part.title or doc.title)
            parts.append(
                {
                    "anchor": part.anchor,
                    "text": text,
                    "valid_at": when.isoformat() if when else None,
                    "speaker": speaker,
                    "thread": thread,
                    "title": title,
                    "hash": part_hash(text, speaker, own, thread, title),
                }
            )
        return {
            "version": doc.ref.version,
            "url": doc.ref.url,
            "title": doc.title,
            "metadata": dict(doc.metadata),
            "parts": _unique(parts),
        }

    async def _stage(self, docs: Sequence[Document]) -> list[tuple[sql.ItemState, dict[str, Any]]]:
        now = self.engine.clock()
        out = []
        async with self.engine.pool.acquire() as conn:
            held = await sql.some_items(conn, self.connector.id, [d.ref.key for d in docs])
            for doc in docs:
                pending = self.pending(doc)
                await sql.stage(conn, self.connector.id, doc.ref.key, doc.ref.url, pending, now)
                previous = held.get(doc.ref.key)
                state = sql.ItemState(
                    doc.ref.key,
                    previous.version if previous else None,
                    "staged",
                    doc.ref.url,
                    previous.parts if previous else [],
                )
                out.append((state, pending))
        return out

    async def _index(self, staged: Sequence[tuple[sql.ItemState, dict[str, Any]]], counts: Counts) -> None:
        """Bring each staged item's memories in line with its parts, then mark it indexed."""
        connector = self.connector
        old_ids = [uuid.UUID(p["memory_id"]) for s, _ in staged for p in s.parts if p.get("own") and p.get("memory_id")]
        async with self.engine.pool.acquire() as conn:
            current = {r["id"] for r in await conn.fetch(sql.CURRENT, old_ids)} if old_ids else set()
        plans: list[tuple[sql.ItemState, dict[str, Any], list[dict[str, Any]]]] = []
        adds: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = []  # (pending, part, slot)
        revisions: list[tuple[dict[str, Any], dict[str, Any], uuid.UUID, dict[str, Any]]] = []
        forgets: list[uuid.UUID] = []
        for state, pending in staged:
            old = {p["anchor"]: p for p in state.parts}
            slots: list[dict[str, Any]] = []
            for part in pending["parts"]:
                before = old.pop(part["anchor"], None)
                slot: dict[str, Any] = {"anchor": part["anchor"], "hash": part["hash"]}
                slots.append(slot)
                found = fate(before, part, current)
                if before is not None and found == "kept":
                    slot.update(memory_id=before["memory_id"], own=before.get("own", False))
                    counts.kept += 1
                elif before is not None and found == "revised":
                    revisions.append((pending, part, uuid.UUID(before["memory_id"]), slot))
                else:
                    adds.append((pending, part, slot))
            forgets += owned(old.values())
            if not pending["parts"]:
                counts.empty += 1
            plans.append((state, pending, slots))
        await self._write_adds(adds, counts)
        for pending, part, old_id, slot in revisions:
            item = self._input(
                pending, part, reason=f"edited at the source ({connector.kind} connector {connector.name})"
            )
            [result] = await retain_pipeline.retain(
                self.engine,
                connector.agent_id,
                [item],
                decide_writes=False,
                supersede=old_id,
                idempotency_key=self._key("revise", old_id, part["hash"]),
            )
            slot.update(memory_id=str(result.memory_id), own=True)
            counts.revised += 1
        await self._forget([m for m in forgets if m in current], "removed from the item at the source", counts)
        failpoints.hit("connector.after_write")  # tests: killed after the writes, before the items say so
        now = self.engine.clock()
        async with self.engine.pool.acquire() as conn, conn.transaction():
            for state, pending, slots in plans:
                await sql.indexed(conn, connector.id, state.key, pending["version"], state.url, slots, now)
                counts.indexed += 1

    async def _write_adds(
        self, adds: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]], counts: Counts
    ) -> None:
        if not adds:
            return
        connector = self.connector
        inputs = [self._input(pending, part) for pending, part, _ in adds]
        # written by an interrupted sync whose answer was lost: found by provenance, not written again
        refs = sorted({str(i.source_ref) for i in inputs})
        async with self.engine.pool.acquire() as conn:
            rows = await conn.fetch(
                sql.WRITTEN, connector.namespace, connector.kind, refs, connector.agent_id, connector.name
            )
        found = {(r["source_ref"], r["anchor"]): r["id"] for r in rows}
        todo = []
        for (_, part, slot), item in zip(adds, inputs, strict=True):
            earlier = found.get((item.source_ref, part["anchor"]))
            if earlier is not None:
                slot.update(memory_id=str(earlier), own=True)
                counts.added += 1
            else:
                todo.append((item, slot))
        size = self.engine.settings.max_batch
        for start in range(0, len(todo), size):
            group = todo[start : start + size]
            key = self._key("add", *(f"{i.source_ref}#{i.metadata['anchor']}:{i.metadata['hash']}" for i, _ in group))
            results = await retain_pipeline.retain(
                self.engine, connector.agent_id, [i for i, _ in group], decide_writes=True, idempotency_key=key
            )
            for (_, slot), result in zip(group, results, strict=True):
                own = result.decision in (Decision.ADD, Decision.UPDATE)
                slot.update(memory_id=str(result.memory_id) if result.memory_id else None, own=own)
                counts.decided(result)

    async def _forget(self, memory_ids: Iterable[uuid.UUID], why: str, counts: Counts) -> None:
        connector = self.connector
        for memory_id in memory_ids:
            await changes.forget(
                self.engine,
                connector.agent_id,
                memory_id,
                reason=f"{why} ({connector.kind} connector {connector.name})",
            )
            counts.forgotten += 1

    async def delete(self, keys: Sequence[str], counts: Counts) -> None:
        """Forget the memories of items gone from the source, and mark them deleted."""
        if not keys:
            return
        async with self.engine.pool.acquire() as conn:
            held = await sql.items(conn, self.connector.id)
        now = self.engine.clock()
        for key in keys:
            state = held.get(key)
            if state is None or state.stage == "deleted":
                continue
            own = [uuid.UUID(p["memory_id"]) for p in state.parts if p.get("own") and p.get("memory_id")]
            async with self.engine.pool.acquire() as conn:
                current = {r["id"] for r in await conn.fetch(sql.CURRENT, own)} if own else set()
            await self._forget([m for m in own if m in current], "deleted at the source", counts)
            async with self.engine.pool.acquire() as conn:
                await sql.deleted(conn, self.connector.id, key, state.parts, now)
            counts.deleted += 1

    # --- helpers -----------------------------------------------------------------------------------
    def _input(self, pending: dict[str, Any], part: dict[str, Any], *, reason: str | None = None) -> MemoryInput:
        connector = self.connector
        conversational = bool(part.get("speaker") and part.get("thread"))
        metadata: dict[str, Any] = {
            **{k: v for k, v in pending.get("metadata", {}).items() if k not in ("thread", "speaker")},
            "connector": connector.name,
            "anchor": part["anchor"],
            "hash": part["hash"],
        }
        for key in ("title", "thread", "speaker"):
            if part.get(key):
                metadata[key] = part[key]
        if reason:
            metadata["reason"] = reason
        return MemoryInput(
            content=part["text"],
            namespace=connector.namespace,
            visibility=Visibility(connector.visibility),
            network=Network.EXPERIENCE,
            memory_type=MemoryType.EPISODIC if conversational else MemoryType.SEMANTIC,
            source_kind=connector.kind,
            source_ref=f"{pending['url']}@{pending['version']}",
            valid_at=datetime.fromisoformat(part["valid_at"]) if part.get("valid_at") else None,
            metadata=metadata,
        )

    def _key(self, *parts: object) -> str:
        return f"connector-{requests.digest(str(self.connector.id), *map(str, parts)).hex()[:48]}"

    def _progress(self, line: str) -> None:
        self.progress(f"{self.connector.name}: {line}")


def fate(before: dict[str, Any] | None, part: dict[str, Any], current: set[uuid.UUID]) -> str:
    """What indexing does with a staged part, given the part held at its anchor (``before``):
    ``kept`` (the same part: its memory stays), ``revised`` (changed, and its own memory, still
    current, is superseded with the new text) or ``added`` (new, or its memory is no longer there)."""
    if before is not None and before["hash"] == part["hash"] and before.get("memory_id"):
        return "kept"
    if before is not None and before.get("own") and uuid.UUID(before["memory_id"]) in current:
        return "revised"
    return "added"


def owned(parts: Iterable[dict[str, Any]]) -> list[uuid.UUID]:
    """The memories of ``parts`` that the connector wrote itself (not one a decision merged into)."""
    return [uuid.UUID(p["memory_id"]) for p in parts if p.get("own") and p.get("memory_id")]


def _skips(source: Source) -> dict[str, int]:
    """What ``source`` has left out so far, by reason (the ``skipped`` it keeps; {} if it keeps none)."""
    found = getattr(source, "skipped", None)
    return {str(k): v for k, v in found.items() if isinstance(v, int)} if isinstance(found, dict) else {}


def _since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The skips counted between two looks at a source's ``skipped`` (a source that read its export
    again counts from zero: what it counts then is new)."""
    out = {}
    for why, n in after.items():
        grown = n - before.get(why, 0) if n >= before.get(why, 0) else n
        if grown > 0:
            out[why] = grown
    return out


def _unique(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anchors made unique within an item (a source that repeats one gets ``#2``, ``#3``)."""
    seen: dict[str, int] = {}
    for part in parts:
        n = seen.get(part["anchor"], 0) + 1
        seen[part["anchor"]] = n
        if n > 1:
            part["anchor"] = f"{part['anchor']}#{n}"
    return parts
