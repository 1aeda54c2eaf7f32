"""Browsing a namespace's hot memories: newest first (by ``valid_at``), filtered, a page at a time.

Pages are keyset pages: a cursor is the last row's ``valid_at`` and id, so a page costs the same
at the millionth row as at the first (``memories_browse``, schema 0013), and rows written while a
person pages do not shift the pages after. Scoping is recall's: :data:`cabrain.store.access.READABLE`.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from cabrain import edge
from cabrain.errors import InputError
from cabrain.store.access import ACCESS_CTE, READABLE
from cabrain.store.memories import COLUMNS
from cabrain.store.statement import Statement
from cabrain.text.tokenizer import query_terms
from cabrain.types import MemoryType, Network

MAX_LIMIT = 200
MAX_WORDS = 200  # characters of a search, a speaker or a thread
COUNT_CAP = 1000  # a narrowed list is counted up to this many ("more than 1,000")
SEARCH_COUNT_CAP = 200  # a searched one up to this many (each match is a row read)

# The rows a page may hold (every filter but the importance floor and the words).
WHERE_BROWSED = f"""
m.namespace = :namespace AND m.tier = 'hot'
  AND (:history::boolean OR m.invalid_at IS NULL OR m.invalid_at > :as_of::timestamptz)
  AND (:as_of::timestamptz IS NULL OR m.valid_at <= :as_of::timestamptz)
  AND (:networks::text[] IS NULL OR m.network = ANY(:networks::text[]))
  AND (:memory_types::text[] IS NULL OR m.memory_type = ANY(:memory_types::text[]))
  AND (:source_kinds::text[] IS NULL OR m.source_kind = ANY(:source_kinds::text[]))
  AND (:speaker::text IS NULL OR (m.metadata ? 'speaker' AND m.metadata ->> 'speaker' = :speaker::text))
  AND (:thread::text IS NULL OR (m.metadata ? 'thread' AND m.metadata ->> 'thread' = :thread::text))
  AND (:valid_from::timestamptz IS NULL OR m.valid_at >= :valid_from::timestamptz)
  AND (:valid_to::timestamptz IS NULL OR m.valid_at < :valid_to::timestamptz)
  AND (:after_at::timestamptz IS NULL OR (m.valid_at, m.id) < (:after_at::timestamptz, :after_id::uuid))
  AND {READABLE}
"""
# newest first after the keyset
BROWSED = f"""
FROM memories m
WHERE {WHERE_BROWSED}
ORDER BY m.valid_at DESC, m.id DESC
LIMIT :limit
"""
# With words: the memories keyword-indexed by every one of them (cabrain.store.keyword's postings,
# the BM25 index), found from the rarest word's strongest :window postings, then walked newest first
# (the postings carry valid_at): a posting whose memory lacks one of the other words is passed over in
# the index alone (memory_terms' key), and a row is read only for those that hold every word, until the
# page (or the count) is full. A
# filter, not a recall: nothing is scored, counted as a use or recorded.
SEARCHED = f"""
, rarest AS (
    SELECT t.term FROM unnest(:terms::text[]) AS t(term)
    LEFT JOIN bm25_terms b ON b.namespace = :namespace AND b.term = t.term
    ORDER BY coalesce(b.df, 0), t.term LIMIT 1
), found AS (
    SELECT p.memory_id, p.valid_at FROM rarest
    CROSS JOIN LATERAL (
        SELECT p.memory_id, p.valid_at FROM memory_terms p
        WHERE p.namespace = :namespace AND p.term = rarest.term
        ORDER BY p.impact DESC LIMIT :window
    ) p
)
SELECT {{columns}}
FROM (SELECT f.memory_id, f.valid_at FROM found f
      WHERE :after_at::timestamptz IS NULL OR (f.valid_at, f.memory_id) < (:after_at::timestamptz, :after_id::uuid)
      ORDER BY f.valid_at DESC, f.memory_id DESC
      OFFSET 0) k
CROSS JOIN LATERAL (
    SELECT m.* FROM memories m
    WHERE m.id = k.memory_id AND m.valid_at = k.valid_at AND {WHERE_BROWSED}
) m
WHERE NOT EXISTS (SELECT 1 FROM unnest(:terms::text[]) AS t(term), rarest WHERE t.term <> rarest.term
                  AND NOT EXISTS (SELECT 1 FROM memory_terms x WHERE x.memory_id = k.memory_id AND x.term = t.term))
