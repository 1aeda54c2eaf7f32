"""What the brain holds and did, at a glance: counts per namespace, tier, type and source kept
incrementally, activity over the last day and week, storage of both tiers: operations of
:class:`cabrain.brain.Brain`.

Every number comes from tables kept as memories change (``cabrain/schema/0022_overview.sql``), the
sleep runs' and actions' own tables, and the catalogs' sizes: an overview costs the same at a
million memories as at ten. The cold tier's size is read from its Iceberg snapshot summary (no file
is listed), kept for :data:`COLD_TTL_S` seconds per process.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.gate import Read, operation
from cabrain.policy import Op
from cabrain.settings import Settings
from cabrain.store import browse as browse_sql
from cabrain.store import overview as sql
from cabrain.store.browse import BrowseFilters

COLD_TTL_S = 60.0
KINDS = ("retained", "recalled", "judged", "slept")
EXCLUDED = "Other agents' private memories are never counted here (their owners see them)."

# the cold tier's size per catalog (its settings), with when it was read
_cold_cache: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
_cold_locks: dict[tuple[str, str], asyncio.Lock] = {}


def _cold_size_now(settings: Settings) -> dict[str, Any]:
    try:
        size = sql.cold_size(settings)
    except Exception as exc:  # noqa: BLE001 - a catalog that does not answer is shown, not raised
        return {"cold_bytes": None, "cold_records": None, "cold_note": f"the cold tier's catalog did not answer: {exc}"}
    return {"cold_bytes": size[0], "cold_records": size[1], "cold_note": None}


async def cold_size(settings: Settings, *, now: float | None = None) -> dict[str, Any]:
    """The cold tier's bytes and records from its current snapshot's summary, read at most once a
    :data:`COLD_TTL_S` per catalog and process (concurrent callers wait for one read)."""
    key = (str(settings.resolved_cold_catalog_uri), str(settings.resolved_cold_warehouse))
    lock = _cold_locks.setdefault(key, asyncio.Lock())
    async with lock:
        moment = time.monotonic() if now is None else now
        cached = _cold_cache.get(key)
        if cached is None or moment - cached[0] > COLD_TTL_S:
            cached = (moment, await asyncio.to_thread(_cold_size_now, settings))
            _cold_cache[key] = cached
        return cached[1] | {"cold_read_at": cached[0]}


def size(n: int | None) -> str:
    """Bytes in words a person reads (``12.3 MiB``); ``-`` when unknown."""
    if n is None:
        return "-"
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"


def check_runs(runs: int) -> None:
    if not 0 <= runs <= 50:
        raise InputError(f"runs must be between 0 and 50, got {runs}", hint="ask for 0 to 50 sleep runs")


def _buckets(start: datetime, step: timedelta, count: int) -> list[dict[str, Any]]:
    return [{"start": start + step * i, **dict.fromkeys(KINDS, 0)} for i in range(count)]


def _place(buckets: list[dict[str, Any]], step: timedelta, moment: datetime, kind: str, n: int) -> None:
    index = int((moment - buckets[0]["start"]) // step)
    if 0 <= index < len(buckets):
        buckets[index][kind] += n


def _tally(rows: list[Any], hidden: dict[str, int]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    per: dict[str, dict[str, Any]] = {}
    totals: dict[str, Any] = {"memories": 0, "by_state": defaultdict(int), "by_tier": defaultdict(int)}
    by_type: dict[str, int] = defaultdict(int)
    by_source: dict[str, int] = defaultdict(int)
    for r in rows:
        ns = per.setdefault(
            r["namespace"],
            {"name": r["namespace"], "current": 0, "superseded": 0, "forgotten": 0, "archived": 0, "hot": 0, "cold": 0},
        )
        ns[r["state"]] += r["n"]
        ns[r["tier"]] += r["n"]
        totals["memories"] += r["n"]
        totals["by_state"][r["state"]] += r["n"]
        totals["by_tier"][r["tier"]] += r["n"]
        if r["state"] == "current" and r["tier"] == "hot":
            by_type[r["memory_type"]] += r["n"]
            by_source[r["source_kind"] or "(none)"] += r["n"]
    for name in hidden:
        per.setdefault(
            name,
            {"name": name, "current": 0, "superseded": 0, "forgotten": 0, "archived": 0, "hot": 0, "cold": 0},
        )
    namespaces = [ns | {"private_of_others": hidden.get(name, 0)} for name, ns in sorted(per.items())]
    totals = {
        "memories": totals["memories"],
        "by_state": dict(totals["by_state"]),
        "by_tier": dict(totals["by_tier"]),
        "by_type": dict(sorted(by_type.items(), key=lambda kv: -kv[1])),
        "by_source": dict(sorted(by_source.items(), key=lambda kv: -kv[1])),
    }
    return namespaces, totals


class Overview:
    """A part of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine

    @operation(Op.READ, reads=Read.MEMORIES, http="GET /v1/overview", client="overview", cli="overview")
    async def overview(self, agent: str, *, namespace: str | None = None, runs: int = 5) -> dict[str, Any]:
        """What ``agent`` may see of the brain (one ``namespace``, or every one it may read): memories
        per namespace, tier, state, type and source (others' private memories never counted; who sees
        a namespace whole is told how many there are); what was retained, recalled, judged and slept
        per day over the last 7 days and per hour over the last 24 hours; the newest ``runs`` sleep
        runs; its pending actions; and, for admins, the size of the hot and cold tiers."""
        check_runs(runs)
        now = self.engine.clock().astimezone(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        day = hour.replace(hour=0)
        days = _buckets(day - timedelta(days=6), timedelta(days=1), 7)
        hours = _buckets(hour - timedelta(hours=23), timedelta(hours=1), 24)
        until = hour + timedelta(hours=1)
        async with self.engine.pool.acquire() as conn:
            admin = await sql.is_admin(conn, agent)
            counted = await sql.counts(conn, agent, namespace)
            hidden = await sql.hidden(conn, agent, namespace)
            whole = await sql.whole(conn, agent)
            scope = [namespace] if namespace else whole
            activity = await sql.activity(conn, agent, namespace, days[0]["start"], until)
            starts = await sql.run_starts(conn, admin and not namespace, scope, days[0]["start"], until)
            last = await sql.last_runs(conn, admin and not namespace, scope, runs) if runs else []
            pending = await sql.pending(conn, admin, agent, now)
            hot_bytes = await sql.hot_size(conn) if admin else None
        for r in activity:
            _place(days, timedelta(days=1), r["hour"], r["kind"], r["n"])
            _place(hours, timedelta(hours=1), r["hour"], r["kind"], r["n"])
        for started in starts:
            _place(days, timedelta(days=1), started, "slept", 1)
            _place(hours, timedelta(hours=1), started, "slept", 1)
        namespaces, totals = _tally(counted, hidden)
        storage: dict[str, Any] = {"hot_bytes": hot_bytes, "cold_bytes": None, "cold_records": None, "cold_note": None}
        if admin:
            cold = await cold_size(self.engine.settings)
            storage |= {k: cold[k] for k in ("cold_bytes", "cold_records", "cold_note")}
        else:
            storage["cold_note"] = "the tiers' sizes are shown to admins"
        return {
            "generated_at": now,
            "namespace": namespace,
            "namespaces": namespaces,
            "totals": totals,
            "days": days,
            "hours": hours,
            "storage": storage,
            "last_runs": last,
            "pending_actions": pending,
            "excluded": EXCLUDED,
        }

    @operation(Op.READ, namespace="namespace", reads=Read.MEMORIES)
    async def browse_count(self, agent: str, namespace: str, filters: BrowseFilters) -> dict[str, Any]:
        """How many of ``namespace``'s hot memories ``agent`` may read the list narrowed by
        ``filters`` holds: ``count`` exact from the kept counts when nothing but ``history`` narrows
        it; else counted up to a cap (``more``: there are more than ``count``); ``count`` ``None``
        with an importance floor (no index serves it). Reads nothing else, counts no use."""
        async with self.engine.pool.acquire() as conn:
            if not filters.narrowed:
                rows = await sql.counts(conn, agent, namespace)
                states = {"current", "superseded", "forgotten"} if filters.history else {"current"}
                n = sum(r["n"] for r in rows if r["tier"] == "hot" and r["state"] in states)
                return {"count": n, "more": False}
            found, cap = await browse_sql.count(conn, namespace, agent, filters)
        if found is None:
            return {"count": None, "more": False}
        return {"count": min(found, cap), "more": found > cap}

    @operation(Op.READ, reads=Read.MEMORIES)
    async def last_written(self, agent: str) -> str | None:
        """The namespace ``agent`` may read that memories it may read were last written to (over the
        last 30 days; ``None`` without one): where the console's memory list opens."""
        since = self.engine.clock().astimezone(UTC) - timedelta(days=30)
        async with self.engine.pool.acquire() as conn:
            return await sql.last_written(conn, agent, since)


__all__ = ["COLD_TTL_S", "Overview", "check_runs", "cold_size", "size"]
