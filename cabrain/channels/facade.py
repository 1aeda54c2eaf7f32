"""Chat channels as a retain source, and filing issues through a connector's tracker.

A channel maps one platform endpoint (``POST /v1/channels/NAME/events``; WhatsApp's subscribe
check is a ``GET`` there) to a namespace, a visibility and the agent its messages are retained as.
A request is verified the way its platform signs it (:mod:`cabrain.channels.inbound`) before
anything is read: a missing or bad signature is a 401 and stores nothing. Each message is then
retained once: its platform id is recorded (``channel_receipts``), so a replay or the platform's
own retry stores nothing new, and the retain carries an idempotency key made of it, so two
deliveries racing store one memory. What is retained has had ``<private>`` blocks and secrets
removed (a message that was nothing else is not stored), with its speaker, time, channel and
thread, and ``source_ref`` ``<kind>:<channel>:<thread>#<message>``.

Only an admin adds a channel (it names the variable holding the platform's signing secret, read
where CaBrain runs). A channel with a live agent hands each new message to it
(:mod:`cabrain.channels.live`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cabrain import actions, edge
from cabrain.brain import Brain
from cabrain.channels.inbound import ChannelSecrets, ChatMessage, RawRequest, adapter, require_signed_headers
from cabrain.connectors.facade import Connectors
from cabrain.connectors.trackers import FiledIssue, Link, Tracker, tracker
from cabrain.egress import Egress
from cabrain.engine import Engine
from cabrain.errors import ConfigError, ConflictError, InputError, MethodNotAllowed, NotFound, Unauthenticated
from cabrain.gate import Read, field, operation, system
from cabrain.policy import Op
from cabrain.redact import PRIVATE, REDACTED, redact
from cabrain.store import access
from cabrain.store import channels as sql
from cabrain.store import connectors as connector_sql
from cabrain.store import notify as notify_sql
from cabrain.store import usage as usage_sql
from cabrain.types import MemoryInput, Visibility

log = logging.getLogger(__name__)

BodyReader = Callable[[int], Awaitable[bytes]]  # the request's body, read up to the limit given (else 413)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
TRACKER_KINDS = ("gitlab", "vikunja")


@dataclass(frozen=True)
class Delivery:
    """What a channel request came to: the answer the platform gets, and the new messages stored."""

    status: int
    content_type: str
    body: bytes
    stored: list[tuple[ChatMessage, list[uuid.UUID]]]
    duplicates: int


class Channels:
    """Chat channels: their registration (admin), the platforms' signed requests, and the issues their
    live agents file. Built as every facade is (:mod:`cabrain.facades`): on an engine, with the
    environment its secrets are read from."""

    def __init__(self, engine: Engine, environ: Mapping[str, str]) -> None:
        self.engine = engine
        self.brain = Brain(engine)  # messages are retained through it, as the channel's agent
        self.environ = environ
        self.egress = Egress.of(self.engine.settings, environ)  # the one way a secret is read

    # --- the channels themselves ------------------------------------------------------------------
    @operation(
        Op.ADMIN,
        namespace=field("spec", "namespace"),
        admin=True,
        http="POST /v1/channels",
        client="add_channel",
        cli="channels add",
    )
    async def add(self, agent: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Register a chat channel (agent): where its platform posts, which namespace it retains into, and the secret its requests are signed with (kept redacted)."""
        name, kind = spec.get("name"), spec.get("kind")
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise InputError(f"channel name {name!r} is not valid", hint="lower-case letters, digits, . _ - (≤ 63)")
        adapter(str(kind))  # an unknown kind says which there are
        try:
            Visibility(spec.get("visibility", "team"))
        except ValueError:
            raise InputError("visibility must be private, team or global") from None
        egress = Egress.of(self.engine.settings)
        egress.check_secret(spec.get("secret_env"), f"a {kind} channel's secret_env")
        if spec.get("verify_token_env") is not None:
            egress.check_secret(spec["verify_token_env"], f"a {kind} channel's verify_token_env")
        if kind == "whatsapp" and not spec.get("verify_token_env"):
            raise InputError("a whatsapp channel needs verify_token_env: the variable holding its verify token")
        options = spec.get("options") or {}
        if not isinstance(options, Mapping):
            raise InputError("a channel's options are a JSON object")
        approvers = options.get("approvers", [])
        if not isinstance(approvers, list) or not all(isinstance(a, str) for a in approvers):
            raise InputError("options.approvers is a list of the platform's user ids")
        if approvers and kind not in actions.VERIFIED_SENDERS:
            raise InputError(
                f"a {kind} channel cannot have approvers: its messages name their own sender",
                hint=f"approvers are for {', '.join(sorted(actions.VERIFIED_SENDERS))} channels",
            )
        channel = {
            "name": name,
            "kind": kind,
            "namespace": spec.get("namespace"),
            "visibility": spec.get("visibility", "team"),
            "agent_id": spec.get("agent") or agent,
            "secret_env": spec["secret_env"],
            "verify_token_env": spec.get("verify_token_env"),
            "notifier": spec.get("notifier"),
            "live_agent": spec.get("live_agent"),
            "tracker": spec.get("tracker"),
            "options": dict(options),
        }
        async with self.engine.pool.acquire() as conn, conn.transaction():
            if not isinstance(channel["namespace"], str):
                raise InputError("a channel needs the namespace its messages go to")
            await access.require_writer(conn, channel["agent_id"], channel["namespace"])
            writer = await usage_sql.profile(conn, channel["agent_id"])
            if writer is not None and writer["role"] != "member" and not writer["is_admin"]:
                raise InputError(
                    f"agent {channel['agent_id']!r} has role {writer['role']!r}, which may not retain: "
                    "a channel's messages are retained as a member"
                )
            if (
                channel["notifier"] is not None
                and await conn.fetchrow(notify_sql.NOTIFIER_EXISTS, channel["notifier"]) is None
            ):
                raise NotFound(f"notifier {channel['notifier']!r} does not exist")
            if channel["live_agent"] is not None:
                profile = await usage_sql.profile(conn, channel["live_agent"])
                if profile is None:
                    raise NotFound(f"agent {channel['live_agent']!r} does not exist")
                if profile["role"] != "live" or profile["is_admin"]:
                    raise InputError(
                        f"agent {channel['live_agent']!r} is not of role live: a chat-facing agent gets the least power",
                        hint=f"cabrain agents role {channel['live_agent']} live",
                    )
            if channel["tracker"] is not None:
                found = await connector_sql.by_name(conn, channel["tracker"])
                if found is None or found.kind not in TRACKER_KINDS:
                    raise InputError(f"tracker {channel['tracker']!r} is not a gitlab or vikunja connector")
            if not await sql.insert(conn, channel, agent, self.engine.clock()):
                raise ConflictError(f"a channel named {name!r} exists", hint="remove it first, or pick another name")
            found_channel = await sql.one(conn, name)
        assert found_channel is not None
        return found_channel

    @operation(Op.ADMIN, admin=True, http="GET /v1/channels", client="channels", cli="channels list")
    async def listing(self, agent: str) -> list[dict[str, Any]]:
        """Every chat channel, without its secrets (agent)."""
        async with self.engine.pool.acquire() as conn:
            return await sql.every(conn)

    @operation(
        Op.ADMIN,
        admin=True,
        http="DELETE /v1/channels/{name}",
        client="remove_channel",
        cli="channels remove",
    )
    async def remove(self, agent: str, name: str) -> bool:
        """Remove a chat channel (agent); what it retained stays. True if there was one."""
        async with self.engine.pool.acquire() as conn:
            return await sql.remove(conn, name, self.engine.clock())

    @operation(Op.ADMIN, admin=True, http="GET /v1/issues")
    async def issues(self, agent: str, channel: str | None, limit: int = 100) -> list[dict[str, Any]]:
        """The issues live agents filed (from ``channel``), newest first."""
        async with self.engine.pool.acquire() as conn:
            return await sql.issues(conn, channel, limit)

    async def _known(self, name: str) -> dict[str, Any]:
        """The channel ``name`` names (:class:`NotFound` for a name no channel can have)."""
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise NotFound("no channel of that name")
        return await self.get(name)

    @system("a channel's own record, for its platform's requests and its live agent")
    async def get(self, name: str) -> dict[str, Any]:
        async with self.engine.pool.acquire() as conn:
            channel = await sql.one(conn, name)
        if channel is None:
            raise NotFound(f"no channel {name!r}")
        return channel

    def _secret(self, variable: str | None, what: str) -> str | None:
        if variable is None:
            return None
        return self.egress.secret(variable, f"the channel's {what}")

    # --- receiving --------------------------------------------------------------------------------
    @system(
        "a platform's request, authenticated by the platform's signature before anything is read",
        http=("POST /v1/channels/{name}/events", "GET /v1/channels/{name}/events"),
    )
    async def receive(self, name: str, request: RawRequest, read_body: BodyReader | None = None) -> Delivery:
        """Verify a platform's request and retain its new messages (:class:`Delivery`).

        ``read_body`` reads the request's body (at most the limit it is given, else
        :class:`PayloadTooLarge`); it is called only once the channel exists and the request
        carries its platform's signature headers (without it, ``request.body`` is the body). An
        unknown channel, a missing or bad signature, a method the platform does not send and a
        channel whose secret is not set all answer the same :class:`Unauthenticated` (why is
        logged): the answer does not tell which channel names exist."""
        try:
            channel = await self._known(name)
            kind = adapter(channel["kind"])
            require_signed_headers(kind, request, channel["kind"])
            secrets = ChannelSecrets(
                self._secret(channel["secret_env"], "signing secret"),
                self._secret(channel["verify_token_env"], "verify token") if request.method == "GET" else None,
                max_skew_s=self.engine.settings.channel_max_skew_s,
            )
            if read_body is not None:
                request = replace(request, body=await read_body(self.engine.settings.channel_max_body_bytes))
            received = kind.receive(request, secrets, self.engine.clock())
            for message in received.messages:  # signed is not well-formed: the edge guard's rules hold here too
                edge.check_value(dataclasses.asdict(message), where="the channel's message")
        except (NotFound, Unauthenticated, ConfigError, MethodNotAllowed) as exc:
            level = logging.WARNING if isinstance(exc, ConfigError) else logging.INFO
            log.log(level, "channel request refused", extra={"channel": ascii(name)[:80], "why": exc.message})
            raise Unauthenticated(
                "channel request refused: no channel of that name takes requests signed this way",
                hint="only the platform, signing with the channel's secret, can post here",
            ) from None
        stored: list[tuple[ChatMessage, list[uuid.UUID]]] = []
        duplicates = 0
        async with self.engine.pool.acquire() as conn:
            known = await sql.seen(conn, name, [m.event_id for m in received.messages])
        for message in received.messages:
            if message.event_id in known:
                duplicates += 1
                continue
            ids = await self._retain(channel, message)
            async with self.engine.pool.acquire() as conn:
                fresh = await sql.receipt(conn, name, message.event_id, self.engine.clock(), ids)
            if fresh:
                stored.append((message, ids))
            else:
                duplicates += 1
        if received.reply is not None:
            status, content_type, body = received.reply
        else:
            status, content_type = 200, "application/json"
            body = json.dumps({"ok": True, "stored": len(stored), "duplicates": duplicates}).encode()
        return Delivery(status, content_type, body, stored, duplicates)

    async def _retain(self, channel: dict[str, Any], message: ChatMessage) -> list[uuid.UUID]:
        text = redact(message.text).strip() if self.engine.settings.redact_secrets else message.text.strip()
        if not text.replace(PRIVATE, "").replace(REDACTED, "").strip():
            return []  # nothing but private text or secrets
        item = MemoryInput(
            text,
            channel["namespace"],
            visibility=Visibility(channel["visibility"]),
            source_kind=f"channel:{channel['kind']}",
            source_ref=f"{channel['kind']}:{channel['name']}:{message.thread}#{message.event_id}",
            valid_at=message.sent_at,
            metadata={
                "speaker": message.speaker,
                "speaker_id": message.speaker_id,
                "channel": message.channel,
                "thread": message.conversation or message.thread,
            },
        )
        key = f"channel:{channel['name']}:{message.event_id}"[:200]
        results = await self.brain.retain(channel["agent_id"], [item], idempotency_key=key)
        return [r.memory_id for r in results if r.memory_id is not None]

    # --- issues -----------------------------------------------------------------------------------
    @system("the tracker of an issue filing or a link lookup already let through, or of the live agent's watch")
    async def tracker_for(self, agent: str, connector_name: str) -> tuple[Tracker, dict[str, Any]]:
        """The tracker of a gitlab or vikunja connector ``agent`` may file through (it reads the
        connector's namespace), with the connector's credential."""
        async with self.engine.pool.acquire() as conn:
            connector = await connector_sql.by_name(conn, connector_name)
            if connector is None or connector.kind not in TRACKER_KINDS:
                raise NotFound(f"no gitlab or vikunja connector named {connector_name!r}")
            (await access.caller(conn, agent, connector.namespace)).require_team_read()
        hub = Connectors(self.engine, environ=self.environ)  # the connector's credential and retry layer
        token = hub.credential(connector)
        info = {"name": connector.name, "kind": connector.kind, "namespace": connector.namespace}
        return tracker(connector.kind, connector.config, token, hub.retry, egress=hub.egress), info

    @operation(Op.FILE_ISSUE, reads=Read.NAMESPACE, http="POST /v1/issues", client="file_issue", cli="issues file")
    async def file_issue(
        self,
        agent: str,
        connector_name: str,
        title: str,
        description: str,
        *,
        labels: list[str] | None = None,
        key: str | None = None,
    ) -> FiledIssue:
        """File an issue through a connector's tracker, as ``agent`` (its role must allow it)."""
        if not isinstance(title, str) or not title.strip():
            raise InputError("an issue needs a title")
        if len(description) > 100_000:
            raise InputError("an issue's description is at most 100,000 characters")
        found, _ = await self.tracker_for(agent, connector_name)
        try:
            filing = (redact(title.strip()), redact(description))  # both leave for the tracker
            return await asyncio.to_thread(found.file, *filing, labels=labels or (), key=key)
        finally:
            await asyncio.to_thread(found.close)

    @operation(Op.READ, reads=Read.NAMESPACE)
    async def links(self, agent: str, connector_name: str, ref: str) -> list[Link]:
        found, _ = await self.tracker_for(agent, connector_name)
        try:
            return await asyncio.to_thread(found.links, ref)
        finally:
            await asyncio.to_thread(found.close)

    # --- approvals from the chat --------------------------------------------------------------------
    @system("a chat approver, as the platform's signature vouches for the sender; cabrain.actions checks its authority")
    async def decide_from_chat(
        self, channel: str, sender: str, action_id: uuid.UUID, *, approve: bool
    ) -> dict[str, Any]:
        """A message's sender on ``channel`` approves or denies a held action: only one of the
        channel's approvers, on a platform that vouches for its senders, for an action on the
        namespace the channel serves (:mod:`cabrain.actions`)."""
        return await actions.decide(self.brain, actions.ChatApprover(channel, sender), action_id, approve=approve)


__all__ = ["Channels", "Delivery"]