ORDER BY k.valid_at DESC, k.memory_id DESC
LIMIT :limit
"""
SEARCH = Statement(f"WITH {ACCESS_CTE}" + SEARCHED.replace("{columns}", COLUMNS))
SEARCH_WINDOW = 1_000  # postings of the rarest word a search reads at most (its strongest: a bounded cost)
# At most :limit matching rows, counted (a bounded count: "more than 1,000"; a search's, "more than 200").
COUNT = Statement(f"WITH {ACCESS_CTE}\nSELECT count(*) FROM (SELECT 1 {BROWSED}) x")
COUNT_SEARCH = Statement(f"SELECT count(*) FROM (WITH {ACCESS_CTE}" + SEARCHED.replace("{columns}", "1") + ") x")
BROWSE = Statement(f"WITH {ACCESS_CTE}\nSELECT {COLUMNS}\n{BROWSED}")
# With an importance floor: the keys of the next :limit rows (a window) and whether each clears it.
# Importance has no index (decay rewrites it, and an index on it would make those updates leave
# the heap-only path), so a page reads at most a window and says where the next one starts.
WINDOW = Statement(
    f"WITH {ACCESS_CTE}\nSELECT m.id, m.valid_at, m.importance >= :min_importance::real AS clears\n{BROWSED}"
)
BY_KEYS = f"""
SELECT {COLUMNS} FROM memories m JOIN unnest($1::uuid[], $2::timestamptz[]) AS k(id, valid_at)
  ON m.id = k.id AND m.valid_at = k.valid_at
ORDER BY m.valid_at DESC, m.id DESC
"""
SCAN_WINDOW = 5000  # rows an importance-floored page reads at most


# Demoted memories (the cold tier keeps their rows; ``memory_ids`` their identity, owner and
# visibility), newest first: the same keyset, scoped as COLD_READABLE is.
ARCHIVED = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT i.id, i.valid_at, i.cold_batch, i.demoted_at, i.forgotten_at, i.forgotten_by, i.forget_reason,
       i.purged_at, i.owner_agent_id, i.visibility
FROM memory_ids i
WHERE i.namespace = :namespace AND i.tier = 'cold'
  AND (:history::boolean OR i.forgotten_at IS NULL)
  AND (:source_kinds::text[] IS NULL OR i.source_kind = ANY(:source_kinds::text[]))
  AND (:valid_from::timestamptz IS NULL OR i.valid_at >= :valid_from::timestamptz)
  AND (:valid_to::timestamptz IS NULL OR i.valid_at < :valid_to::timestamptz)
  AND (:after_at::timestamptz IS NULL OR (i.valid_at, i.id) < (:after_at::timestamptz, :after_id::uuid))
  AND (SELECT agent_ok FROM access)
  AND (i.visibility = 'global' OR i.owner_agent_id = :agent OR (i.visibility = 'team' AND (SELECT team_ok FROM access)))
ORDER BY i.valid_at DESC, i.id DESC
LIMIT :limit
"""
)


# A memory's use: the events about it (retained, forgotten, corrected...), and the recalls among the
# namespace's newest :window events that returned it, newest first.
ACCESS_HISTORY = """
(SELECT ts, op, agent_id FROM memory_events WHERE memory_id = $1)
UNION ALL
(SELECT ts, op, agent_id
 FROM (SELECT ts, op, agent_id, metadata FROM memory_events WHERE namespace = $2 ORDER BY ts DESC LIMIT $4) recent
 WHERE recent.op = 'recall' AND recent.metadata -> 'hits' ? $1::text)
ORDER BY ts DESC
LIMIT $3
"""


