"""The write transaction of the write pipeline (:mod:`cabrain.write.retain`): for each item, its
neighbours, the decision (ADD / UPDATE / INVALIDATE / NOOP), its importance and entities, and the
rows - memories, passages, keyword postings, entity links, judgments and events - written in the
caller's transaction under the namespaces' writer locks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np

from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.store import entities as entity_sql
from cabrain.store import judgments
from cabrain.store import memories as sql
from cabrain.store import vector as vector_sql
from cabrain.store.keyword import IndexedDoc
from cabrain.store.sleep import NOW
from cabrain.text import entities as entity_extraction
from cabrain.types import Decision, RetainResult
from cabrain.write.decision import Neighbour, WriteDecision
from cabrain.write.item import Item
from cabrain.write.neighbours import deterministic, neighbours_of
from cabrain.write.neighbours import origin as origin_of_item
from cabrain.write.salience import importance as score_importance
from cabrain.write.threads import Place, ThreadContext

REINFORCE_STEP = 0.05


@dataclass
class _Pending:
    """New memories of a batch not yet written (see :meth:`Writer.write_batch`)."""

    rows: list[dict] = field(default_factory=list)
    docs: list[IndexedDoc] = field(default_factory=list)
    chunks: list[tuple] = field(default_factory=list)
    links: dict[str, list[tuple[uuid.UUID, list[str]]]] = field(default_factory=dict)
    invalidations: list[tuple[uuid.UUID, WriteDecision, uuid.UUID, str]] = field(default_factory=list)

    def add(
        self, agent: str, item: Item, memory_id: uuid.UUID, importance: float, names: list[str], place: Place
    ) -> None:
        inp = item.input
        metadata = dict(inp.metadata)
        if place.sitting is not None:
            metadata["sitting"] = place.sitting
        self.rows.append(
            {
                "id": memory_id,
                "namespace": inp.namespace,
                "owner_agent_id": agent,
                "visibility": inp.visibility.value,
                "network": inp.network.value,
                "memory_type": inp.memory_type.value,
                "content": item.content,
                "source_kind": inp.source_kind,
                "source_ref": inp.source_ref,
                "embedding": item.embedding,
                "importance": importance,
                "valid_at": item.valid_at,
                "metadata": metadata,
                "content_hash": item.content_hash,
                "pinned": inp.important,
                "thread_turn": place.turn,
            }
        )
        self.docs.append(IndexedDoc(memory_id, inp.namespace, item.valid_at, item.content, place.context))
        self.chunks.extend(_chunk_rows(memory_id, item))
        if names:
            self.links.setdefault(inp.namespace, []).append((memory_id, names))


class Writer:
    """Writes one batch inside one transaction; later items see the earlier ones."""

    def __init__(self, engine: Engine, conn: asyncpg.Connection, agent: str) -> None:
        self.engine, self.conn, self.agent = engine, conn, agent
        self.settings = engine.settings
        self.events: list[dict] = []
        self._pending = _Pending()  # new memories not yet written (flushed in bulk)
        # Across the write_batch calls of one transaction (a call written group by group): what
        # searches on other connections cannot see yet - the memories this transaction wrote and
        # those it invalidated.
        self._gone: set[uuid.UUID] = set()
        self._txn_now: datetime | None = None
        self._written: list[tuple[Neighbour, str, np.ndarray]] = []
        self._threads = ThreadContext(
            conn,
            turns=self.settings.thread_context_turns,
            chars=self.settings.thread_context_chars,
            gap_s=self.settings.sitting_gap_s,
        )

    async def _place(self, item: Item) -> Place:  # its turn, sitting and context (cabrain.write.threads)
        i = item.input
        return await self._threads.place(
            i.namespace, self.agent, i.visibility.value, i.metadata, item.content, item.valid_at
        )

    async def _known_keys(self, namespace: str, text: str) -> set[str]:
        phrases = entity_extraction.phrases(text)
        if not phrases:
            return set()
        rows = await self.conn.fetch(entity_sql.KNOWN_ENTITY_KEYS, namespace, list(phrases))
        return {r["key"] for r in rows}

    def _importance(self, item: Item, nearest: float | None, *, revision: bool = False) -> float:
        """The caller's importance, or the one scored at write time."""
        inp = item.input
        if inp.importance is not None:
            return inp.importance
        return score_importance(
            text=item.content,
            nearest_similarity=nearest,
            source_kind=inp.source_kind,
            valid_at=item.valid_at,
            flagged=inp.important,
            revision=revision,
            source_weights=self.settings.source_weights,
            novelty_floor=self.settings.novelty_floor,
            now=self.engine.clock(),
        )

    async def write_superseding(self, item: Item, target: uuid.UUID, *, origin: str = "correction") -> RetainResult:
        """Reconsolidation: ``item`` replaces ``target``, which must still be current (locked here).
        ``origin`` "person": a person's correction (a judgment of kind ``correction`` whose revert
        also takes the new version out of recall)."""
        if not await self.conn.fetchval(sql.CURRENT_FOR_UPDATE, target):
            raise InputError(f"memory {target} was superseded or forgotten meanwhile", hint="get it and retry")
        why = item.input.metadata.get("reason")
        ns, reason = (
            item.input.namespace,
            f"corrected by the caller: {why}" if why else "reconsolidated: corrected by the caller",
        )
        if origin == "person":  # a person's correction: their words, or what it is
            reason = str(why) if why else "corrected by a person"
        importance = self._importance(item, None, revision=True)
        memory_id = uuid.uuid4()
        names = entity_extraction.extract(item.content, await self._known_keys(ns, item.content))
        self._pending.add(self.agent, item, memory_id, importance, names, await self._place(item))
        self._pending.invalidations.append((target, WriteDecision(Decision.UPDATE, target, reason), memory_id, origin))
        await self._flush_pending()
        self.events.append(self._event(ns, "reconsolidate", target, {"superseded_by": str(memory_id)}))
        self.events.append(
            self._event(ns, "retain", memory_id, {"decision": Decision.UPDATE.value, "importance": importance})
        )
        return RetainResult(Decision.UPDATE, memory_id, importance, (target,), tuple(names), reason)

    async def write_batch(self, items: list[Item]) -> list[RetainResult]:
        """Decide and write a batch as :meth:`write` would item by item - each item compared with
        the stored memories *and* the batch's earlier items - in a few statements per batch.

        The namespaces are locked, so what is committed cannot change meanwhile: every item's
        stored neighbours are searched at once, on several pooled connections (the HNSW walks
        use every core), then the decisions are made in order, the batch's own earlier items
        and supersessions folded in exactly. Rows are written in bulk, flushed before any
        statement that touches an earlier item of the batch. Called again in the same transaction
        (a call written group by group), it decides as if the groups were one batch."""
        searched = await self._search_all(items)
        exact: dict[tuple, uuid.UUID] = {}
        for namespace in sorted({i.input.namespace for i in items}):
            rows = await self.conn.fetch(
                sql.FIND_EXACT_MANY,
                namespace,
                [i.content_hash for i in items if i.input.namespace == namespace],
                self.agent,
            )
            for row in rows:
                exact.setdefault(_stored_key(namespace, row), row["id"])
        gone = self._gone  # invalidated by this transaction
        written = self._written  # this transaction's new memories
        known: dict[str, set[str]] = {}  # entity keys per namespace, stored or made by this batch
        for namespace in sorted({i.input.namespace for i in items}):
            phrases = set().union(
                *(entity_extraction.phrases(i.content) for i in items if i.input.namespace == namespace)
            )
            rows = await self.conn.fetch(entity_sql.KNOWN_ENTITY_KEYS, namespace, list(phrases)) if phrases else []
            known[namespace] = {r["key"] for r in rows}
        results = []
        for item, stored in zip(items, searched, strict=True):
            inp, ns = item.input, item.input.namespace
            key = exact_key(item)
            target = exact.get(key)
            if target is not None and target not in gone:
                await self._flush_pending()
                results.append(
                    await self._reinforce(item, target, "the same content from the same source is already stored")
                )
                continue
            neighbours = await self._batch_neighbours(item, stored, gone, written)
            if item.planned is not None and tuple(n.id for n in neighbours) == item.planned_against:
                choice = item.planned
            else:
                choice = deterministic(self.settings, item, neighbours)
            if choice.decision is Decision.NOOP:
                await self._flush_pending()
                assert choice.target is not None, "a NOOP names what it reinforces"
                results.append(await self._reinforce(item, choice.target, choice.reason))
                continue
            if choice.decision is Decision.INVALIDATE and choice.target is not None:
                await self._flush_pending()
                results.append(await self._retract(item, choice))
                gone.add(choice.target)
                continue
            importance = self._importance(
                item, neighbours[0].similarity if neighbours else None, revision=choice.decision is Decision.UPDATE
            )
            memory_id = uuid.uuid4()
            exact[key] = memory_id
            names = entity_extraction.extract(item.content, known[ns])
            if item.entities is not None:  # the chat model's, plus known entities it may have missed
                names = list(dict.fromkeys([*item.entities, *names]))[: entity_extraction.MAX_ENTITIES]
            known[ns].update(entity_extraction.entity_key(n) for n in names)
            self._pending.add(self.agent, item, memory_id, importance, names, await self._place(item))
            superseded: tuple[uuid.UUID, ...] = ()
            if choice.decision is Decision.UPDATE and choice.target is not None:
                self._pending.invalidations.append((choice.target, choice, memory_id, "write"))
                gone.add(choice.target)
                superseded = (choice.target,)
                self.events.append(self._event(ns, "reconsolidate", choice.target, {"superseded_by": str(memory_id)}))
            self.events.append(
                self._event(ns, "retain", memory_id, {"decision": choice.decision.value, "importance": importance})
            )
            vector = np.asarray(item.embedding, dtype=np.float32)
            written.append(
                (
                    Neighbour(memory_id, item.content, 0.0, inp.visibility.value, origin_of_item(self.settings, item)),
                    ns,
                    vector / (np.linalg.norm(vector) or 1.0),
                )
            )
            results.append(
                RetainResult(choice.decision, memory_id, importance, superseded, tuple(names), choice.reason)
            )
        await self._flush_pending()
        return results

    async def _search_all(self, items: list[Item]) -> list[list[Neighbour]]:
        """Every item's stored neighbours (with room for the batch's supersessions), searched at
        once on up to ``retain_search_connections`` pooled connections besides this one."""
        limit = self.settings.neighbours * 2
        sizes = {
            ns: await self.conn.fetchval(sql.NAMESPACE_SIZE, ns) or 0
            for ns in sorted({i.input.namespace for i in items})
        }
        total = await self.conn.fetchval(vector_sql.GRAPH_SIZE) or 0  # once for the batch, not per search

        async def search(conn: asyncpg.Connection, item: Item) -> list[Neighbour]:
            return await neighbours_of(conn, self.engine, self.agent, item, limit, sizes[item.input.namespace], total)

        parallel = min(self.settings.retain_search_connections, self.settings.db_pool_max - 1, len(items))
        if parallel < 1:
            return [await search(self.conn, item) for item in items]
        gate, own = asyncio.Semaphore(parallel), asyncio.Lock()

        async def one(item: Item) -> list[Neighbour]:
            async with gate:
                try:
                    conn = await self.engine.pool.acquire(timeout=0.05)
                except TimeoutError:  # the pool is busy (maybe with writers waiting for
                    async with own:  # this batch's lock): search on the transaction's connection
                        return await search(self.conn, item)
                try:
                    return await search(conn, item)
                finally:  # (without a timeout here, release would reuse the short one above)
                    await self.engine.pool.release(conn, timeout=self.settings.db_connect_timeout_s)

        return list(await asyncio.gather(*(one(item) for item in items)))

    async def _batch_neighbours(
        self, item: Item, stored: list[Neighbour], gone: set[uuid.UUID], written: list[tuple]
    ) -> list[Neighbour]:
        """The item's nearest: its stored neighbours less those this batch invalidated, and the
        batch's earlier new memories - what a search inside the transaction would return."""
        want = self.settings.neighbours
        alive = [n for n in stored if n.id not in gone]
        if len(stored) >= want * 2 and len(alive) < want:  # the batch superseded too many: search again
            await self._flush_pending()
            return await neighbours_of(self.conn, self.engine, self.agent, item, want)
        vector = np.asarray(item.embedding, dtype=np.float32)
        vector = vector / (np.linalg.norm(vector) or 1.0)
        seen = {n.id for n in alive}  # (a search on this transaction's connection sees its writes)
        own = [
            dataclasses.replace(n, similarity=float(np.dot(vector, v)))
            for n, ns, v in written
            if ns == item.input.namespace and n.id not in gone and n.id not in seen
        ]
        return sorted(alive + own, key=lambda n: (-n.similarity, str(n.id)))[:want]

    async def _flush_pending(self) -> None:
        """Write the batch's pending new memories (rows, postings, passages, entities) and then
        the supersessions that point at them."""
        pending = self._pending
        if not pending.rows:
            return
        self._pending = _Pending()
        new_rows = {r["id"]: r for r in pending.rows}
        await sql.insert_memories(self.conn, pending.rows)
        await self._threads.written(pending.rows)
        await self.engine.keyword.index(self.conn, pending.docs)
        await sql.insert_chunks(self.conn, pending.chunks)
        for namespace, links in sorted(pending.links.items()):
            await self._link_many(namespace, links)
        for target, choice, memory_id, origin in pending.invalidations:
            row = new_rows[memory_id]
            meta = {"superseded_reason": choice.reason, "superseded_by_agent": self.agent}
            await self._judge(row["namespace"], choice, target, memory_id, origin, row["content"], meta)

    async def _link_many(self, namespace: str, links: list[tuple[uuid.UUID, list[str]]]) -> None:
        by_key: dict[str, str] = {}
        pairs: set[tuple[uuid.UUID, str]] = set()
        for memory_id, names in links:
            for name in names:
                key = entity_extraction.entity_key(name)
                by_key.setdefault(key, name)
                pairs.add((memory_id, key))
        if not by_key:
            return
        keys = sorted(by_key)
        ordered = sorted(pairs, key=lambda p: (str(p[0]), p[1]))
        await self.conn.execute(
            entity_sql.UPSERT_AND_LINK,
            namespace,
            [by_key[k] for k in keys],
            keys,
            [p[0] for p in ordered],
            [p[1] for p in ordered],
        )

    async def write_many(self, items: list[Item]) -> list[RetainResult]:
        """Store every item as ADD without comparing it with neighbours (bulk imports): a few
        statements for the whole batch. Exact duplicates (:func:`exact_key`) are still stored once."""
        results: list[RetainResult | None] = [None] * len(items)
        fresh: list[tuple[int, Item]] = []
        duplicates: list[tuple[int, Item, uuid.UUID]] = []
        seen: dict[tuple, uuid.UUID] = {}
        for namespace in sorted({i.input.namespace for i in items}):
            rows = await self.conn.fetch(
                sql.FIND_EXACT_MANY,
                namespace,
                [i.content_hash for i in items if i.input.namespace == namespace],
                self.agent,
            )
            for row in rows:
                seen[_stored_key(namespace, row)] = row["id"]
        for index, item in enumerate(items):
            key = exact_key(item)
            if key in seen:
                duplicates.append((index, item, seen[key]))
                continue
            seen[key] = uuid.uuid4()
            fresh.append((index, item))
        for index, item in fresh:
            inp = item.input
            memory_id = seen[exact_key(item)]
            importance = self._importance(item, None)
            names = entity_extraction.extract(item.content)
            self._pending.add(self.agent, item, memory_id, importance, names, await self._place(item))
            self.events.append(self._event(inp.namespace, "retain", memory_id, {"decision": "ADD"}))
            results[index] = RetainResult(
                Decision.ADD, memory_id, importance, (), tuple(names), "imported without comparison"
            )
        await self._flush_pending()
        for index, item, target in duplicates:  # after the inserts: the target may be in this batch
            reason = "the same content from the same source is already stored"
            results[index] = await self._reinforce(item, target, reason)
        return [r for r in results if r is not None]

    async def _reinforce(self, item: Item, target: uuid.UUID, reason: str) -> RetainResult:
        await self.conn.execute(sql.REINFORCE, target, REINFORCE_STEP)
        importance = await self.conn.fetchval(sql.IMPORTANCE, target)
        self.events.append(self._event(item.input.namespace, "retain", target, {"decision": "NOOP"}))
        return RetainResult(Decision.NOOP, target, float(importance), (), (), reason)

    async def _retract(self, item: Item, choice: WriteDecision) -> RetainResult:
        """INVALIDATE: the new text only retracts the target; it is invalidated, nothing is stored."""
        target, reason = choice.target, choice.reason
        assert target is not None, "an INVALIDATE names what it retracts"
        meta = {"invalidated_reason": reason, "invalidated_by_agent": self.agent, "retraction": item.content}
        if not await self._judge(item.input.namespace, choice, target, None, "write", item.content, meta):
            raise InputError(f"memory {target} was superseded or forgotten meanwhile", hint="write it again")
        self.events.append(self._event(item.input.namespace, "forget", target, {"decision": "INVALIDATE", **meta}))
        return RetainResult(Decision.INVALIDATE, None, 0.0, (target,), (), reason)

    async def _now(self) -> datetime:
        """The transaction's time (what invalid_at has always been set to)."""
        if self._txn_now is None:
            self._txn_now = await self.conn.fetchval(NOW)
        return self._txn_now

    async def _judge(
        self,
        namespace: str,
        choice: WriteDecision,
        target: uuid.UUID,
        by: uuid.UUID | None,
        origin: str,
        text: str,
        metadata: dict,
    ) -> bool:
        """Supersede ``target`` by ``by`` (or invalidate it: ``by`` None) if it is still current, and
        record the judgment - a revision or retraction decided on write, or a caller's correction -
        with what it was made on."""
        inputs = {"decision": choice.decision.value, "text": text, "similarity": choice.similarity}
        if by is not None:
            inputs["new_memory_id"] = str(by)
        kind = "supersede" if by is not None else "invalidate"
        if origin == "person" and by is not None:
            kind = "correction"
        judgment = judgments.Judgment(namespace, kind, origin, choice.reason, agent_id=self.agent, inputs=inputs)
        if not await judgments.supersede(self.conn, judgment, target, by=by, metadata=metadata, now=await self._now()):
            return False
        if kind == "correction" and by is not None:
            await judgments.with_new_version(self.conn, judgment, by, await self._now())
        await judgments.record(self.conn, judgment)
        return True

    def _event(self, namespace: str, op: str, memory_id: uuid.UUID, metadata: dict) -> dict:
        return {"namespace": namespace, "op": op, "memory_id": memory_id, "agent_id": self.agent, "metadata": metadata}

    async def flush(self) -> None:
        await sql.insert_events(self.conn, self.events)


