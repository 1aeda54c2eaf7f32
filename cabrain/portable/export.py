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
    {"type": "end", "counts": {...}}   the counts of each type: an export cut short is detected

An export made for an agent (its namespaces' owner, or an admin: :class:`cabrain.portable.facade.Portable`)
holds only what that agent may read: another agent's ``private`` memories are left out, and so is
everything that would tell of them (their mentions, links and judgments, an entity only they
mention, a summary made from them). The operator's export on the database holds everything.

Everything hot is read in one repeatable-read transaction, so the export is one consistent moment
of the hot tier; archived memories are read from the cold tier after it. Rows are turned into JSON
by PostgreSQL (``to_jsonb``) and streamed to the file without being parsed here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import asyncpg

from cabrain import __version__
from cabrain.engine import Engine
from cabrain.store.access import private_id_to_others, private_to_others

__all__ = ["FORMAT", "ExportReport", "export"]

FORMAT = 1

AGENTS = """
SELECT jsonb_build_object('type', 'agent', 'id', a.id, 'display_name', a.display_name, 'is_admin', a.is_admin,
                          'created_at', a.created_at, 'disabled_at', a.disabled_at, 'role', a.role,
                          'caps', (SELECT coalesce(jsonb_object_agg(c.op, c.per_day), '{}') FROM agent_caps c
                                   WHERE c.agent_id = a.id))::text
FROM agents a
WHERE a.id IN (SELECT owner_agent_id FROM namespaces WHERE name = ANY($1)
               UNION SELECT agent_id FROM namespace_grants WHERE namespace = ANY($1)
               UNION SELECT granted_by FROM namespace_grants WHERE namespace = ANY($1)
               UNION SELECT DISTINCT owner_agent_id FROM memory_ids WHERE namespace = ANY($1)
               UNION SELECT agent_id FROM pending_actions WHERE namespace = ANY($1))
ORDER BY a.id
"""
NAMESPACES = """
SELECT jsonb_build_object('type', 'namespace', 'name', name, 'owner_agent_id', owner_agent_id,
                          'created_at', created_at, 'metadata', metadata)::text
FROM namespaces WHERE name = ANY($1) ORDER BY name
"""
GRANTS = """
SELECT (jsonb_build_object('type', 'grant') || to_jsonb(g))::text
FROM namespace_grants g WHERE namespace = ANY($1) ORDER BY namespace, agent_id
"""
# $2: the agent the export is for (NULL: the operator's, everything)
ENTITIES = f"""
SELECT (jsonb_build_object('type', 'entity') || to_jsonb(e)
        || CASE WHEN EXISTS (SELECT 1 FROM unnest(e.summary_sources) s(id) WHERE {private_id_to_others("s.id", "$2")})
                THEN jsonb_build_object('summary', NULL, 'summary_sources', '{{}}'::uuid[], 'summarized_at', NULL)
                ELSE '{{}}'::jsonb END)::text
FROM entities e WHERE namespace = ANY($1)
  AND ($2::text IS NULL OR NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id)
       OR EXISTS (SELECT 1 FROM memory_entities me
                  WHERE me.entity_id = e.id AND NOT {private_id_to_others("me.memory_id", "$2")}))
ORDER BY namespace, id
"""
# Every column a memory row has, but its vector (optional), its content hash (recomputed) and its tier
# (said apart): named one by one, because json_build_object over named columns costs a third of
# to_jsonb over the row (which turns the vector into text first). tests/integration/test_portable.py
# holds this list to the table's columns.
MEMORY_COLUMNS = (
    "id", "namespace", "owner_agent_id", "visibility", "network", "memory_type", "content", "source_kind",
    "source_ref", "importance", "access_count", "last_accessed_at", "created_at", "valid_at", "invalid_at",
    "superseded_by", "metadata", "pinned", "thread_turn", "consolidated_at", "decayed_at",
)  # fmt: skip
_PAIRS = ", ".join(f"'{c}', m.{c}" for c in MEMORY_COLUMNS)
# every hot row, oldest first, with what its identity records when it was forgotten (few rows: hashed)
MEMORIES = f"""
SELECT json_build_object('type', 'memory', {_PAIRS}, 'tier', 'hot',
                         'forgotten_at', f.forgotten_at, 'forgotten_by', f.forgotten_by, 'forget_reason', f.forget_reason)::text
FROM memories m
LEFT JOIN (SELECT id, forgotten_at, forgotten_by, forget_reason FROM memory_ids
           WHERE namespace = $1 AND forgotten_at IS NOT NULL) f ON f.id = m.id
WHERE m.namespace = $1 AND NOT {private_to_others("m", "$2")}
ORDER BY m.valid_at, m.id
"""
MEMORIES_WITH_VECTORS = f"""
SELECT json_build_object('type', 'memory', {_PAIRS}, 'tier', 'hot',
                         'forgotten_at', f.forgotten_at, 'forgotten_by', f.forgotten_by, 'forget_reason', f.forget_reason,
                         'embedding', m.embedding::text)::text
FROM memories m
LEFT JOIN (SELECT id, forgotten_at, forgotten_by, forget_reason FROM memory_ids
           WHERE namespace = $1 AND forgotten_at IS NOT NULL) f ON f.id = m.id
WHERE m.namespace = $1 AND NOT {private_to_others("m", "$2")}
ORDER BY m.valid_at, m.id
"""
COLD_IDS = f"""
SELECT id::text, forgotten_at, forgotten_by, forget_reason, purged_at FROM memory_ids i
WHERE namespace = $1 AND tier = 'cold' AND NOT {private_id_to_others("i.id", "$2")}
"""
MENTIONS = f"""
SELECT jsonb_build_object('type', 'mention', 'memory_id', me.memory_id, 'entity_id', me.entity_id)::text
FROM memory_entities me JOIN entities e ON e.id = me.entity_id
WHERE e.namespace = ANY($1) AND NOT {private_id_to_others("me.memory_id", "$2")}
ORDER BY me.memory_id, me.entity_id
"""
LINKS = f"""
SELECT (jsonb_build_object('type', 'link') || to_jsonb(s))::text
FROM memory_sources s JOIN memory_ids i ON i.id = s.memory_id
WHERE i.namespace = ANY($1) AND NOT {private_id_to_others("s.memory_id", "$2")}
  AND NOT {private_id_to_others("s.source_id", "$2")}
ORDER BY s.memory_id, s.source_id, s.relation
"""
JUDGMENTS = f"""
SELECT (jsonb_build_object('type', 'judgment') || to_jsonb(j))::text
FROM judgments j WHERE namespace = ANY($1)
  AND NOT EXISTS (SELECT 1 FROM unnest(j.memory_ids) x(id) WHERE {private_id_to_others("x.id", "$2")})
ORDER BY created_at, id
"""

ACTIONS = """
SELECT (jsonb_build_object('type', 'action') || to_jsonb(p))::text
FROM pending_actions p WHERE namespace = ANY($1) ORDER BY requested_at, id
"""


@dataclass
class ExportReport:
    namespaces: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _Out:
    """Lines to the file, counted by type."""

    def __init__(self, out: IO[str], progress: Callable[[str], None], every_s: float) -> None:
        self.out, self.progress, self.every_s = out, progress, every_s
        self.counts: dict[str, int] = {}
        self._said = time.monotonic()

    def write(self, kind: str, line: str) -> None:
        self.out.write(line)
        self.out.write("\n")
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind == "memory" and time.monotonic() - self._said >= self.every_s:
            self._said = time.monotonic()
            self.progress(f"exported {self.counts['memory']} memories")

    def record(self, value: dict[str, Any]) -> None:
        self.write(value["type"], json.dumps(value, ensure_ascii=False, default=str))


async def _stream(conn: asyncpg.Connection, out: _Out, kind: str, query: str, *args: Any) -> None:
    async for row in conn.cursor(query, *args, prefetch=5000):
        out.write(kind, row[0])


async def export(
    engine: Engine,
    namespaces: Sequence[str],
    out: IO[str],
    *,
    agent: str | None = None,
    with_embeddings: bool = False,
    archived: bool = True,
    progress: Callable[[str], None] = lambda line: None,
    every_s: float = 5.0,
) -> ExportReport:
    """Write ``namespaces`` to ``out`` (a text file), as ``agent`` may read them (None: everything,
    the operator's). Who may export which namespace is the caller's to check."""
    started = time.perf_counter()
    names = sorted(set(namespaces))
    sink = _Out(out, progress, every_s)
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
    async with engine.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        await _stream(conn, sink, "agent", AGENTS, names)
        await _stream(conn, sink, "namespace", NAMESPACES, names)
        await _stream(conn, sink, "grant", GRANTS, names)
        await _stream(conn, sink, "entity", ENTITIES, names, agent)
        for name in names:
            await _stream(conn, sink, "memory", MEMORIES_WITH_VECTORS if with_embeddings else MEMORIES, name, agent)
            if archived:
                cold_ids[name] = await conn.fetch(COLD_IDS, name, agent)
        await _stream(conn, sink, "mention", MENTIONS, names, agent)
        await _stream(conn, sink, "link", LINKS, names, agent)
        await _stream(conn, sink, "judgment", JUDGMENTS, names, agent)
        await _stream(conn, sink, "action", ACTIONS, names)
    for name, rows in cold_ids.items():
        if rows:
            await _archived(engine, name, rows, sink, with_embeddings)
    sink.record({"type": "end", "counts": dict(sink.counts)})
    progress(f"exported {sink.counts.get('memory', 0)} memories of {len(names)} namespace(s)")
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