@dataclass(frozen=True)
class BrowseFilters:
    """What a page of memories is narrowed to; ``None`` (or empty) is no filter. ``history`` keeps
    superseded and forgotten memories too. ``as_of``: the memories as they stood then (valid at or
    before it, not yet superseded or forgotten then; with ``history``, every version valid by then);
    a naive time is UTC."""

    networks: tuple[Network, ...] = ()
    memory_types: tuple[MemoryType, ...] = ()
    source_kinds: tuple[str, ...] = ()
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    min_importance: float | None = None
    history: bool = False
    as_of: datetime | None = None
    # words every memory shown is keyword-indexed by (a filter over the BM25 index, not a recall)
    text: str | None = None
    # the speaker and the thread of a conversation's turns (``metadata.speaker``, ``metadata.thread``)
    speaker: str | None = None
    thread: str | None = None

    def __post_init__(self) -> None:
        for name in ("text", "speaker", "thread"):
            value = getattr(self, name)
            if value is not None and (not value.strip() or len(value) > MAX_WORDS):
                raise InputError(
                    f"{name} must be 1 to {MAX_WORDS} characters", hint=f"leave {name} empty for every memory"
                )
        if self.text is not None and self.min_importance is not None:
            raise InputError("a search and an importance floor do not go together", hint="leave one of them empty")
        if self.text is not None and not self.terms():
            raise InputError(
                f"{self.text!r} holds no word the keyword index keeps", hint="search for a word of the memories"
            )
        if self.as_of is not None:
            object.__setattr__(self, "as_of", edge.check_moment(self.as_of, "as_of"))
        if self.min_importance is not None and not 0.0 <= self.min_importance <= 1.0:
            raise InputError(f"min_importance must be between 0 and 1, got {self.min_importance}")
        if self.valid_from and self.valid_to and self.valid_from >= self.valid_to:
            raise InputError("valid_from must be before valid_to")

    def terms(self) -> list[str]:
        """The words searched for, as the keyword index keeps them (none without ``text``)."""
        return sorted(query_terms([self.text])) if self.text else []

    @property
    def narrowed(self) -> bool:
        """Whether anything but ``history`` narrows the list (else the kept counts answer its size)."""
        return any(
            (
                self.networks,
                self.memory_types,
                self.source_kinds,
                self.valid_from,
                self.valid_to,
                self.min_importance is not None,
                self.as_of,
                self.text,
                self.speaker,
                self.thread,
            )
        )


def cursor_of(valid_at: datetime, memory_id: uuid.UUID) -> str:
    """The cursor after a row: opaque to clients, stable across replicas."""
    return base64.urlsafe_b64encode(f"{valid_at.isoformat()}|{memory_id}".encode()).decode().rstrip("=")


def parse_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, _, ident = raw.partition("|")
        parsed = datetime.fromisoformat(at)
        if parsed.tzinfo is None:
            raise ValueError
        return parsed, uuid.UUID(ident)
    except (ValueError, UnicodeDecodeError):
        raise InputError(f"{cursor!r} is not a page cursor", hint="use a page's next_cursor as given") from None


