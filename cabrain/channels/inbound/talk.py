"""Nextcloud Talk webhook bots (Talk 17.1+), verified the way Talk signs them.

Talk signs the ``x-nextcloud-talk-random`` header followed by the raw body with the bot's shared
secret (HMAC-SHA256, hex) into ``x-nextcloud-talk-signature``; ``x-nextcloud-talk-backend`` names the
Nextcloud server that sent it, but no signature covers it, so it is never kept: a reply goes to the
url configured on the channel's notifier. The signature covers no time, so a replayed
request passes it: the message's id (room token and message id) is what drops it.

The body is an Activity Streams 2.0 activity. A ``Create`` of a ``Note`` by anyone but a bot is a
message: its ``content`` is JSON whose ``message`` holds ``{placeholders}`` (mentions, files, ...)
filled with the ``name`` of the matching entry in ``parameters``. System messages (a note not named
``message``), reactions (``Like``, ``Undo``) and the bot joining or leaving a room (``Join``,
``Leave``) yield nothing. Talk's payload carries no time: a message is taken as sent ``now``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import UTC, datetime
from typing import Any

from cabrain.channels.inbound.base import (
    ChannelSecrets,
    ChatMessage,
    RawRequest,
    Received,
    digests_match,
    json_body,
    require_header,
    require_method,
    signing_secret,
)
from cabrain.errors import InputError, Unauthenticated

__all__ = ["KIND", "TalkAdapter"]

KIND = "talk"

_PLATFORM = "Nextcloud Talk"
_SECRET_HINT = "set the channel's signing secret to the secret the bot was installed with (occ talk:bot:install)"
# "message" for what a person wrote; "" for a message with an attachment before Nextcloud 33 (a Talk bug)
_WRITTEN = frozenset({"message", ""})
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.-]+)\}")


class TalkAdapter:
    """A Nextcloud Talk webhook bot's URL."""

    kind = KIND
    signed_by = {"POST": ("x-nextcloud-talk-signature", "x-nextcloud-talk-random")}

    def receive(self, request: RawRequest, secrets: ChannelSecrets, now: datetime) -> Received:
        _verify(request, signing_secret(secrets, _PLATFORM, hint=_SECRET_HINT))
        payload = json_body(request.body, _PLATFORM)
        if not isinstance(payload, dict):
            raise InputError("Nextcloud Talk channel: the request body is not a JSON object")
        if payload.get("type") != "Create":
            return Received([])
        actor = _object(payload, "actor")
        note = _object(payload, "object")
        if note.get("type") != "Note" or note.get("name") not in _WRITTEN:
            return Received([])
        actor_id = _string(actor, "id", "actor")
        if actor.get("type") == "Application" or actor_id.startswith("bots/"):
            return Received([])  # another bot, or this one's own answer
        room = _string(_object(payload, "target"), "id", "target")
        message_id = _string(note, "id", "object")
        if not (message_id.isascii() and message_id.isdigit()):
            raise InputError(f"Nextcloud Talk channel: object.id must be a message number, got {message_id!r:.80}")
        text = _render(_string(note, "content", "object"))
        if not text.strip():
            return Received([])
        name = actor.get("name")
        return Received(
            [
                ChatMessage(
                    event_id=f"{room}:{message_id}",
                    speaker=name.strip() if isinstance(name, str) and name.strip() else actor_id,
                    speaker_id=actor_id,
                    text=text,
                    sent_at=now.astimezone(UTC),
                    channel=room,
                    thread=room,
                    # x-nextcloud-talk-backend is not signed: a reply goes to the notifier's configured url
                    reply_to={"room": room, "reply_to": int(message_id)},
                )
            ]
        )


def _verify(request: RawRequest, secret: str) -> None:
    require_method(request, _PLATFORM, "POST")
    given = require_header(request, "x-nextcloud-talk-signature", _PLATFORM)
    random = require_header(request, "x-nextcloud-talk-random", _PLATFORM)
    expected = hmac.new(secret.encode("utf-8"), random.encode("utf-8") + request.body, hashlib.sha256).hexdigest()
    if not digests_match(expected, given.lower()):
        raise Unauthenticated(
            "Nextcloud Talk channel: bad signature: x-nextcloud-talk-signature does not match the random and body "
            "signed with the bot's secret",
            hint=_SECRET_HINT,
        )


def _render(content: str) -> str:
    """The message of a note's JSON ``content`` with its placeholders filled in by name."""
    try:
        decoded = json.loads(content)
    except json.JSONDecodeError:
        raise InputError("Nextcloud Talk channel: object.content is not JSON") from None
    if not isinstance(decoded, dict) or not isinstance(decoded.get("message"), str):
        raise InputError("Nextcloud Talk channel: object.content has no message string")
    # Talk (PHP) encodes no parameters as an empty list, not an empty object
    parameters = decoded.get("parameters")
    if not isinstance(parameters, dict):
        parameters = {}

    def fill(match: re.Match[str]) -> str:
        parameter = parameters.get(match[1])
        name = parameter.get("name") if isinstance(parameter, dict) else None
        return name if isinstance(name, str) else match[0]

    return _PLACEHOLDER.sub(fill, decoded["message"])


def _object(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    if not isinstance(value, dict):
        raise InputError(f"Nextcloud Talk channel: {key} must be a JSON object, got {type(value).__name__}")
    return value


def _string(parent: dict[str, Any], key: str, where: str) -> str:
    value = parent.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"Nextcloud Talk channel: {where}.{key} must be a non-empty string, got {value!r:.80}")
    return value
