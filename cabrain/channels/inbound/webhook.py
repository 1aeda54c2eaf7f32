"""Generic chat webhooks, signed per the Standard Webhooks spec (https://www.standardwebhooks.com).

The sender signs ``{webhook-id}.{webhook-timestamp}.{body}`` with HMAC-SHA256 and sends
``v1,<base64 digest>`` in ``webhook-signature`` (several, space-separated, while a secret is being
rotated); a ``webhook-timestamp`` more than five minutes from now is refused as a replay. The secret
is ``whsec_`` followed by the base64 of the key, or, for a sender that cannot make one, any other
string, whose UTF-8 bytes are then the key. :func:`sign` makes the same three headers, for CaBrain's
own outbound notifications.

The body is ``{"messages": [message, ...]}`` or one message object, each with ``id`` and ``text``
(1 to 100,000 characters) required, ``speaker`` and ``speaker_id`` (at least one; each stands in
for the other), and optional ``sent_at`` (ISO-8601 with a zone; default now), ``channel`` (default
``webhook``) and ``thread`` (default the channel).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

from cabrain.channels.inbound.base import (
    ChannelSecrets,
    ChatMessage,
    RawRequest,
    Received,
    digests_match,
    fresh_timestamp,
    json_body,
    require_header,
    require_method,
    signing_secret,
)
from cabrain.errors import ConfigError, InputError, Unauthenticated

__all__ = ["KIND", "MAX_TEXT", "WebhookAdapter", "sign"]

KIND = "webhook"
MAX_TEXT = 100_000
"""The longest message text a webhook may deliver, in characters."""

_PLATFORM = "webhook"
_PREFIX = "whsec_"
_SECRET_HINT = "set the channel's signing secret to the whsec_... secret the sender signs with"
_DEFAULT_CHANNEL = "webhook"


class WebhookAdapter:
    """An endpoint any sender can post chat messages to, signed per Standard Webhooks."""

    kind = KIND
    signed_by = {"POST": ("webhook-id", "webhook-timestamp", "webhook-signature")}

    def receive(self, request: RawRequest, secrets: ChannelSecrets, now: datetime) -> Received:
        key = _key(signing_secret(secrets, _PLATFORM, hint=_SECRET_HINT))
        require_method(request, _PLATFORM, "POST")
        msg_id = require_header(request, "webhook-id", _PLATFORM)
        timestamp = require_header(request, "webhook-timestamp", _PLATFORM)
        signatures = require_header(request, "webhook-signature", _PLATFORM)
        fresh_timestamp(timestamp, now, _PLATFORM, "webhook-timestamp", secrets.max_skew_s)
        expected = _digest(key, msg_id, timestamp, request.body)
        if not any(
            version == "v1" and digests_match(expected, given)
            for version, _, given in (entry.partition(",") for entry in signatures.split())
        ):
            raise Unauthenticated(
                "webhook channel: bad signature: no v1 signature in webhook-signature matches the id, timestamp "
                "and body signed with the channel's secret",
                hint=_SECRET_HINT,
            )
        payload = json_body(request.body, _PLATFORM)
        if not isinstance(payload, dict):
            raise InputError(
                'webhook channel: the request body must be a JSON object: one message, or {"messages": [...]}'
            )
        if "messages" not in payload:
            return Received([_message(payload, "the message", now)], event_id=msg_id)
        batch = payload["messages"]
        if not isinstance(batch, list):
            raise InputError(f"webhook channel: messages must be a JSON list, got {type(batch).__name__}")
        return Received([_message(raw, f"messages[{i}]", now) for i, raw in enumerate(batch)], event_id=msg_id)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``)
    that sign ``body`` as message ``msg_id`` sent at Unix time ``timestamp``."""
    stamp = str(timestamp)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": stamp,
        "webhook-signature": f"v1,{_digest(_key(secret), msg_id, stamp, body)}",
    }


def _key(secret: str) -> bytes:
    if not secret.startswith(_PREFIX):
        return secret.encode("utf-8")
    try:
        key = base64.b64decode(secret[len(_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise ConfigError(
            "webhook channel: the signing secret starts with whsec_ but what follows is not a base64 key",
            hint="use whsec_ followed by the base64 of a random key (24 to 64 bytes), or a secret without the prefix",
        )
    return key


def _digest(key: bytes, msg_id: str, timestamp: str, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode("ascii")


def _message(raw: Any, where: str, now: datetime) -> ChatMessage:
    if not isinstance(raw, dict):
        raise InputError(f"webhook channel: {where} must be a JSON object, got {type(raw).__name__}")
    event_id = raw.get("id")
    if isinstance(event_id, int) and not isinstance(event_id, bool):
        event_id = str(event_id)
    if not isinstance(event_id, str) or not event_id.strip():
        raise InputError(f"webhook channel: {where}.id is required: a string that names the message uniquely")
    text = raw.get("text")
    if not isinstance(text, str):
        raise InputError(f"webhook channel: {where}.text is required and must be a string")
    if not text.strip():
        raise InputError(f"webhook channel: {where}.text is empty")
    if len(text) > MAX_TEXT:
        raise InputError(
            f"webhook channel: {where}.text is {len(text):,} characters, over the {MAX_TEXT:,} a message may hold",
            hint="split the text into several messages",
        )
    speaker = _optional(raw, "speaker", where)
    speaker_id = _optional(raw, "speaker_id", where)
    if speaker is None and speaker_id is None:
        raise InputError(f"webhook channel: {where} needs a speaker (or a speaker_id): who said it")
    channel = _optional(raw, "channel", where) or _DEFAULT_CHANNEL
    thread = _optional(raw, "thread", where) or channel
    return ChatMessage(
        event_id=event_id,
        speaker=speaker or speaker_id or "",
        speaker_id=speaker_id or speaker or "",
        text=text,
        sent_at=_sent_at(raw.get("sent_at"), where, now),
        channel=channel,
        thread=thread,
        reply_to={"channel": channel, "thread": thread},
    )


def _optional(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"webhook channel: {where}.{key} must be a non-empty string when given, got {value!r:.80}")
    return value


def _sent_at(value: Any, where: str, now: datetime) -> datetime:
    if value is None:
        return now.astimezone(UTC)
    try:
        sent_at = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        sent_at = None
    if sent_at is None:
        raise InputError(
            f"webhook channel: {where}.sent_at must be an ISO-8601 time such as 2024-05-01T09:30:00Z, got {value!r:.80}"
        )
    if sent_at.tzinfo is None or sent_at.utcoffset() is None:
        raise InputError(
            f"webhook channel: {where}.sent_at {value!r:.80} has no time zone",
            hint="end it with Z for UTC or an offset such as +03:00",
        )
    return sent_at.astimezone(UTC)
