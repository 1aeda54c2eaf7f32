"""Slack Events API requests, verified with ``slack_sdk``'s :class:`~slack_sdk.signature.SignatureVerifier`.

Slack signs ``v0:{timestamp}:{body}`` with the app's signing secret (HMAC-SHA256, hex, prefixed
``v0=``) into ``x-slack-signature``, the timestamp in ``x-slack-request-timestamp``; one more than
five minutes from now is refused as a replay. The verifier is given a clock built from the ``now``
the caller passes, so a request is judged as of that time.

A ``url_verification`` request is answered with its challenge. An ``event_callback`` of a ``message``
or ``app_mention`` a person wrote (no subtype, or ``thread_broadcast`` / ``file_share``; no
``bot_id``) is one message; its id is ``channel:ts``, Slack's identity of a message, so the same
message delivered as both ``message`` and ``app_mention`` is seen as one. Its text reads as a person
sees it: ``<@U1>`` as ``@U1``, ``<#C1|general>`` as ``#general``, ``<https://x|label>`` as
``label (https://x)``, and ``&amp;`` ``&lt;`` ``&gt;`` unescaped.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from slack_sdk.signature import Clock, SignatureVerifier

from cabrain.channels.inbound.base import (
    ChannelSecrets,
    ChatMessage,
    RawRequest,
    Received,
    fresh_timestamp,
    from_unix,
    json_body,
    require_header,
    require_method,
    signing_secret,
)
from cabrain.errors import InputError, Unauthenticated

__all__ = ["KIND", "SlackAdapter"]

KIND = "slack"

_PLATFORM = "Slack"
_SECRET_HINT = "set the channel's signing secret to the Signing Secret on the Slack app's Basic Information page"
_MESSAGE_EVENTS = frozenset({"message", "app_mention"})
_MESSAGE_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
_TOKEN = re.compile(r"<([^<>\s][^<>]*)>")


class _At(Clock):
    """slack_sdk's clock, stopped at the time the caller says it is."""

    def __init__(self, now: datetime) -> None:
        self._seconds = now.timestamp()

    def now(self) -> float:
        return self._seconds


class SlackAdapter:
    """A Slack app's Events API request URL."""

    kind = KIND
    signed_by = {"POST": ("x-slack-signature", "x-slack-request-timestamp")}

    def receive(self, request: RawRequest, secrets: ChannelSecrets, now: datetime) -> Received:
        self._verify(request, signing_secret(secrets, _PLATFORM, hint=_SECRET_HINT), now, secrets.max_skew_s)
        payload = json_body(request.body, _PLATFORM)
        if not isinstance(payload, dict):
            raise InputError("Slack channel: the request body is not a JSON object")
        kind = payload.get("type")
        if kind == "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str) or not challenge:
                raise InputError("Slack channel: a url_verification request without a challenge")
            return Received([], reply=(200, "text/plain", challenge.encode("utf-8")))
        if kind != "event_callback":
            return Received([])  # app_rate_limited and the like: nothing anyone said
        event_id = payload.get("event_id")
        event = payload.get("event")
        if not isinstance(event_id, str) or not event_id:
            raise InputError("Slack channel: an event_callback without an event_id")
        if not isinstance(event, dict):
            raise InputError("Slack channel: an event_callback without an event object")
        message = _message(event, payload.get("team_id"))
        return Received([message] if message else [], event_id=event_id)

    def _verify(self, request: RawRequest, secret: str, now: datetime, max_skew_s: float) -> None:
        require_method(request, _PLATFORM, "POST")
        signature = require_header(request, "x-slack-signature", _PLATFORM)
        timestamp = require_header(request, "x-slack-request-timestamp", _PLATFORM)
        fresh_timestamp(timestamp, now, _PLATFORM, "x-slack-request-timestamp", max_skew_s)
        verifier = SignatureVerifier(secret, clock=_At(now))
        try:
            valid = signature.isascii() and verifier.is_valid(request.body, timestamp, signature)
        except UnicodeDecodeError:
            valid = False  # slack_sdk signs the body as text: bytes that are not UTF-8 are not Slack's
        if not valid:
            raise Unauthenticated(
                "Slack channel: bad signature: x-slack-signature does not match the body signed with the channel's signing secret",
                hint=_SECRET_HINT,
            )


def _message(event: dict[str, Any], team_id: Any) -> ChatMessage | None:
    if event.get("type") not in _MESSAGE_EVENTS or event.get("bot_id") or event.get("hidden"):
        return None
    subtype = event.get("subtype")
    if subtype is not None and subtype not in _MESSAGE_SUBTYPES:
        return None  # edits, deletions, joins, topic changes ...
    user, text = event.get("user"), event.get("text")
    if not isinstance(user, str) or not user or not isinstance(text, str) or not text.strip():
        return None  # a file shared without a word, or no person to say it came from
    channel = _required(event, "channel")
    ts = _required(event, "ts")
    thread = event.get("thread_ts") or ts
    if not isinstance(thread, str):
        raise InputError(f"Slack channel: event.thread_ts must be a string, got {thread!r:.80}")
    profile = event.get("user_profile")
    names = (profile.get("display_name"), profile.get("real_name")) if isinstance(profile, dict) else ()
    speaker = next((n.strip() for n in names if isinstance(n, str) and n.strip()), user)
    reply_to: dict[str, Any] = {"channel": channel, "thread_ts": thread}
    team = team_id or event.get("team")
    if isinstance(team, str) and team:
        reply_to["team_id"] = team
    return ChatMessage(
        event_id=f"{channel}:{ts}",
        speaker=speaker,
        speaker_id=user,
        text=_readable(text),
        sent_at=from_unix(ts, _PLATFORM, "event.ts"),
        channel=channel,
        thread=thread,
        reply_to=reply_to,
        conversation=channel if thread == ts else f"{channel}/{thread}",
    )


def _required(event: dict[str, Any], key: str) -> str:
    value = event.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"Slack channel: a message event without event.{key}")
    return value


def _readable(text: str) -> str:
    return _TOKEN.sub(lambda m: _token(m[1]), text).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _token(token: str) -> str:
    target, _, label = token.partition("|")
    if target[0] in "@#":
        return f"{target[0]}{label.lstrip(target[0]) or target[1:]}"
    if target.startswith("!"):
        return label or f"@{target[1:].split('^', 1)[0]}"  # <!here>, <!subteam^S1|@team>, <!date^...|fallback>
    if target.startswith("mailto:") and (not label or label == target[7:]):
        return target[7:]
    return target if not label or label == target else f"{label} ({target})"
