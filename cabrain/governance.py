"""How much each agent uses, and its caps; the agent's profile (role, admin, disabled, caps) that
the gate (:mod:`cabrain.gate`) decides every operation by.

- **Caps**: an agent may have per-day caps, per operation or model call kind or over all of them
  (``*``); one reached answers 429 (:class:`cabrain.errors.QuotaExceeded`) until midnight UTC.
- **Usage** (SPEC N6): every operation is counted per agent, namespace, day and kind, and so is
  every model call made on an agent's behalf (``embed``: texts embedded; ``chat``: characters sent
  to the chat model; ``workflow``: a workflow's model calls), attributed through the task's
  :data:`cabrain.policy.ACTING`. Counts are added up in memory and written every
  ``usage_flush_s`` (one upsert per flush, in key order): the hot path never waits on them. With
  several replicas a cap can be passed by what the others counted in their last flush window.

An agent's role and caps are read once per ``api_key_cache_ttl_s`` (a change applies within it, as a
revoked key does).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from datetime import date
from typing import Any

import asyncpg

from cabrain.clock import Clock, utc_today
from cabrain.errors import QuotaExceeded
from cabrain.policy import ACTING
from cabrain.providers.llm import ChatModel
from cabrain.store import usage as sql

log = logging.getLogger(__name__)

# Set where the caps of the work in hand were checked when an agent handed it over.
_CHECKED: contextvars.ContextVar[bool] = contextvars.ContextVar("cabrain_caps_checked", default=False)

Key = tuple[date, str, str, str]


class Governor:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, *, flush_s: float, profile_ttl_s: float) -> None:
        self._pool, self._clock = pool, clock
        self._flush_s, self._ttl = flush_s, profile_ttl_s
        self._calls: Counter[Key] = Counter()
        self._units: Counter[Key] = Counter()
        self._cost: dict[Key, float] = {}
        self._profiles: dict[str, tuple[dict[str, Any] | None, float]] = {}
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    # --- who the agent is ---------------------------------------------------------------------------
    async def profile(self, agent: str) -> dict[str, Any] | None:
        """The agent's role, admin flag, whether it is disabled, and its caps (None for an unknown
        agent), cached briefly."""
        cached = self._profiles.get(agent)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        async with self._pool.acquire() as conn:
            row = await sql.profile(conn, agent)
        found = None
        if row is not None:
            caps = json.loads(row["caps"]) if isinstance(row["caps"], str) else row["caps"]
            found = {
                "role": row["role"],
                "is_admin": row["is_admin"],
                "disabled": row["disabled"],
                "caps": caps if isinstance(caps, dict) else {},
            }
        if len(self._profiles) > 10_000:
            self._profiles.clear()
        self._profiles[agent] = (found, now + self._ttl)
        return found

    def forget_profiles(self) -> None:
        """After a role or cap change made here: read every agent's again."""
        self._profiles.clear()

    async def within_caps(self, agent: str, name: str, caps: dict[str, Any]) -> None:
        """:class:`QuotaExceeded` when ``agent`` reached a cap on ``name`` (or on everything) today."""
        wanted = {k: int(v) for k, v in caps.items() if k in (name, "*")}
        if not wanted:
            return
        day = utc_today(self._clock)
        async with self._pool.acquire() as conn:
            used = Counter(await sql.used_today(conn, agent, day))
        for (d, a, _, o), n in self._calls.items():
            if d == day and a == agent:
                used[o] += n
        for cap_op, per_day in sorted(wanted.items()):
            total = sum(used.values()) if cap_op == "*" else used[cap_op]
            if total >= per_day:
                what = "operations and model calls" if cap_op == "*" else f"{cap_op} calls"
                raise QuotaExceeded(
                    f"agent {agent!r} reached its cap of {per_day} {what} per day ({total} used on {day})",
                    hint="it resets at midnight UTC; an admin can raise it: cabrain usage cap AGENT OP N",
                )

    # --- metering ---------------------------------------------------------------------------------
    def count(
        self, agent: str, namespace: str, op: str, *, calls: int = 1, units: int = 0, cost_usd: float = 0.0
    ) -> None:
        key = (utc_today(self._clock), agent, namespace, op)
        self._calls[key] += calls
        self._units[key] += units
        self._cost[key] = self._cost.get(key, 0.0) + cost_usd
        if self._task is None or self._task.done():
            try:
                self._task = asyncio.get_running_loop().create_task(self._run())
            except RuntimeError:  # no loop (a synchronous caller): flushed on the next flush()
                pass

    async def model_call(
        self, kind: str, units: int, *, cost_usd: float = 0.0, check: bool = True, count: bool = True
    ) -> None:
        """A model call made for the agent the task acts for (nothing when it acts for none): its cap
        checked (``check``) and the call counted (``count``)."""
        acting = ACTING.get()
        if acting is None:
            return
        agent, namespace = acting
        if check and not _CHECKED.get():
            profile = await self.profile(agent)
            if profile is not None and profile["caps"]:
                await self.within_caps(agent, kind, profile["caps"])
        if count:
            self.count(agent, namespace, kind, units=units, cost_usd=cost_usd)

    @contextlib.contextmanager
    def acting_for(self, agent: str, namespace: str) -> Iterator[None]:
        """Model calls in the block are counted to ``agent``, whose caps were checked when it handed
        the work over (the capture inbox retains what an agent handed over earlier)."""
        acting, checked = ACTING.set((agent, namespace)), _CHECKED.set(True)
        try:
            yield
        finally:
            ACTING.reset(acting)
            _CHECKED.reset(checked)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._flush_s)
            try:
                if not await self.flush():
                    return
            except Exception as exc:  # noqa: BLE001 - metering must never break an operation
                log.warning("usage flush failed", extra={"error": str(exc)})

    async def flush(self) -> int:
        """Write what was counted since the last flush; how many rows.

        A row no column can hold (a NUL or a lone surrogate in a name, which the gate refuses
        before counting, so only a bug could make one) is dropped with a warning, never written
        nor kept: one bad row cannot fail every later flush. When the database cannot be reached
        the counts are kept for the next flush (and the error raised)."""
        async with self._lock:
            if not self._calls:
                return 0
            calls, units, cost = self._calls, self._units, self._cost
            self._calls, self._units, self._cost = Counter(), Counter(), {}
            rows, dropped = [], set()
            for key in calls:
                if _storable(key):
                    rows.append((*key, calls[key], units[key], cost.get(key, 0.0)))
                else:
                    dropped.add(key)
                    log.warning("usage row dropped: a name no column holds", extra={"row": ascii(key)[:300]})
            written: set[Key] = set()
            try:
                if rows:
                    async with self._pool.acquire() as conn:
                        try:
                            await sql.add(conn, rows)
                            written.update(row[:4] for row in rows)
                        except asyncpg.DataError:  # a row the database refuses: the others written one by one
                            for row in rows:
                                try:
                                    await sql.add(conn, [row])
                                except asyncpg.DataError as exc:
                                    log.warning("usage row dropped", extra={"row": ascii(row)[:300], "error": str(exc)})
                                written.add(row[:4])
            except BaseException:
                for key in calls.keys() - written - dropped:  # counted again on the next flush, not lost
                    self._calls[key] += calls[key]
                    self._units[key] += units[key]
                    self._cost[key] = self._cost.get(key, 0.0) + cost.get(key, 0.0)
                raise
            return len(rows)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        try:
            await self.flush()
        except Exception as exc:  # noqa: BLE001 - closing: say so, do not fail the close
            log.warning("usage flush at close failed", extra={"error": str(exc)})


def _storable(key: Key) -> bool:
    """Whether a text column can hold every name of ``key`` (no NUL, valid UTF-8)."""
    for name in key[1:]:
        if "\x00" in name:
            return False
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


class MeteredChat:
    """A chat model whose calls are metered (``chat``: characters sent) to the agent acted for."""

    def __init__(self, model: ChatModel, governor: Governor) -> None:
        self._model, self._governor = model, governor
        self.name = model.name

    async def complete(self, system: str, user: str) -> str:
        await self._governor.model_call("chat", len(system) + len(user))
        return await self._model.complete(system, user)


__all__ = ["Governor", "MeteredChat"]
