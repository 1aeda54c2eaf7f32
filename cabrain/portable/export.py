"""A portable export of namespaces: JSON Lines, one record per line, each with its ``type``.

    {"type": "cabrain-export", "format": 1, "exported_at": ..., "namespaces": [...], ...}
    {"type": "agent", ...}        every agent the records name, with its role and caps (no keys:
                                  those never leave)
    {"type": "namespace", ...}
    {"type": "grant", ...}        who may read and write each namespace, as granted and accepted
    {"type": "entity", ...}
    {"type": "memory", ...}       every memory, current or not, hot or archived, oldest first: its
                                  content, classification, provenance, validity, supersession,
                                  salience and use, pinning, metadata, and where forgotten, when
                                  and why; the vector only with ``with_embeddings``
    {"type": "mention", ...}      a memory names an entity
    {"type": "link", ...}         a memory was distilled from or merged with others
    {"type": "judgment", ...}     every automatic judgment, so an imported brain can still undo them
    {"type": "action", ...}       every action a role held on the namespaces, decided or not
    {"type": "end", "counts": {...}, "sha256": ...}
                                  the counts of each type and the SHA-256 of every line before it
                                  (:class:`Digest`): an export cut short, or a line of it changed, is
                                  refused whole (an export written before the digest has only counts)

An export made for an agent (its namespaces' owner, or an admin: :class:`cabrain.portable.facade.Portable`)
holds only what that agent may read: another agent's ``private`` memories are left out, and so is
everything that would tell of them (their mentions, links and judgments, an entity only they
mention, a summary made from them). The operator's export on the database holds everything.

Everything hot is read in one repeatable-read transaction, so the export is one consistent moment
of the hot tier; archived memories are read from the cold tier after it. Rows are turned into JSON
by PostgreSQL (``to_jsonb``) and streamed to the file without being parsed here. Progress: the
memories written, of about how many the namespaces hold (:mod:`cabrain.progress`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import asyncpg

from cabrain import __version__
from cabrain.engine import Engine
from cabrain.progress import Say, Tracker, as_progress
from cabrain.store import portable as sql

__all__ = ["FORMAT", "Digest", "ExportReport", "export"]

FORMAT = 1


@dataclass
class ExportReport:
    namespaces: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Digest:
    """The SHA-256 of an export's lines before its end record, as the end record keeps it: each line's
    UTF-8 and one newline (the line ends a copy may have changed to CRLF do not count; blank lines
    are not lines)."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()

    def add(self, line: str) -> None:
        self._sha.update(line.rstrip("\r\n").encode("utf-8", "surrogatepass"))
        self._sha.update(b"\n")

    def add_bytes(self, data: bytes) -> None:
        """Lines already in UTF-8, each with its newline (and no ``\\r`` before it)."""
        self._sha.update(data)

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


SAY_EVERY = 256  # memories between two updates of the progress (a bar's redraw costs more than a line)


FLUSH_BYTES = 1 << 20  # lines are digested and written a megabyte at a time


class _Out:
    """Lines to the file, counted by type and digested. The database's lines arrive as UTF-8 bytes
    and stay bytes: digested and written to a UTF-8 file's buffer as they came, a megabyte at a time,
    never decoded and encoded again (an export with vectors is half a gigabyte a 100,000 memories);
    a stream of another kind takes them as text. A line is JSON: no line break of its own."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.counts: dict[str, int] = {}
        self.digest = Digest()
        self.tracker = Tracker()
        buffer, encoding = getattr(out, "buffer", None), str(getattr(out, "encoding", "") or "")
        self._binary: IO[bytes] | None = buffer if encoding.lower().replace("-", "") == "utf8" else None
        if self._binary is not None:
            out.flush()  # what its text layer holds goes first
        self._lines: list[bytes] = []
        self._size = 0

    def write(self, kind: str, line: bytes) -> None:
        self._lines.append(line)
        self._size += len(line)
        if self._size >= FLUSH_BYTES:
            self.flush()
        n = self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind == "memory" and n % SAY_EVERY == 0:
            self.tracker.update(n)

    def record(self, value: dict[str, Any]) -> None:
        self.write(value["type"], json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))

    def flush(self, *, digest: bool = True) -> None:
        """Digest and write the lines that wait."""
        if not self._lines:
            return
        self._lines.append(b"")
        blob = b"\n".join(self._lines)
        self._lines, self._size = [], 0
        if digest:
            self.digest.add_bytes(blob)
        if self._binary is not None:
            self._binary.write(blob)
        else:
            self.out.write(blob.decode("utf-8", "surrogatepass"))

    def close(self) -> None:
        """Write what waits, and flush the file's buffer."""
        self.flush(digest=False)
        if self._binary is not None:
            self._binary.flush()


async def _stream(conn: asyncpg.Connection, out: _Out, kind: str, query: str, *args: Any) -> None:
    """The query's rows (one JSON text each) to ``out``, as the UTF-8 bytes the server sends."""
    async for row in conn.cursor(sql.as_utf8(query), *args, prefetch=5000):
        out.write(kind, row[0])