def exact_key(item: Item) -> tuple:
    """What makes a write "the same content from the same source" as a stored memory, which it then
    reinforces instead of being stored (NOOP): its namespace, text and ``source_ref``; and for a
    turn of a conversation (``metadata.speaker``: what one person said at one moment, see
    :mod:`cabrain.write.decision.origin`) also who said it, when, in which thread and as which part
    (``metadata.anchor``). So "ok" said by two people, or twice by one person, is two memories
    (a chat export's messages share their file as ``source_ref``), while the same message written
    again (a re-sync, a re-import) is still the memory it was."""
    inp = item.input
    return _key(inp.namespace, item.content_hash, inp.source_ref, inp.metadata, item.valid_at)


def _stored_key(namespace: str, row: asyncpg.Record) -> tuple:
    """:func:`exact_key` of a stored memory (a row of ``FIND_EXACT_MANY``)."""
    metadata = row["metadata"]
    if isinstance(metadata, str):  # jsonb, as text
        metadata = json.loads(metadata)
    return _key(namespace, bytes(row["content_hash"]), row["source_ref"], metadata, row["valid_at"])


def _key(
    namespace: str, content_hash: bytes, source_ref: str | None, metadata: Mapping[str, Any] | None, valid_at: datetime
) -> tuple:
    meta = metadata if isinstance(metadata, Mapping) else {}
    speaker = meta.get("speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        return (namespace, content_hash, source_ref)
    turn = (speaker.strip(), meta.get("thread"), meta.get("anchor"), valid_at.astimezone(UTC))
    return (namespace, content_hash, source_ref, *(str(part) for part in turn))


def _chunk_rows(memory_id: uuid.UUID, item: Item) -> list[tuple]:
    return [
        (memory_id, number, item.input.namespace, item.valid_at, text, vec)
        for number, (text, vec) in enumerate(zip(item.chunks, item.chunk_embeddings, strict=True))
    ]
