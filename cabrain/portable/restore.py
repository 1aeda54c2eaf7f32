"""Importing a CaBrain export (:mod:`cabrain.portable.export`): the same memories, with the same
ids, versions, times, salience, provenance, entities, links, grants and judgments.

Memories are written as they were, not decided again: a CaBrain export is already what CaBrain
decided. Each batch is embedded (unless the export kept vectors for the same dimension) while the
batch before it is written, the way retain pipelines a large call, under its namespaces' writer
locks: the rows, their keyword postings (with the turns before them in their conversation), their
passages, their speakers. What points at other memories - supersession, links, judgments - is
written once every memory is in.

All or nothing. The whole file is read and checked first, without writing (:mod:`cabrain.portable.checks`:
an export cut short or changed is refused there), and an import made for an agent obeys the API's
namespace and consent rules (described there). Then everything is written in one transaction, which
holds its namespaces' writer locks from its first batch until it commits: an import that fails
midway (the model fails, the process is killed, the file changes under it) leaves the database as
it was. Progress: the records checked, then the memories written, of how many, with the rate and
the time left (:mod:`cabrain.progress`).

An export that kept its vectors (made by this brain's model) is written in bulk
(:mod:`cabrain.portable.bulk`): each batch staged with ``COPY`` and written with one statement per
table, to the same rows the batch-by-batch path writes (``bulk`` chooses either way).

Idempotent: a memory, entity, link, judgment or held action whose id is already stored is skipped,
so importing an export twice adds nothing.
Agents are created without keys and never as admins (the operator makes keys for those who need
them), with the role and caps they had; an agent that exists is left as it is. Memories the export
read from the cold tier come back hot, and the next sleep demotes them again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from cabrain import failpoints
from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.portable import bulk as staged
from cabrain.portable import checks
from cabrain.portable.checks import NOTHING, Plan, records
from cabrain.portable.checks import when as _time
from cabrain.portable.export import Digest
from cabrain.progress import Say, Tracker, as_progress
from cabrain.redact import redact, redact_deep
from cabrain.store import memories as sql
from cabrain.store import namespaces as namespace_sql
from cabrain.store import portable as portable_sql
from cabrain.store.keyword import IndexedDoc, PostgresBM25
from cabrain.text.tokenizer import term_frequencies
from cabrain.write.threads import ThreadContext
from cabrain.write.vectors import memory_vectors

__all__ = ["RestoreReport", "restore"]


@dataclass
class RestoreReport:
    namespaces: list[str]
    added: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # already stored
    came_back_hot: int = 0  # archived in the export, hot here until the next sleep
    seconds: float = 0.0

    def count(self, kind: str, added: bool) -> None:
        target = self.added if added else self.skipped
        target[kind] = target.get(kind, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def scrub(value: dict[str, Any], redacting: bool) -> dict[str, Any]:
    """``value`` with every string redacted (:func:`cabrain.redact.redact_deep`) when ``redacting``."""
    if not redacting:
        return value
    cleaned = redact_deep(value)
    assert isinstance(cleaned, dict)
    return cleaned


class _Restore:
    """One import's writes, all on ``conn`` inside its one transaction."""

    def __init__(
        self, engine: Engine, conn: asyncpg.Connection, report: RestoreReport, tracker: Tracker, batch: int, plan: Plan
    ) -> None:
        self.engine, self.conn, self.report, self.tracker = engine, conn, report, tracker
        self.batch, self.plan = batch, plan
        self.bulk = False  # written a staged batch at a time (cabrain.portable.bulk): decided by the header
        self.deferred: list[tuple[str, str]] = []  # the indexes a large bulk import builds at its end
        self.entity_ids: dict[uuid.UUID, uuid.UUID] = {}  # the export's entity id -> the one stored here
        self.superseded: list[tuple[uuid.UUID, uuid.UUID]] = []
        self.forgotten: list[tuple[uuid.UUID, datetime, str | None, str | None]] = []
        self.mentions: list[tuple[uuid.UUID, uuid.UUID]] = []
        self.taken: set[uuid.UUID] = set()  # memories this import writes (a file may name one twice)
        self.words: dict[uuid.UUID, tuple[Counter[str], int]] = {}  # in bulk: counted ahead (_ready)
        self.written = 0
        self.vectors_fit = False
        self.locked = False  # the namespaces' writer locks, taken by the first batch written

    # --- the small records: agents, namespaces, grants, entities ----------------------------------------
    async def small(self, record: dict[str, Any]) -> None:
        kind = record["type"]
        conn = self.conn
        if kind == "agent":
            made = await conn.fetchval(
                portable_sql.RESTORE_AGENT,
                record["id"],
                record.get("display_name"),
                _time(record["created_at"]),
                _time(record.get("disabled_at")),
                record.get("role") or "member",
            )
            if made is not None:  # its caps come with it; an agent that was here keeps its own
                for op, per_day in sorted((record.get("caps") or {}).items()):
                    await conn.execute(portable_sql.RESTORE_CAP, made, op, per_day, "import")
        elif kind == "namespace":
            made = await conn.fetchval(
                portable_sql.RESTORE_NAMESPACE,
                record["name"],
                self.plan.namespace_owner(record.get("owner_agent_id")),
                _time(record["created_at"]),
                json.dumps(record.get("metadata") or {}),
            )
        elif kind == "grant":
            made = await conn.fetchval(
                portable_sql.RESTORE_GRANT,
                record["agent_id"],
                record["namespace"],
                record["can_read"],
                record["can_write"],
                record.get("granted_by"),
                _time(record["granted_at"]),
                self.plan.accepted_at(record["agent_id"], _time(record.get("accepted_at"))),
            )
        elif kind == "entity":
            body = scrub({k: v for k, v in record.items() if k != "type"}, self.engine.settings.redact_secrets)
            made = await conn.fetchval(portable_sql.RESTORE_ENTITY, json.dumps(body, ensure_ascii=False))
            exported = uuid.UUID(record["id"])
            if made is None:  # the name is known here under another id: mentions go to that one
                made = await conn.fetchval(portable_sql.ENTITY_BY_KEY, record["namespace"], record["key"])
                self.report.count(kind, False)
                self.entity_ids[exported] = made or exported
                return
            self.entity_ids[exported] = made
        else:
            raise AssertionError(kind)
        self.report.count(kind, made is not None)

    # --- memories, a batch at a time: embedded while the batch before is written -------------------------
    async def memories(self, stream: Iterator[dict[str, Any]], first: dict[str, Any]) -> dict[str, Any] | None:
        """Consume memory records from ``first`` on; returns the first record that is not one."""
        batch: list[dict[str, Any]] = [first]
        writing: asyncio.Task[None] | None = None
        following: dict[str, Any] | None = None
        try:
            for record in stream:
                if record["type"] != "memory":
                    following = record
                    break
                batch.append(record)
                if len(batch) >= self.batch:
                    writing = await self._hand_over(batch, writing)
                    batch = []
            if batch:
                writing = await self._hand_over(batch, writing)
            if writing is not None:
                await writing
        except BaseException:
            if writing is not None:  # the transaction is rolled back once its connection is free again
                await asyncio.gather(writing, return_exceptions=True)
            raise
        return following

    async def _hand_over(self, batch: list[dict[str, Any]], writing: asyncio.Task[None] | None) -> asyncio.Task[None]:
        """Make the batch ready (redacted, its words counted) in a worker thread while the batch
        before is written, then hand it to be written once that one is."""
        if writing is not None and self._on_own_connection():  # ready first, looked up once that is written
            fresh = await self._unknown(await asyncio.to_thread(self._ready, batch), writing)
        else:  # looked up first (a record stored before is not redacted for nothing)
            fresh = await asyncio.to_thread(self._ready, await self._unknown(batch, writing))
        embedded = await self._embed(fresh)
        if writing is not None:
            await writing  # one batch written at a time, in order: threads see their earlier turns
        return asyncio.create_task(self._write(embedded, len(batch)))

    def _ready(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The batch's records as written (:meth:`_scrubbed`), and in bulk each one's words counted
        (``self.words``) as the keyword index counts a memory without a conversation's context;
        thread-safe: it reads the plan and settings, and adds to ``self.words`` only."""
        ready = [self._scrubbed(self.plan.memory(r)) for r in batch]
        backend = self.engine.keyword
        if self.bulk and isinstance(backend, PostgresBM25):
            for record in ready:
                valid_at = _time(record["valid_at"])
                assert valid_at is not None
                doc = IndexedDoc(uuid.UUID(record["id"]), record["namespace"], valid_at, record["content"], "")
                if doc.memory_id not in self.words:  # a file naming it twice: the first is written
                    self.words[doc.memory_id] = term_frequencies(backend.indexed_text(doc))
        return ready

    def _on_own_connection(self) -> bool:
        """Whether :meth:`_unknown` looks stored ids up on the import's connection, once the batch
        before is written: when the pool has one connection only, or when the import may drop the
        indexes it builds again (its transaction then holds ``memory_ids`` until it commits)."""
        may_drop = self.bulk and staged.may_defer(self.engine, self.plan.counts.get("memory", 0))
        return self.engine.pool.get_max_size() <= 1 or may_drop

    def _scrubbed(self, record: dict[str, Any]) -> dict[str, Any]:
        """The record with secrets and private blocks redacted, as every stored text is (an export
        file may have been edited since CaBrain wrote it); a vector made from other text is dropped."""
        if not self.engine.settings.redact_secrets:
            return record
        content = redact(record["content"])
        if content != record["content"]:
            record = {k: v for k, v in record.items() if k != "embedding"} | {"content": content}
        metadata = record.get("metadata")
        return record | ({"metadata": scrub(metadata, True)} if metadata else {})

    async def _unknown(self, batch: list[dict[str, Any]], writing: asyncio.Task[None] | None) -> list[dict[str, Any]]:
        """The batch's memories neither stored before this import nor taken by it already. Stored
        before: read on another connection while the batch before is written on the import's (what
        it sees is what was committed: the import's own rows are in ``taken``), or on the import's
        once that is written (:meth:`_on_own_connection`)."""
        ids = [uuid.UUID(r["id"]) for r in batch]
        if not self._on_own_connection():
            async with self.engine.pool.acquire() as conn:
                known = {r["id"] for r in await conn.fetch(portable_sql.KNOWN_IDS, ids)}
        else:
            if writing is not None:
                await writing
            known = {r["id"] for r in await self.conn.fetch(portable_sql.KNOWN_IDS, ids)}
        fresh = []
        for record, memory_id in zip(batch, ids, strict=True):
            if memory_id in known or memory_id in self.taken:
                self.report.count("memory", False)
            else:
                self.taken.add(memory_id)
                fresh.append(record)
        for memory_id in known:
            self.words.pop(memory_id, None)
        return fresh

    async def _embed(
        self, batch: list[dict[str, Any]]
    ) -> list[tuple[dict[str, Any], list[float] | str, list[str], list[list[float]]]]:
        """Each record with its vector (the export's, or the embedder's), its passages and theirs. In
        bulk, the export's vector stays its text, which the database reads (no float in Python)."""
        given = [record.get("embedding") if self.vectors_fit else None for record in batch]
        known = [(([] if self.bulk else json.loads(text)) if text else None) for text in given]
        done = await memory_vectors(self.engine, [record["content"] for record in batch], known=known)
        return [
            (record, text if self.bulk and text else vector, parts, theirs)
            for record, text, (vector, parts, theirs) in zip(batch, given, done, strict=True)
        ]

    async def _write(
        self, batch: list[tuple[dict[str, Any], list[float] | str, list[str], list[list[float]]]], read: int
    ) -> None:
        """Write the batch's new memories (of ``read`` records) on the import's connection: the first
        batch takes the writer locks of every namespace the export holds, in one order, until the
        import commits."""
        if not batch:
            self.tracker.advance(read)
            return
        s = self.engine.settings
        rows, docs, chunks, states = [], [], [], []
        conn = self.conn
        if not self.locked:
            for name in sorted(self.plan.namespaces):
                await namespace_sql.lock(conn, name)
            self.locked = True
            if self.bulk:
                self.deferred = await staged.defer_indexes(self.engine, conn, self.plan.counts.get("memory", 0))
        threads = ThreadContext(conn, turns=s.thread_context_turns, chars=s.thread_context_chars, gap_s=s.sitting_gap_s)
        for record, vector, parts, part_vectors in batch:
            memory_id = uuid.UUID(record["id"])
            valid_at = _time(record["valid_at"])
            metadata = record.get("metadata") or {}
            owner, visibility = record.get("owner_agent_id"), record["visibility"]
            assert valid_at is not None
            place = await threads.place(
                record["namespace"], owner or "", visibility, metadata, record["content"], valid_at
            )
            if place.sitting is not None:
                metadata = {**metadata, "sitting": place.sitting}
            rows.append(
                {
                    "id": memory_id,
                    "namespace": record["namespace"],
                    "owner_agent_id": owner,
                    "visibility": visibility,
                    "network": record["network"],
                    "memory_type": record["memory_type"],
                    "content": record["content"],
                    "source_kind": record.get("source_kind"),
                    "source_ref": record.get("source_ref"),
                    "embedding": vector,
                    "importance": float(record["importance"]),
                    "valid_at": valid_at,
                    "metadata": metadata,
                    "content_hash": hashlib.sha256(record["content"].encode("utf-8")).digest(),
                    "pinned": bool(record.get("pinned")),
                    "thread_turn": record.get("thread_turn"),
                }
            )
            docs.append(IndexedDoc(memory_id, record["namespace"], valid_at, record["content"], place.context))
            chunks += [
                (memory_id, n, record["namespace"], valid_at, t, v)
                for n, (t, v) in enumerate(zip(parts, part_vectors, strict=True))
            ]
            forgotten = _time(record.get("forgotten_at"))
            invalid = _time(record.get("invalid_at")) or forgotten
            states.append(
                {
                    "created_at": _time(record["created_at"]),
                    "invalid_at": invalid,
                    "access_count": int(record.get("access_count") or 0),
                    "last_accessed_at": _time(record.get("last_accessed_at")),
                    "consolidated_at": _time(record.get("consolidated_at")),
                    "decayed_at": _time(record.get("decayed_at")),
                }
            )
            if record.get("superseded_by"):
                self.superseded.append((memory_id, uuid.UUID(record["superseded_by"])))
            if forgotten is not None:
                self.forgotten.append((memory_id, forgotten, record.get("forgotten_by"), record.get("forget_reason")))
            if record.get("tier") == "cold":
                self.report.came_back_hot += 1
        if self.bulk:
            await staged.write(self.engine, conn, rows, states, docs, chunks, self.words)
        else:
            await sql.insert_memories(conn, rows)
            await self.engine.keyword.index(conn, docs)
            await sql.insert_chunks(conn, chunks)
            await conn.execute(
                portable_sql.RESTORE_STATE,
                [r["id"] for r in rows],
                *([state[c] for state in states] for c in portable_sql.RESTORE_STATE_COLUMNS),
            )
        await threads.written(rows)
        failpoints.hit("import.after_batch")  # tests: killed with batches written, none committed
        for _ in rows:
            self.report.count("memory", True)
        self.written += len(rows)
        self.tracker.advance(read)

    # --- what points at memories --------------------------------------------------------------------------
    async def finish(
        self, links: list[dict[str, Any]], judgments: list[dict[str, Any]], held: list[dict[str, Any]]
    ) -> None:
        conn = self.conn
        if self.superseded:
            await conn.execute(
                portable_sql.RESTORE_SUPERSEDED, [a for a, _ in self.superseded], [b for _, b in self.superseded]
            )
        if self.forgotten:
            f = self.forgotten
            await conn.execute(
                portable_sql.RESTORE_FORGOTTEN,
                [x[0] for x in f],
                [x[1] for x in f],
                [x[2] for x in f],
                [x[3] for x in f],
            )
        if self.mentions:
            mapped = [(m, self.entity_ids.get(e, e)) for m, e in self.mentions]
            status = await conn.execute(portable_sql.RESTORE_MENTIONS, [m for m, _ in mapped], [e for _, e in mapped])
            added = int(status.rsplit(" ", 1)[-1])
            if added:
                self.report.added["mention"] = added
            if len(mapped) - added:
                self.report.skipped["mention"] = len(mapped) - added
        for link in links:
            status = await conn.execute(
                portable_sql.RESTORE_LINK, json.dumps({k: v for k, v in link.items() if k != "type"})
            )
            self.report.count("link", status.endswith(" 1"))
        reverted = []
        for judgment in judgments:
            body = scrub(
                {k: v for k, v in judgment.items() if k not in ("type", "reverted_by")},
                self.engine.settings.redact_secrets,
            )
            status = await conn.execute(portable_sql.RESTORE_JUDGMENT, json.dumps(body, ensure_ascii=False))
            self.report.count("judgment", status.endswith(" 1"))
            if judgment.get("reverted_by"):
                reverted.append((uuid.UUID(judgment["id"]), uuid.UUID(judgment["reverted_by"])))
        for judgment_id, by in reverted:
            await conn.execute(portable_sql.RESTORE_REVERTED, judgment_id, by)
        for action in held:
            body = scrub({k: v for k, v in action.items() if k != "type"}, self.engine.settings.redact_secrets)
            made = await conn.fetchval(portable_sql.RESTORE_ACTION, json.dumps(body, ensure_ascii=False))
            self.report.count("action", made is not None)
        if self.deferred:
            await staged.build_indexes(self.engine, conn, self.deferred)


async def restore(
    engine: Engine,
    lines: Iterable[str],
    *,
    agent: str | None = None,
    where: str = "the export",
    progress: Say | None = None,
    batch: int | None = None,
    bulk: bool | None = None,
) -> RestoreReport:
    """Import a CaBrain export read from ``lines``, checked whole first, then written in one
    transaction (module docstring), for ``agent`` (an admin over the API: the API's namespace and
    consent rules apply) or the operator (None: everything as it was). Whether ``agent`` may import
    at all is the gate's. ``bulk``: write staged batches (:mod:`cabrain.portable.bulk`); None: when
    the export kept vectors this brain can use (its memories are then not embedded again)."""
    started = time.perf_counter()
    say = as_progress(progress)
    reread = checks.rereadable(lines)
    read = await asyncio.to_thread(checks.whole, reread(), where, say)  # off the event loop: a file of any size
    async with engine.pool.acquire() as conn:
        plan = await checks.plan(conn, read, agent=agent, where=where)
    report = RestoreReport(list(plan.namespaces))
    with say.track("importing memories", plan.counts.get("memory", 0), "memories") as tracker:
        async with engine.pool.acquire() as conn, conn.transaction():
            work = _Restore(engine, conn, report, tracker, batch or max(engine.settings.embed_batch_size, 64), plan)
            try:
                await _write_all(work, reread(), where, plan, bulk, batch)
            except (asyncpg.IntegrityConstraintViolationError, asyncpg.DataError) as exc:
                raise InputError(
                    f"{where} could not be written: {exc} ({NOTHING})",
                    hint="it names something neither it nor this brain holds: export it again",
                ) from exc
    if report.added.get("agent"):
        engine.governor.forget_profiles()  # an agent looked up while the import was uncommitted is known now
    report.seconds = time.perf_counter() - started
    say(f"imported {work.written} memories ({sum(report.skipped.values())} records already here)")
    return report


async def _write_all(
    work: _Restore, lines: Iterable[str], where: str, plan: Plan, bulk: bool | None, batch: int | None
) -> None:
    """The import's writes, from its second reading of the file, which must read as its first did."""
    digest = Digest()
    stream = records(lines, where, digest)
    header = next(stream)
    work.vectors_fit = bool(header.get("with_embeddings")) and header.get("embedding_dim") == work.engine.embedder.dim
    work.bulk = work.vectors_fit if bulk is None else bulk
    if work.bulk and batch is None:
        work.batch = staged.BATCH
    links: list[dict[str, Any]] = []
    judgments: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    ended = None
    record = next(stream, None)
    while record is not None:
        kind = record["type"]
        counts[kind] = counts.get(kind, 0) + 1
        following = next(stream, None)
        if kind in ("agent", "namespace", "grant", "entity"):
            await work.small(record)
        elif kind == "memory":
            following = await work.memories(checks.chained(following, stream, counts), record)
        elif kind == "mention":
            work.mentions.append((uuid.UUID(record["memory_id"]), uuid.UUID(record["entity_id"])))
        elif kind == "link":
            links.append(record)
        elif kind == "judgment":
            judgments.append(record)
        elif kind == "action":
            held.append(record)
        elif kind == "end":
            ended = record
            counts.pop("end")
        else:
            raise InputError(f"{where} has a record of unknown type {kind!r} ({NOTHING})")
        record = following
    if ended is None or counts != plan.counts or digest.hexdigest() != plan.digest:
        raise InputError(f"{where} changed while it was imported ({NOTHING})", hint="import it again once it is whole")
    await work.finish(links, judgments, held)
