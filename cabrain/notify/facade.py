"""Notifiers, subscriptions, the outbox and the event stream, as the faces use them.

- A **notifier** says how to reach a platform (a Slack app, a WhatsApp Business number, a Talk
  bot, VAPID keys for web push, a webhook endpoint): its options, and the environment variable its
  credential is read from where CaBrain runs (never stored; one the operator allows in
  ``CABRAIN_SECRET_ENV_ALLOW``, never one of CaBrain's own settings). Only an admin adds or removes
  one: it spends the operator's credential. Its URLs pass the egress policy (:mod:`cabrain.egress`).
- A **subscription** asks for pushes of some kinds of event (``contradiction``, ``stale``,
  ``pattern``) about one namespace or all the agent reads, through a notifier to a target (a Slack
  channel, a phone number, a push subscription), or to the event stream only. Where the server
  sends is an admin's choice: a subscription's target names no URL of its own unless an admin
  subscribes it (a webhook posts to its notifier's url, a Talk message goes to its notifier's
  Nextcloud, a browser's push endpoint must be on one of the push services the notifier names in
  ``push_services``), and every URL passes the egress policy. Its agent's view
  bounds what a push shows. The gate's settings are the subscription's: ``min_importance``,
  ``max_per_hour``, quiet hours in its time zone.
- The **event stream** (``/v1/events``) lists the events of namespaces an agent may read, each with
  only the memories behind it that the agent may read.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from datetime import time
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cabrain.egress import Egress
from cabrain.engine import Engine
from cabrain.errors import AccessDenied, ConflictError, InputError, NotFound
from cabrain.gate import Read, operation, system
from cabrain.notify.senders import KINDS as NOTIFIER_KINDS
from cabrain.policy import Op
from cabrain.store import access
from cabrain.store import notify as sql

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
EVENT_KINDS = ("contradiction", "stale", "pattern", "issue_filed", "issue_linked", "action_pending")
SUBSCRIBABLE = ("contradiction", "stale", "pattern", "action_pending")
URL_OPTIONS = {"webhook": ("url",), "talk": ("url",), "slack": ("base_url",), "whatsapp": ("base_url",)}
# the push services browsers subscribe with (Chrome/Edge's FCM, Firefox's autopush, Safari's, Windows'):
# a non-admin's push endpoint is on one of them, or on those its notifier's push_services name
PUSH_SERVICES = ("fcm.googleapis.com", "updates.push.services.mozilla.com", "web.push.apple.com", ".notify.windows.com")


def _time(value: str | None, what: str) -> time | None:
    if value is None:
        return None
    try:
        return time.fromisoformat(value)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a time of day like 22:00, got {value!r}") from None


class Notify:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # --- notifiers --------------------------------------------------------------------------------
    @operation(Op.ADMIN, admin=True, http="POST /v1/notifiers", client="add_notifier", cli="notify add")
    async def add_notifier(
        self, agent: str, name: str, kind: str, config: Mapping[str, Any], secret_env: str | None
    ) -> dict[str, Any]:
        """Register a notifier (agent): a platform pushes are sent to, its secret kept as a reference."""
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise InputError(f"notifier name {name!r} is not valid", hint="lower-case letters, digits, . _ - (≤ 63)")
        if kind not in NOTIFIER_KINDS:
            raise InputError(f"unknown notifier kind {kind!r}", hint=f"one of {', '.join(sorted(NOTIFIER_KINDS))}")
        if not isinstance(config, Mapping):
            raise InputError("a notifier's config is a JSON object")
        if any(k.lower() in ("token", "secret", "password", "key", "private_key") for k in config):
            raise InputError(
                "a notifier's config holds no credential", hint="name the variable that holds it with secret_env"
            )
        if secret_env is None:
            raise InputError(f"a {kind} notifier needs secret_env: the variable its credential is read from")
        egress = Egress.of(self.engine.settings)
        egress.check_secret(secret_env, f"a {kind} notifier's secret_env")
        if kind == "webhook" and not str(config.get("url", "")).startswith(("http://", "https://")):
            raise InputError("a webhook notifier's config names its url (http:// or https://)")
        for option in URL_OPTIONS.get(kind, ()):
            if config.get(option) is not None:
                egress.check_url(config[option], f"a {kind} notifier's {option}")
        services = config.get("push_services")
        if services is not None and (
            kind != "webpush" or not isinstance(services, list) or not all(_push_host(s) for s in services)
        ):
            raise InputError(
                "push_services is a webpush notifier's list of push service hosts",
                hint='e.g. ["fcm.googleapis.com", ".notify.windows.com"] (a leading dot: any host under it)',
            )
        async with self.engine.pool.acquire() as conn:
            made = await conn.fetchval(
                sql.INSERT_NOTIFIER, name, kind, json.dumps(dict(config)), secret_env, agent, self.engine.clock()
            )
            if made is None:
                raise ConflictError(f"a notifier named {name!r} exists", hint="remove it first, or pick another name")
            return sql.decoded(await conn.fetchrow(sql.NOTIFIER, name))

    @operation(Op.READ, http="GET /v1/notifiers", client="notifiers", cli="notify list")
    async def notifiers(self, agent: str) -> list[dict[str, Any]]:
        """Every notifier, without its secrets (admin)."""
        async with self.engine.pool.acquire() as conn:
            return [sql.decoded(r) for r in await conn.fetch(sql.NOTIFIERS)]

    @operation(
        Op.ADMIN,
        admin=True,
        http="DELETE /v1/notifiers/{name}",
        client="remove_notifier",
        cli="notify remove",
    )
    async def remove_notifier(self, agent: str, name: str) -> bool:
        """Remove a notifier (agent). True if there was one."""
        async with self.engine.pool.acquire() as conn:
            return await conn.fetchval(sql.REMOVE_NOTIFIER, name, self.engine.clock()) is not None

    # --- subscriptions ----------------------------------------------------------------------------
    @operation(
        Op.SUBSCRIBE,
        namespace="namespace",
        reads=Read.NAMESPACE,
        http="POST /v1/subscriptions",
        client="subscribe",
        cli="notify subscribe",
    )
    async def subscribe(
        self,
        agent: str,
        *,
        subscriber: str,
        kinds: list[str],
        namespace: str | None = None,
        notifier: str | None = None,
        target: Mapping[str, Any] | None = None,
        min_importance: float = 0.5,
        max_per_hour: int = 6,
        quiet_start: str | None = None,
        quiet_end: str | None = None,
        timezone: str = "UTC",
    ) -> dict[str, Any]:
        """Subscribe the agent to events of a namespace it may read, pushed through a notifier."""
        if not kinds or any(k not in SUBSCRIBABLE for k in kinds):
            raise InputError(f"kinds must be some of {', '.join(SUBSCRIBABLE)}, got {kinds!r}")
        if not isinstance(subscriber, str) or not subscriber.strip() or len(subscriber) > 200:
            raise InputError("subscriber names who is told (1-200 characters)")
        if not 0 <= min_importance <= 1:
            raise InputError("min_importance is between 0 and 1")
        if not 0 <= max_per_hour <= 1000:
            raise InputError("max_per_hour is between 0 and 1000")
        start, end = _time(quiet_start, "quiet_start"), _time(quiet_end, "quiet_end")
        if (start is None) != (end is None):
            raise InputError("give both quiet_start and quiet_end, or neither")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InputError(f"unknown time zone {timezone!r}", hint="an IANA name such as Asia/Riyadh") from None
        if target is not None and not isinstance(target, Mapping):
            raise InputError("a subscription's target is a JSON object")
        chosen = dict(target or {})
        async with self.engine.pool.acquire() as conn:
            if namespace is not None:
                (await access.caller(conn, agent, namespace)).require_team_read()
            if notifier is not None:
                row = await conn.fetchrow(sql.NOTIFIER, notifier)
                if row is None:
                    raise NotFound(f"notifier {notifier!r} does not exist", hint="an admin adds it: cabrain notify add")
                found = sql.decoded(row)
                if found["kind"] == "webhook":
                    # the endpoint is the admin's choice, never a subscriber's (no requests to anywhere)
                    if chosen.get("url", found["config"]["url"]) != found["config"]["url"]:
                        raise AccessDenied("a webhook subscription posts to its notifier's url only")
                    chosen["url"] = found["config"]["url"]
                elif not chosen:
                    raise InputError(f"a {found['kind']} subscription needs a target (where to send)")
                self._check_target(found, chosen, admin=await access.is_admin(conn, agent))
            elif chosen:
                raise InputError("a target needs a notifier (the stream needs neither)")
            sub_id = uuid.uuid4()
            await conn.execute(
                sql.INSERT_SUB,
                sub_id,
                agent,
                subscriber.strip(),
                namespace,
                kinds,
                notifier,
                json.dumps(chosen),
                min_importance,
                max_per_hour,
                start,
                end,
                timezone,
                self.engine.clock(),
            )
            return sql.decoded(await conn.fetchrow(sql.SUB, sub_id))

    def _check_target(self, notifier: Mapping[str, Any], target: Mapping[str, Any], *, admin: bool) -> None:
        """Where a subscription's pushes go is the admin's choice: a non-admin's target names no
        server of its own (a Talk ``backend``), and a browser's push endpoint is on a push service
        the notifier allows; every URL passes the egress policy (checked again when sending)."""
        kind, egress = notifier["kind"], Egress.of(self.engine.settings)
        if kind == "talk" and target.get("backend") is not None:
            if not admin and target["backend"] != notifier["config"].get("url"):
                raise AccessDenied(
                    "a Talk subscription posts to its notifier's Nextcloud only",
                    hint="leave out backend, or ask an admin for a notifier on that Nextcloud",
                )
            egress.check_url(target["backend"], "a Talk target's backend")
        if kind == "webpush":
            endpoint = target.get("endpoint")
            if not isinstance(endpoint, str):
                raise InputError("a push subscription's target is the browser's subscription: endpoint and keys")
            egress.check_url(endpoint, "a push endpoint")
            host = (urlsplit(endpoint).hostname or "").lower()
            services = notifier["config"].get("push_services") or PUSH_SERVICES
            if not admin and not (urlsplit(endpoint).scheme == "https" and any(_on_service(host, s) for s in services)):
                raise AccessDenied(
                    f"push endpoint host {host!r} is not a push service notifier {notifier['name']!r} sends to",
                    hint=f"its push services: {', '.join(services)} (an admin sets the notifier's push_services)",
                )

    @operation(
        Op.READ, reads=Read.OWN, http="GET /v1/subscriptions", client="subscriptions", cli="notify subscriptions"
    )
    async def subscriptions(self, agent: str, *, everyone: bool = False) -> list[dict[str, Any]]:
        """The agent's subscriptions (``all``: an admin's view of everyone's)."""
        async with self.engine.pool.acquire() as conn:
            if everyone and not await access.is_admin(conn, agent):
                raise AccessDenied(f"agent {agent!r} sees its own subscriptions only", hint="use an admin key")
            return [sql.decoded(r) for r in await conn.fetch(sql.SUBS, None if everyone else agent, everyone)]

    @operation(
        Op.SUBSCRIBE,
        reads=Read.OWN,
        http="DELETE /v1/subscriptions/{sub_id}",
        client="unsubscribe",
        cli="notify unsubscribe",
    )
    async def unsubscribe(self, agent: str, sub_id: uuid.UUID) -> bool:
        """End one of the agent's subscriptions. True if there was one."""
        async with self.engine.pool.acquire() as conn:
            row = await conn.fetchrow(sql.SUB, sub_id)
            if row is None or not (row["agent_id"] == agent or await access.is_admin(conn, agent)):
                raise NotFound(f"no subscription {sub_id}")
            return await conn.fetchval(sql.DISABLE_SUB, sub_id, self.engine.clock(), f"removed by {agent}") is not None

    # --- the outbox and the stream ----------------------------------------------------------------
    @operation(Op.READ, reads=Read.OWN, http="GET /v1/outbox", client="outbox", cli="notify outbox")
    async def outbox(self, agent: str, *, status: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Pushes and the gate's decisions: an admin sees all, an agent those of its subscriptions."""
        async with self.engine.pool.acquire() as conn:
            mine = None if await access.is_admin(conn, agent) else agent
            rows = [sql.decoded(r) for r in await conn.fetch(sql.OUTBOX, status, mine, limit)]
        for row in rows:  # the worded push is the subscriber's; the listing shows where and how it went
            row["target"] = {k: v for k, v in row["target"].items() if not k.startswith("_")}
        return rows

    @operation(
        Op.SUBSCRIBE, reads=Read.OWN, http="POST /v1/outbox/{push_id}/release", client="release", cli="notify release"
    )
    async def release(self, agent: str, outbox_id: uuid.UUID) -> bool:
        """Send a suppressed or failed push after all (the gate's judgment undone): one of the agent's
        own subscriptions' pushes (an admin's: any)."""
        async with self.engine.pool.acquire() as conn:
            row = await conn.fetchrow(sql.PUSH_OWNER, outbox_id)
            if row is None or not (row["agent_id"] == agent or await access.is_admin(conn, agent)):
                raise NotFound(f"no push {outbox_id}")
            return await conn.fetchval(sql.RELEASE, outbox_id, self.engine.clock(), agent) is not None

    @system("where a stream starts: a sequence number, no content")
    async def latest(self) -> int:
        """The newest event's ``seq`` (0: none yet): where a stream of what is new from now starts."""
        async with self.engine.pool.acquire() as conn:
            return int(await conn.fetchval(sql.LATEST))

    @operation(Op.READ, namespace="namespace", reads=Read.MEMORIES, http="GET /v1/events")
    async def events(
        self, agent: str, *, after: int = 0, namespace: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Events after ``seq`` ``after`` in namespaces ``agent`` reads, each with only the memories
        behind it ``agent`` may read (the reason only when it may read them all)."""
        if not 1 <= limit <= 500:
            raise InputError(f"limit must be between 1 and 500, got {limit}")
        out: list[dict[str, Any]] = []
        async with self.engine.pool.acquire() as conn:
            if namespace is not None:
                (await access.caller(conn, agent, namespace)).require_team_read()
            for event in await sql.events_for(conn, agent, after=after, namespace=namespace, limit=limit):
                memories = await sql.readable_memories(conn, agent, event["namespace"], event["memory_ids"])
                if event["memory_ids"] and not memories:
                    out.append({"seq": event["seq"], "kind": "gap"})  # keeps the reader's place, says nothing
                    continue
                whole = len(memories) == len(event["memory_ids"])
                out.append(
                    {
                        "seq": event["seq"],
                        "id": str(event["id"]),
                        "kind": event["kind"],
                        "namespace": event["namespace"],
                        "importance": event["importance"],
                        "title": event["title"],
                        "created_at": event["created_at"].isoformat(),
                        "reason": event["data"].get("reason") if whole else None,
                        "memories": [
                            {"id": str(m["id"]), "content": m["content"], "current": m["invalid_at"] is None}
                            for m in memories
                        ],
                    }
                )
        return out


def _push_host(entry: Any) -> bool:
    return isinstance(entry, str) and re.fullmatch(r"\.?[a-z0-9]([a-z0-9.-]{0,252})", entry) is not None


def _on_service(host: str, service: str) -> bool:
    """``host`` is the push service ``service`` (a leading dot: any host under that domain)."""
    return host.endswith(service) if service.startswith(".") else host == service


__all__ = ["EVENT_KINDS", "SUBSCRIBABLE", "Notify"]
