"""The audit of judgments (issue 36): a namespace's judgments newest first, a keyset page at a time,
by kind, by who decided (``decided_by``: write, sleep, person, import) and by time; only those about
memories the caller may read, with the texts of those memories.

The page is served in order by the indexes of schema 0021 (``judgments_audit*``); a judgment is
shown only when every memory it is about is one the caller may read (hot or archived), so no text,
id or state of another agent's private memory is ever in an answer. The counts beside a page are
of the judgments the caller may see in the same window, counted over the newest ``COUNTED`` of
them at most (so a page costs the same in a namespace of any age; the answer says when it stopped).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from cabrain.store.access import ACCESS_CTE, readable_id
from cabrain.store.statement import Statement

_VISIBLE = f"NOT EXISTS (SELECT 1 FROM unnest(j.memory_ids) AS x(id) WHERE NOT {readable_id('x.id')})"
_WINDOW = """
j.namespace = :namespace
AND (:since::timestamptz IS NULL OR j.created_at >= :since::timestamptz)
AND (:until::timestamptz IS NULL OR j.created_at < :until::timestamptz)
"""
PAGE = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT j.* FROM judgments j
WHERE {_WINDOW}
  AND (:kind::text IS NULL OR j.kind = :kind::text)
  AND (:decided_by::text IS NULL OR j.decided_by = :decided_by::text)
  AND (:after_at::timestamptz IS NULL OR (j.created_at, j.id) < (:after_at::timestamptz, :after_id::uuid))
  AND {_VISIBLE}
ORDER BY j.created_at DESC, j.id DESC
LIMIT :limit
"""
)
COUNTS = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT s.decided_by, s.kind, count(*) AS n FROM (
    SELECT j.decided_by, j.kind FROM judgments j
    WHERE {_WINDOW} AND {_VISIBLE}
    ORDER BY j.created_at DESC, j.id DESC
    LIMIT :cap
) s
GROUP BY s.decided_by, s.kind
"""
)
# The texts of memories already known readable (every memory of a visible judgment is).
TEXTS = """
SELECT m.id, m.content, m.invalid_at FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.id = ANY($1::uuid[])
"""
COUNTED = 1000
MANY = "SELECT id, created_at FROM judgments WHERE id = ANY($1::uuid[]) ORDER BY created_at DESC, id DESC"


async def page(
    conn: asyncpg.Connection,
    namespace: str,
    agent: str,
    *,
    kind: str | None,
    decided_by: str | None,
    since: datetime | None,
    until: datetime | None,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[asyncpg.Record]:
    """Up to ``limit`` judgments after the keyset ``after`` (created_at, id), newest first."""
    return await conn.fetch(
        PAGE.sql,
        *PAGE.args(
            namespace=namespace,
            agent=agent,
            kind=kind,
            decided_by=decided_by,
            since=since,
            until=until,
            after_at=after[0] if after else None,
            after_id=after[1] if after else None,
            limit=limit,
        ),
    )


async def counts(
    conn: asyncpg.Connection, namespace: str, agent: str, *, since: datetime | None, until: datetime | None
) -> tuple[list[dict[str, Any]], bool]:
    """How many judgments the caller may see in the window, per decider and kind, and whether the
    count stopped at ``COUNTED`` (then they are the newest ones')."""
    rows = await conn.fetch(
        COUNTS.sql, *COUNTS.args(namespace=namespace, agent=agent, since=since, until=until, cap=COUNTED)
    )
    out = [{"decided_by": r["decided_by"], "kind": r["kind"], "count": int(r["n"])} for r in rows]
    return sorted(out, key=lambda c: (-c["count"], c["decided_by"], c["kind"])), sum(c["count"] for c in out) >= COUNTED


async def texts(conn: asyncpg.Connection, ids: list[uuid.UUID]) -> dict[uuid.UUID, asyncpg.Record]:
    """The hot memories among ``ids`` (an archived one is not here), by id."""
    return {r["id"]: r for r in await conn.fetch(TEXTS, ids)} if ids else {}


async def newest_first(conn: asyncpg.Connection, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """Those of ``ids`` that are judgments, the newest first (the order to undo them in)."""
    return [r["id"] for r in await conn.fetch(MANY, ids)]


__all__ = ["counts", "newest_first", "page", "texts"]
