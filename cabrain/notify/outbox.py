"""From events to pushes: the fan-out through the gate, and delivery through the outbox.

**Fan-out** (:meth:`Outbox.fan_out`) takes events not fanned out yet (each once, whichever replica
claims it) and, for every subscription of the event's kind and namespace, words the push from the
memories behind the event *that the subscription's agent may read* (none readable: no push; the
push never carries more than its reader could recall) and lets the gate decide:

- below the subscription's ``min_importance``: ``suppressed`` (below threshold);
- the same finding pushed to it within ``notify_dedup_hours``: ``suppressed`` (duplicate finding);
- ``max_per_hour`` pushes sent or waiting in the last hour: ``suppressed`` (rate limit);
- inside its quiet hours (its own time zone): ``pending`` until they end;
- otherwise ``pending`` now. A subscription to the event stream only is ``streamed``.

Every decision is a row of the outbox with its reason, visible (``cabrain notify outbox``) and
reversible: a suppressed or failed push can be released and goes out once. An event for a chat
thread (the live agent's issue filed, its merge request linked) goes to that thread.

**Delivery** (:meth:`Outbox.deliver`) claims due rows with a lease (``FOR UPDATE SKIP LOCKED``), so
each push is sent by one replica at a time; one row per event and destination (a unique key) makes
each event reach each subscriber once. A failure the platform says may pass (429, 5xx, no answer)
is tried again with jittered exponential backoff (``Retry-After`` wins) up to
``notify_max_attempts``; one that will not (a bad token) fails at once; a destination gone (an
expired push subscription) disables its subscription. A crash between the platform's answer and
the row's update sends that one push again after the lease: at least once, with the row's id as
the idempotency key where the platform takes one (Talk's ``referenceId``, ``webhook-id``).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Mapping
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg

from cabrain.egress import Egress
from cabrain.engine import Engine
from cabrain.errors import ConfigError, InputError
from cabrain.notify.senders import DeliveryError, Notice, Sender, sender
from cabrain.store import notify as sql

log = logging.getLogger(__name__)

LEASE_S = 120.0  # a claimed push is not claimed again for this long (its send's timeout is far less)
TITLES = {
    "contradiction": "Contradiction resolved",
    "stale": "A memory went stale",
    "pattern": "The same problem, again",
    "issue_filed": "Issue filed",
    "issue_linked": "Merge request linked",
    "action_pending": "An action waits for you",
    "reply": "CaBrain",
}
THREAD_KINDS = frozenset({"issue_filed", "issue_linked", "reply"})


def quiet_until(now: datetime, start: time | None, end: time | None, tz: str) -> datetime | None:
    """When the quiet hours around ``now`` end (``now`` outside them: None). Hours that wrap past
    midnight (22:00-07:00) are quiet before ``end`` and from ``start``."""
    if start is None or end is None or start == end:
        return None
    local = now.astimezone(ZoneInfo(tz))
    at = local.time().replace(tzinfo=None)
    inside = start <= at < end if start < end else (at >= start or at < end)
    if not inside:
        return None
    ends = local.replace(hour=end.hour, minute=end.minute, second=0, microsecond=0)
    if ends <= local:
        ends += timedelta(days=1)
    return ends


def link(base: str | None, memory_id: Any) -> str | None:
    return f"{base.rstrip('/')}/console/memories/{memory_id}" if base else None


def word(
    event: Mapping[str, Any], memories: list[dict[str, Any]], reader: str, public_url: str | None
) -> tuple[str, str, list]:
    """The title, text and links of a push about ``event`` for ``reader``, from the ``memories`` it
    may read. A write's judgment names the statement that made it; only its writer is shown that
    (a retraction is not stored as a memory, so nothing else says who may read it)."""
    title = f"{TITLES.get(event['kind'], event['kind'])} in {event['namespace']}"
    lines = [f"[CaBrain] {title}"]
    if event.get("body"):
        lines.append(str(event["body"]))
    data = event.get("data") or {}
    statement = (data.get("inputs") or {}).get("text")
    if data.get("origin") == "write" and statement and data.get("agent") == reader:
        clean = " ".join(str(statement).split())
        lines.append(f'- new: "{clean[:280]}{"…" if len(clean) > 280 else ""}"')
    links: list[str] = []
    for memory in memories:
        label = "seen"
        if event["kind"] in ("contradiction", "stale"):
            label = "now" if memory.get("invalid_at") is None else "was"
        text = " ".join(str(memory["content"]).split())
        lines.append(f'- {label}: "{text[:280]}{"…" if len(text) > 280 else ""}" (memory {memory["id"]})')
        url = link(public_url, memory["id"])
        if url:
            links.append(url)
    lines.extend(links)
    return title, "\n".join(lines), links


class Outbox:
    """The fan-out and the delivery of pushes for one process (a replica, a CLI run)."""

    def __init__(self, engine: Engine, environ: Mapping[str, str]) -> None:
        self.engine, self.environ = engine, environ
        self.egress = Egress.of(engine.settings, environ)  # where pushes may go, which secrets they may use
        self._senders: dict[str, Sender] = {}
        self._defaults: dict[str, dict[str, Any]] = {}

    @property
    def now(self) -> datetime:
        return self.engine.clock()

    # --- fan-out ----------------------------------------------------------------------------------
    async def fan_out(self, *, batch: int = 100) -> int:
        """Fan out a batch of new events; how many."""
        pool = self.engine.pool
        async with pool.acquire() as conn, conn.transaction():
            events = [sql.decoded(r) for r in await conn.fetch(sql.CLAIM_EVENTS, batch)]
            for event in events:
                try:
                    async with conn.transaction():  # one event that cannot be fanned out holds up no other
                        await self._fan_out_one(conn, event)
                except Exception as exc:  # noqa: BLE001 - logged; the event is not tried again
                    log.warning("event not fanned out", extra={"event": str(event["id"]), "error": str(exc)})
                await conn.execute(sql.FANNED, event["id"], self.now, event["importance"])
        return len(events)

    async def _fan_out_one(self, conn: asyncpg.Connection, event: dict[str, Any]) -> None:
        if event["importance"] is None:
            found = await conn.fetchval(sql.IMPORTANCE, event["memory_ids"]) if event["memory_ids"] else 1.0
            event["importance"] = float(found if found is not None else 0.0)
        if event["kind"] in THREAD_KINDS:
            await self._to_thread(conn, event)
        elif event["namespace"] is not None:
            for sub in await conn.fetch(sql.MATCHING, event["kind"], event["namespace"]):
                await self._to_subscriber(conn, event, sql.decoded(sub))

    async def _to_thread(self, conn: asyncpg.Connection, event: dict[str, Any]) -> None:
        data = event["data"]
        destination = f"thread:{data['channel']}:{data['thread']}"
        status, reason = ("pending", None) if data.get("notifier") else ("failed", "the channel has no notifier")
        await conn.execute(
            sql.INSERT_OUTBOX,
            event["id"],
            destination,
            None,
            data.get("notifier"),
            _json(data["reply_to"]),
            status,
            reason,
            self.now,
            self.now,
        )

    async def _to_subscriber(self, conn: asyncpg.Connection, event: dict[str, Any], sub: dict[str, Any]) -> None:
        memories = await sql.readable_memories(conn, sub["agent_id"], event["namespace"], event["memory_ids"])
        if event["memory_ids"] and not memories:
            return  # nothing behind it the subscriber may read: it hears nothing of it
        now, status, reason, at = self.now, "pending", None, self.now
        if sub["notifier"] is None:
            status = "streamed"
        elif event["importance"] < sub["min_importance"]:
            status, reason = "suppressed", f"below threshold ({event['importance']:.2f} < {sub['min_importance']:.2f})"
        elif await conn.fetchval(
            sql.SAME_FINDING,
            sub["id"],
            event["finding"],
            now - timedelta(hours=self.engine.settings.notify_dedup_hours),
        ):
            status, reason = "suppressed", "duplicate finding"
        elif await conn.fetchval(sql.RECENT_PUSHES, sub["id"], now - timedelta(hours=1)) >= sub["max_per_hour"]:
            status, reason = "suppressed", f"rate limit ({sub['max_per_hour']} per hour)"
        else:
            ends = quiet_until(now, sub["quiet_start"], sub["quiet_end"], sub["timezone"])
            if ends is not None:
                at, reason = ends, f"quiet hours until {ends.isoformat()}"
        title, text, links = word(event, memories, sub["agent_id"], self.engine.settings.public_url)
        target = {
            **sub["target"],
            "_title": title,
            "_text": text,
            "_links": links,
            "_memory_ids": [str(m["id"]) for m in memories],  # what it may read, never the rest
        }
        await conn.execute(
            sql.INSERT_OUTBOX,
            event["id"],
            f"sub:{sub['id']}",
            sub["id"],
            sub["notifier"],
            _json(target),
            status,
            reason,
            at,
            now,
        )

    # --- delivery ---------------------------------------------------------------------------------
    async def deliver(self, *, batch: int = 50) -> int:
        """Send the pushes that are due; how many were tried."""
        now = self.now
        async with self.engine.pool.acquire() as conn:
            rows = [
                sql.decoded(r) for r in await conn.fetch(sql.CLAIM_DUE, now, now + timedelta(seconds=LEASE_S), batch)
            ]
        for row in rows:
            await self._send(row)
        return len(rows)

    async def _send(self, row: dict[str, Any]) -> None:
        target = dict(row["target"])
        try:
            async with self.engine.pool.acquire() as conn:
                event = sql.decoded(await conn.fetchrow(sql.EVENT, row["event_id"]))
            title = target.pop("_title", None) or f"{TITLES.get(event['kind'], event['kind'])}"
            text = target.pop("_text", None) or str(event.get("body") or title)
            links = target.pop("_links", None) or list(event["data"].get("links", []))
            readable = target.pop("_memory_ids", None)  # a subscriber's push: the memories its agent reads
            memory_ids = readable if readable is not None else [str(i) for i in event["memory_ids"]]
            notice = Notice(
                key=str(row["id"]),
                title=title,
                text=text,
                links=links,
                data={
                    "event": str(event["id"]),
                    "kind": event["kind"],
                    "namespace": event["namespace"],
                    "memory_ids": memory_ids,
                    "importance": event["importance"],
                    "created_at": event["created_at"].isoformat(),
                },
            )
            chosen, defaults = await self._sender(row["notifier"])
            ref = await chosen.send({**defaults, **target}, notice)
        except DeliveryError as exc:
            await self._failed(row, exc)
            return
        except (ConfigError, InputError) as exc:  # a notifier that cannot be built: no try will do better
            await self._failed(row, DeliveryError(str(exc), retry=False))
            return
        except Exception as exc:  # noqa: BLE001 - unforeseen: tried again with backoff, then failed, visibly
            await self._failed(row, DeliveryError(f"{type(exc).__name__}: {exc}", retry=True))
            return
        async with self.engine.pool.acquire() as conn:
            await conn.execute(sql.DELIVERED, row["id"], self.now, ref)
        log.info("push delivered", extra={"outbox": str(row["id"]), "notifier": row["notifier"]})

    async def _failed(self, row: dict[str, Any], exc: DeliveryError) -> None:
        s = self.engine.settings
        message = exc.message[:500]
        async with self.engine.pool.acquire() as conn:
            if exc.retry and row["attempts"] < s.notify_max_attempts:
                wait = min(s.notify_retry_max_s, s.notify_retry_backoff_s * 2 ** (row["attempts"] - 1))
                wait = wait * random.uniform(0.5, 1.0)
                if exc.retry_after is not None:
                    wait = max(wait, exc.retry_after)
                await conn.execute(sql.RETRY, row["id"], self.now + timedelta(seconds=wait), message)
                log.info("push will be retried", extra={"outbox": str(row["id"]), "error": message, "wait_s": wait})
                return
            await conn.execute(sql.FAILED, row["id"], message)
            if exc.gone and row["subscription_id"] is not None:
                await conn.execute(sql.DISABLE_SUB, row["subscription_id"], self.now, f"destination gone: {message}")
        log.warning("push failed", extra={"outbox": str(row["id"]), "error": message})

    async def _sender(self, name: str | None) -> tuple[Sender, dict[str, Any]]:
        """The notifier's sender, and what its targets default to (a webhook notifier's url: a
        thread's replies through it go where its subscriptions' do)."""
        if name is None:
            raise ConfigError("the push has no notifier")
        if name not in self._senders:
            async with self.engine.pool.acquire() as conn:
                row = await conn.fetchrow(sql.NOTIFIER, name)
            if row is None:
                raise ConfigError(f"notifier {name!r} does not exist (removed?)")
            notifier = sql.decoded(row)
            secret = self.egress.secret(notifier["secret_env"], f"notifier {name!r}'s secret")
            self._senders[name] = sender(
                notifier["kind"], notifier["config"], secret, clock=self.engine.clock, egress=self.egress
            )
            self._defaults[name] = {"url": notifier["config"]["url"]} if notifier["kind"] == "webhook" else {}
        return self._senders[name], self._defaults[name]

    async def aclose(self) -> None:
        for s in self._senders.values():
            await s.aclose()
        self._senders.clear()


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


__all__ = ["Outbox", "quiet_until", "word"]
