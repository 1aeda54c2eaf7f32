"""WhatsApp Cloud API webhooks, verified the way Meta signs them.

Subscribing: Meta sends a GET with ``hub.mode=subscribe``, ``hub.verify_token`` and
``hub.challenge``; the challenge is echoed back only when the token is the one configured.
Notifications: a POST whose ``x-hub-signature-256`` is ``sha256=`` and the hex HMAC-SHA256 of the
raw body under the app secret. Meta's signature carries no timestamp, so a replayed notification
passes it: the wamid each message carries is what drops it.

A notification batches ``entry[].changes[]``; each ``messages`` change holds the business number
(``metadata.phone_number_id``), the senders' profiles (``contacts``) and ``messages``. Text, the
caption of an image, video or document, and the label of a tapped button or list row are messages;
delivery ``statuses``, reactions, stickers, locations and the rest yield nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from typing import Any

from cabrain.channels.inbound.base import (
    ChannelSecrets,
    ChatMessage,
    RawRequest,
    Received,
    digests_match,
    from_unix,
    json_body,
    require_header,
    require_method,
    signing_secret,
)
from cabrain.errors import ConfigError, InputError, Unauthenticated

__all__ = ["KIND", "WhatsAppAdapter"]

KIND = "whatsapp"

_PLATFORM = "WhatsApp"
_SECRET_HINT = "set the channel's signing secret to the App Secret under the Meta app's App settings > Basic"
_CAPTIONED = ("image", "video", "document")


class WhatsAppAdapter:
    """A Meta app's WhatsApp Business Account webhook callback URL."""

    kind = KIND
    signed_by = {"POST": ("x-hub-signature-256",), "GET": ()}  # GET: hub.verify_token, in the query

    def receive(self, request: RawRequest, secrets: ChannelSecrets, now: datetime) -> Received:
        require_method(request, _PLATFORM, "GET", "POST")
        if request.method.upper() == "GET":
            return _subscribe(request, secrets)
        _verify(request, signing_secret(secrets, _PLATFORM, hint=_SECRET_HINT))
        payload = json_body(request.body, _PLATFORM)
        if not isinstance(payload, dict):
            raise InputError("WhatsApp channel: the request body is not a JSON object")
        if payload.get("object") != "whatsapp_business_account":
            return Received([])  # another product's notification sent to this app's callback
        messages: list[ChatMessage] = []
        for entry in _list(payload, "entry"):
            for change in _list(_object(entry, "entry[]"), "changes"):
                change = _object(change, "entry[].changes[]")
                if change.get("field") == "messages":
                    messages.extend(_messages(_object(change.get("value"), "entry[].changes[].value")))
        return Received(messages)


def _subscribe(request: RawRequest, secrets: ChannelSecrets) -> Received:
    if not secrets.verify_token:
        raise ConfigError(
            "WhatsApp channel: no verify token is configured, so Meta's subscription request cannot be answered",
            hint="set the channel's verify token to the Verify token entered with the callback URL in the Meta app's WhatsApp > Configuration",
        )
    if request.query.get("hub.mode") != "subscribe":
        raise Unauthenticated("WhatsApp channel: a GET that is not a subscription request (hub.mode is not subscribe)")
    given = request.query.get("hub.verify_token")
    if not given:
        raise Unauthenticated(
            "WhatsApp channel: missing verify token: the subscription request has no hub.verify_token"
        )
    if not hmac.compare_digest(given.encode("utf-8"), secrets.verify_token.encode("utf-8")):
        raise Unauthenticated(
            "WhatsApp channel: wrong verify token: hub.verify_token is not the channel's verify token",
            hint="enter the channel's verify token as the Verify token in the Meta app's WhatsApp > Configuration",
        )
    challenge = request.query.get("hub.challenge")
    if not challenge:
        raise InputError("WhatsApp channel: a subscription request without hub.challenge")
    return Received([], reply=(200, "text/plain", challenge.encode("utf-8")))


def _verify(request: RawRequest, secret: str) -> None:
    header = require_header(request, "x-hub-signature-256", _PLATFORM)
    scheme, _, given = header.partition("=")
    expected = hmac.new(secret.encode("utf-8"), request.body, hashlib.sha256).hexdigest()
    if scheme != "sha256" or not digests_match(expected, given.lower()):
        raise Unauthenticated(
            "WhatsApp channel: bad signature: x-hub-signature-256 does not match the body signed with the channel's app secret",
            hint=_SECRET_HINT,
        )


def _messages(value: dict[str, Any]) -> list[ChatMessage]:
    metadata = _object(value.get("metadata"), "value.metadata")
    phone_number_id = _string(metadata, "phone_number_id", "value.metadata")
    names: dict[str, str] = {}
    contacts = value.get("contacts")
    for contact in contacts if isinstance(contacts, list) else []:
        profile = contact.get("profile") if isinstance(contact, dict) else None
        name = profile.get("name") if isinstance(profile, dict) else None
        if isinstance(name, str) and name.strip() and isinstance(contact.get("wa_id"), str):
            names[contact["wa_id"]] = name.strip()
    out = []
    for raw in _list(value, "messages") if "messages" in value else []:  # a statuses change has none
        raw = _object(raw, "value.messages[]")
        text = _text(raw)
        if text is None:
            continue
        sender = _string(raw, "from", "value.messages[]")
        wamid = _string(raw, "id", "value.messages[]")
        out.append(
            ChatMessage(
                event_id=wamid,
                speaker=names.get(sender, sender),
                speaker_id=sender,
                text=text,
                sent_at=from_unix(raw.get("timestamp"), _PLATFORM, "value.messages[].timestamp"),
                channel=phone_number_id,
                thread=f"{phone_number_id}:{sender}",
                reply_to={"phone_number_id": phone_number_id, "to": sender, "message_id": wamid},
            )
        )
    return out


def _text(raw: dict[str, Any]) -> str | None:
    """What the person wrote or chose, or None for a message that holds no words."""
    kind = raw.get("type")
    part = raw.get(kind) if isinstance(kind, str) else None
    if not isinstance(part, dict):
        return None
    if kind == "text":
        text = part.get("body")
    elif kind in _CAPTIONED:
        text = part.get("caption")
    elif kind == "button":
        text = part.get("text")
    elif kind == "interactive":
        reply = part.get("button_reply") or part.get("list_reply")
        text = reply.get("title") if isinstance(reply, dict) else None
    else:
        return None  # reaction, sticker, location, contacts, order, system, unsupported ...
    return text if isinstance(text, str) and text.strip() else None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"WhatsApp channel: {where} must be a JSON object, got {type(value).__name__}")
    return value


def _list(parent: dict[str, Any], key: str) -> list[Any]:
    value = parent.get(key)
    if not isinstance(value, list):
        raise InputError(f"WhatsApp channel: {key} must be a JSON list, got {type(value).__name__}")
    return value


def _string(parent: dict[str, Any], key: str, where: str) -> str:
    value = parent.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"WhatsApp channel: {where}.{key} must be a non-empty string, got {value!r:.80}")
    return value
