"""The write pipeline (SPEC §4.1): validate, embed, compare with neighbours, decide, score, store.

Everything a batch writes happens in one transaction, after every text was embedded: a bad item
or an embedder failure anywhere writes nothing. Writers to one namespace are serialised by an
advisory lock, so two agents writing the same fact at once produce one memory and one NOOP.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import UTC

from cabrain import failpoints, namespaces
from cabrain.clock import Clock, utc_now
from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.redact import redact, redact_deep
from cabrain.store import access, requests
from cabrain.store import namespaces as namespace_sql
from cabrain.text import entities as entity_extraction
from cabrain.types import MemoryInput, RetainResult
from cabrain.write import threads
from cabrain.write.item import Item
from cabrain.write.llm import llm_decide, llm_entities
from cabrain.write.neighbours import deterministic, neighbours_of, origin
from cabrain.write.vectors import memory_vectors, passages_of
from cabrain.write.writer import Writer


async def _consult_chat_model(engine: Engine, agent: str, items: list[Item], decide_writes: bool) -> None:
    """Ask the chat model - slow - before the write transaction, so no lock waits on it. The
    transaction uses a planned decision only if the neighbours it was made against are unchanged."""
    settings = engine.settings
    use_decider = decide_writes and settings.write_decider in ("auto", "llm")
    use_extractor = settings.entity_extractor in ("auto", "llm")
    limit = asyncio.Semaphore(4)

    chat = engine.chat
    assert chat is not None, "consulted only when a chat model is configured"

    async def consult(item: Item) -> None:
        async with limit:
            if use_decider:
                async with engine.pool.acquire() as conn:
                    neighbours = await neighbours_of(conn, engine, agent, item)
                fallback = deterministic(settings, item, neighbours)
                item.planned = await llm_decide(chat, item.content, neighbours, fallback, origin(settings, item))
                item.planned_against = tuple(n.id for n in neighbours)
            if use_extractor:
                item.entities = await llm_entities(chat, item.content, entity_extraction.extract(item.content))

    await asyncio.gather(*(consult(item) for item in items))


def validate(
    items: Sequence[MemoryInput],
    *,
    max_chars: int,
    max_batch: int,
    max_metadata_bytes: int = 16384,
    redact_secrets: bool = True,
    clock: Clock = utc_now,
) -> list[Item]:
    """Check every item before anything is embedded or written; raise :class:`InputError`. With
    ``redact_secrets``, what is stored has its secrets and ``<private>`` blocks removed
    (:mod:`cabrain.redact`), content and metadata alike. An item without ``valid_at`` happened at
    ``clock()``."""
    if not items:
        raise InputError("nothing to retain: the batch is empty")
    if len(items) > max_batch:
        raise InputError(
            f"a batch holds at most {max_batch} memories, got {len(items)}",
            hint="split it, or raise CABRAIN_MAX_BATCH",
        )
    checked = []
    for index, item in enumerate(items):
        where = f"item {index}" if len(items) > 1 else "the memory"
        content = item.content
        if not isinstance(content, str) or not content.strip():
            raise InputError(f"{where}: content is empty")
        if len(content) > max_chars:
            raise InputError(
                f"{where}: content is {len(content)} characters, the limit is {max_chars}",
                hint="split it into smaller memories, or raise CABRAIN_MAX_CONTENT_CHARS",
            )
        if "\x00" in content:
            raise InputError(f"{where}: content contains a NUL character")
        try:
            encoded = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(
                f"{where}: content is not valid UTF-8 (unpaired surrogate at position {exc.start})"
            ) from None
        if not namespaces.is_valid(item.namespace):
            raise InputError(f"{where}: namespace {item.namespace!r} is not valid", hint=namespaces.HINT)
        if item.importance is not None and not 0.0 <= item.importance <= 1.0:
            raise InputError(f"{where}: importance must be between 0 and 1, got {item.importance}")
        try:
            size = len(json.dumps(dict(item.metadata), ensure_ascii=False).encode("utf-8"))
        except (TypeError, ValueError, UnicodeEncodeError) as exc:
            raise InputError(f"{where}: metadata must be JSON-serialisable ({exc})") from None
        if size > max_metadata_bytes:
            raise InputError(
                f"{where}: metadata is {size} bytes as JSON, the limit is {max_metadata_bytes}",
                hint="keep metadata to short provenance fields (it comes back with every hit), "
                "or raise CABRAIN_MAX_METADATA_BYTES",
            )
        threads.check(item.metadata, where)
        if redact_secrets:
            content = redact(content)
            encoded = content.encode("utf-8")
            if item.metadata:
                redacted = redact_deep(dict(item.metadata))
                assert isinstance(redacted, dict)
                item = dataclasses.replace(item, metadata=redacted)
        valid_at = item.valid_at or clock()
        if valid_at.tzinfo is None:
            valid_at = valid_at.replace(tzinfo=UTC)
        checked.append(Item(item, content, valid_at, hashlib.sha256(encoded).digest()))
    return checked


async def retain(
    engine: Engine,
    agent: str,
    inputs: Sequence[MemoryInput],
    *,
    decide_writes: bool = True,
    supersede: uuid.UUID | None = None,
    supersede_origin: str = "correction",
    idempotency_key: str | None = None,
    request: bytes | None = None,
) -> list[RetainResult]:
    """Write ``inputs``; with ``supersede``, the (single) new memory replaces that one (a judgment of
    ``supersede_origin``: "person" makes it a person's correction). With an
    ``idempotency_key``, a call already answered under that key is answered again and writes
    nothing (:mod:`cabrain.store.requests`); ``request`` is what the caller was asked, as a digest
    (default: ``inputs`` and the options)."""
    settings = engine.settings
    asked = b""  # what was asked, as a digest: only a keyed call needs it
    if idempotency_key is not None:
        requests.check_key(idempotency_key)
        asked = request or requests.fingerprint(inputs, decide=decide_writes, supersede=supersede)
        async with engine.pool.acquire() as conn:
            done = await requests.answered(conn, agent, idempotency_key, asked)
        if done is not None:
            return done
    items = validate(
        inputs,
        max_chars=settings.max_content_chars,
        max_batch=settings.max_batch,
        max_metadata_bytes=settings.max_metadata_bytes,
        redact_secrets=settings.redact_secrets,
        clock=engine.clock,
    )
    targets = sorted({i.input.namespace for i in items})
    async with engine.pool.acquire() as conn:  # fail fast, before any embedding
        for namespace in targets:
            await access.require_writer(conn, agent, namespace)
    for item in items:
        item.chunks = passages_of(engine, item.content)
    # A call larger than one embedder batch is written group by group while the next group embeds
    # (one transaction, so it stays all or nothing). The chat model, when there is one, is
    # consulted on the whole call before anything is locked, so it needs every vector first.
    groups = _groups(items, settings.embed_batch_size)
    pipelined = len(groups) > 1 and supersede is None and engine.chat is None
    if not pipelined:
        groups = [items]
    await _embed(engine, groups[0])
    if engine.chat is not None and supersede is None:
        await _consult_chat_model(engine, agent, items, decide_writes)
    results: list[RetainResult] = []
    async with engine.pool.acquire() as conn:
        async with conn.transaction():
            for namespace in targets:
                await namespace_sql.lock(conn, namespace)
                await access.require_writer(conn, agent, namespace)  # again, under the lock: authoritative
            if idempotency_key is not None:  # a twin of this call committed while this one embedded
                done = await requests.answered(conn, agent, idempotency_key, asked)
                if done is not None:
                    return done
            writer = Writer(engine, conn, agent)
            for index, group in enumerate(groups):
                following = asyncio.create_task(_embed(engine, groups[index + 1])) if index + 1 < len(groups) else None
                try:
                    if supersede is not None:
                        results.append(await writer.write_superseding(group[0], supersede, origin=supersede_origin))
                    elif decide_writes:
                        results.extend(await writer.write_batch(group))
                    else:
                        results.extend(await writer.write_many(group))
                except BaseException:
                    if following is not None:
                        following.cancel()
                        await asyncio.gather(following, return_exceptions=True)
                    raise
                if following is not None:
                    await following
            await writer.flush()  # the L1 cache's generation of each namespace moved with the rows (schema 0009)
            if idempotency_key is not None:
                await requests.save(
                    conn, agent, idempotency_key, asked, results, now=engine.clock(), ttl_s=settings.idempotency_ttl_s
                )
        await failpoints.drop("retain.after_commit", conn, targets)  # tests: a connection lost after the commit
    return results


def _groups(items: list[Item], batch: int) -> list[list[Item]]:
    """Consecutive items holding about ``batch`` texts each (an item's passages count)."""
    groups: list[list[Item]] = [[]]
    texts = 0
    for item in items:
        size = 1 + len(item.chunks)
        if groups[-1] and texts + size > batch:
            groups.append([])
            texts = 0
        groups[-1].append(item)
        texts += size
    return groups


async def _embed(engine: Engine, items: list[Item]) -> None:
    """Give ``items`` their vectors and their passages' vectors (:mod:`cabrain.write.vectors`)."""
    done = await memory_vectors(engine, [i.content for i in items], passages=[i.chunks for i in items])
    for item, (vector, _, theirs) in zip(items, done, strict=True):
        item.embedding = vector
        item.chunk_embeddings = theirs