def _limit(limit: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")


def _common(namespace: str, agent: str, filters: BrowseFilters, limit: int, cursor: str | None) -> dict[str, Any]:
    """The parameters both pages take: scope, history, source, time, the keyset and one row more."""
    after_at, after_id = parse_cursor(cursor) if cursor else (None, None)
    return {
        "namespace": namespace,
        "agent": agent,
        "history": filters.history,
        "source_kinds": list(filters.source_kinds) or None,
        "valid_from": filters.valid_from,
        "valid_to": filters.valid_to,
        "after_at": after_at,
        "after_id": after_id,
        "limit": limit + 1,
    }


def _next(rows: list[asyncpg.Record], limit: int) -> tuple[list[asyncpg.Record], str | None]:
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (cursor_of(rows[-1]["valid_at"], rows[-1]["id"]) if more and rows else None)


async def archived_page(
    conn: asyncpg.Connection,
    namespace: str,
    agent: str,
    filters: BrowseFilters,
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[asyncpg.Record], str | None]:
    """Up to ``limit`` demoted memories' identities after ``cursor``, newest first, and the next
    page's cursor. Their network, type and importance are in the cold rows: those filters are refused
    here rather than applied to a page after it was cut."""
    _limit(limit)
    if filters.as_of is not None:
        raise InputError(
            "the archive is browsed as it is: as_of looks at hot memories only",
            hint="leave as_of out, or browse the hot tier as of that time",
        )
    if filters.text or filters.speaker or filters.thread:
        raise InputError(
            "the archive is browsed by time and source; words, speakers and threads are searched in the hot tier",
            hint="search the archive with archive recall, or browse the hot tier",
        )
    if filters.networks or filters.memory_types or filters.min_importance is not None:
        raise InputError(
            "the archive is browsed by time and source; network, type and importance are not filters there",
            hint="leave them empty, or search the archive with archive recall",
        )
    args = ARCHIVED.args(_common(namespace, agent, filters, limit, cursor))
    return _next(list(await conn.fetch(ARCHIVED.sql, *args)), limit)


def _hot(namespace: str, agent: str, filters: BrowseFilters, limit: int, cursor: str | None) -> dict[str, Any]:
    """The parameters of a page of hot memories (WHERE_BROWSED's)."""
    return _common(namespace, agent, filters, limit, cursor) | {
        "networks": [n.value for n in filters.networks] or None,
        "memory_types": [t.value for t in filters.memory_types] or None,
        "as_of": filters.as_of,
        "speaker": filters.speaker,
        "thread": filters.thread,
    }


async def count(conn: asyncpg.Connection, namespace: str, agent: str, filters: BrowseFilters) -> tuple[int | None, int]:
    """How many hot memories the list narrowed by ``filters`` holds, counted up to a cap + 1 (more:
    there are more than the cap), and that cap (:data:`COUNT_CAP`; :data:`SEARCH_COUNT_CAP` for a
    search); ``None`` with an importance floor, which no index serves (a count could read the whole
    namespace). Unnarrowed lists are counted from the kept counts instead (:mod:`cabrain.store.overview`)."""
    if filters.min_importance is not None:
        return None, COUNT_CAP
    if filters.text:
        search = _hot(namespace, agent, filters, SEARCH_COUNT_CAP, None) | {
            "terms": filters.terms(),
            "window": SEARCH_WINDOW,
        }
        return int(await conn.fetchval(COUNT_SEARCH.sql, *COUNT_SEARCH.args(search))), SEARCH_COUNT_CAP
    common = _hot(namespace, agent, filters, COUNT_CAP, None)
    return int(await conn.fetchval(COUNT.sql, *COUNT.args(common))), COUNT_CAP


async def page(
    conn: asyncpg.Connection,
    namespace: str,
    agent: str,
    filters: BrowseFilters,
    *,
    limit: int,
    cursor: str | None,
    scan: int = SCAN_WINDOW,
) -> tuple[list[asyncpg.Record], str | None]:
    """Up to ``limit`` readable rows after ``cursor``, newest first, and the next page's cursor
    (``None`` on the last page). With an importance floor a page reads at most ``scan`` rows: it
    may hold fewer than ``limit`` (none, even) and still have a next page."""
    _limit(limit)
    common = _hot(namespace, agent, filters, limit, cursor)
    if filters.text:
        search = common | {"terms": filters.terms(), "window": SEARCH_WINDOW}
        rows = list(await conn.fetch(SEARCH.sql, *SEARCH.args(search)))
        return _next(rows, limit)
    if filters.min_importance is None:
        return _next(list(await conn.fetch(BROWSE.sql, *BROWSE.args(common))), limit)
    hits: list[asyncpg.Record] = []
    read, step, last = 0, max(limit * 4, 100), None
    while read < scan:  # windows that grow, until the page is full or ``scan`` rows were read
        size = min(step, scan - read)
        window = await conn.fetch(WINDOW.sql, *WINDOW.args(common, limit=size, min_importance=filters.min_importance))
        read += len(window)
        hits += [r for r in window if r["clears"]]
        if len(hits) > limit:  # a full page, and more after it
            hits, last = hits[:limit], hits[limit - 1]
            break
        if len(window) < size:  # the end of the list
            last = None
            break
        last = window[-1]  # the next window (or page) starts after this row
        common |= {"after_at": last["valid_at"], "after_id": last["id"]}
        step *= 2
    rows = list(await conn.fetch(BY_KEYS, [r["id"] for r in hits], [r["valid_at"] for r in hits])) if hits else []
    return rows, (cursor_of(last["valid_at"], last["id"]) if last is not None else None)


async def access_history(
    conn: asyncpg.Connection, namespace: str, memory_id: uuid.UUID, *, limit: int = 50, window: int = 5000
) -> list[asyncpg.Record]:
    """What happened to ``memory_id`` and who recalled it lately (among the namespace's newest ``window``
    events; older recalls are counted in its ``access_count``)."""
    return list(await conn.fetch(ACCESS_HISTORY, memory_id, namespace, limit, window))