async def export(
    engine: Engine,
    namespaces: Sequence[str],
    out: IO[str],
    *,
    agent: str | None = None,
    with_embeddings: bool = False,
    archived: bool = True,
    progress: Say | None = None,
) -> ExportReport:
    """Write ``namespaces`` to ``out`` (a text file), as ``agent`` may read them (None: everything,
    the operator's). Who may export which namespace is the caller's to check."""
    started = time.perf_counter()
    names = sorted(set(namespaces))
    say = as_progress(progress)
    sink = _Out(out)
    sink.record(
        {
            "type": "cabrain-export",
            "format": FORMAT,
            "cabrain": __version__,
            "exported_at": engine.clock().isoformat(),
            "namespaces": names,
            "embedding_model": engine.settings.embedding_model,
            "embedding_dim": engine.embedder.dim,
            "with_embeddings": with_embeddings,
        }
    )
    cold_ids: dict[str, list[asyncpg.Record]] = {}
    async with engine.read_pool().acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        # about how many: the hot rows (another agent's private ones among them), the archived added below
        sink.tracker = say.track("exporting memories", await conn.fetchval(sql.EXPORT_HOT_SIZE, names), "memories")
        await _stream(conn, sink, "agent", sql.EXPORT_AGENTS, names)
        await _stream(conn, sink, "namespace", sql.EXPORT_NAMESPACES, names)
        await _stream(conn, sink, "grant", sql.EXPORT_GRANTS, names)
        await _stream(conn, sink, "entity", sql.EXPORT_ENTITIES, names, agent)
        for name in names:
            await _stream(
                conn,
                sink,
                "memory",
                sql.EXPORT_MEMORIES_WITH_VECTORS if with_embeddings else sql.EXPORT_MEMORIES,
                name,
                agent,
            )
            if archived:
                cold_ids[name] = await conn.fetch(sql.EXPORT_COLD_IDS, name, agent)
                sink.tracker.update(sink.counts.get("memory", 0), (sink.tracker.total or 0) + len(cold_ids[name]))
        await _stream(conn, sink, "mention", sql.EXPORT_MENTIONS, names, agent)
        await _stream(conn, sink, "link", sql.EXPORT_LINKS, names, agent)
        await _stream(conn, sink, "judgment", sql.EXPORT_JUDGMENTS, names, agent)
        await _stream(conn, sink, "action", sql.EXPORT_ACTIONS, names)
    for name, rows in cold_ids.items():
        if rows:
            await _archived(engine, name, rows, sink, with_embeddings)
    exported = sink.counts.get("memory", 0)
    sink.tracker.update(exported, exported)
    sink.tracker.close()
    sink.flush()  # every line before the end record digested
    sink.record({"type": "end", "counts": dict(sink.counts), "sha256": sink.digest.hexdigest()})
    sink.close()
    say(f"exported {exported} memories of {len(names)} namespace(s)")
    return ExportReport(names, dict(sink.counts), time.perf_counter() - started)


async def _archived(
    engine: Engine, namespace: str, rows: Sequence[asyncpg.Record], sink: _Out, with_embeddings: bool
) -> None:
    """The namespace's archived memories, as the cold tier keeps them (the newest copy of each)."""
    import asyncio

    import numpy as np

    from cabrain.store.cold import ROW_COLUMNS

    identity = {r["id"]: r for r in rows}
    columns = [*ROW_COLUMNS, "embedding"] if with_embeddings else list(ROW_COLUMNS)
    found = await asyncio.to_thread(engine.cold_tier().newest, namespace, sorted(identity))
    embeddings: dict[str, Any] = {}
    if with_embeddings:
        table = await asyncio.to_thread(
            engine.cold_tier().scan, namespace, ids=sorted(identity), columns=["id", "embedding"]
        )
        embeddings = dict(zip(table.column("id").to_pylist(), table.column("embedding").to_pylist(), strict=True))
    for memory_id in sorted(found, key=lambda i: (found[i]["valid_at"], i)):
        row = found[memory_id]
        record: dict[str, Any] = {"type": "memory", **{c: row.get(c) for c in columns if c in row}}
        record["metadata"] = json.loads(record["metadata"]) if isinstance(record.get("metadata"), str) else {}
        who = identity[memory_id]
        record |= {
            "tier": "cold",
            "forgotten_at": who["forgotten_at"],
            "forgotten_by": who["forgotten_by"],
            "forget_reason": who["forget_reason"],
        }
        for drop in ("valid_month", "demote_batch"):
            record.pop(drop, None)
        if with_embeddings and embeddings.get(memory_id) is not None:
            record["embedding"] = (
                "[" + ",".join(str(float(x)) for x in np.frombuffer(embeddings[memory_id], dtype=np.float32)) + "]"
            )
        sink.record(record)
