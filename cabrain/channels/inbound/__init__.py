"""Inbound chat channels: verify a platform's signed webhook request, then read the messages in it.

Before a byte of the body is read, the request must use a method its platform sends and carry the
headers its signature travels in (each adapter's ``signed_by``, :func:`require_signed_headers`); the
body is read up to ``CABRAIN_CHANNEL_MAX_BODY_BYTES``. Each adapter's :meth:`~Adapter.receive` then
checks the request the way its platform signs it before it parses the body: a missing or wrong signature, or a stale timestamp, is
:class:`~cabrain.errors.Unauthenticated`; a channel without its secret configured is
:class:`~cabrain.errors.ConfigError`; a verified body of the wrong shape is
:class:`~cabrain.errors.InputError`. Events that are not something a person wrote (bot messages,
edits, delivery statuses, reactions, joins) are received with no messages.

    slack      Slack Events API            x-slack-signature over v0:timestamp:body (slack_sdk)
    whatsapp   WhatsApp Cloud API          hub.verify_token on subscribe; x-hub-signature-256 over the body
    talk       Nextcloud Talk webhook bot  x-nextcloud-talk-signature over random + body
    webhook    Standard Webhooks           webhook-signature over id.timestamp.body (whsec_ secret)
"""

from __future__ import annotations

from cabrain.channels.inbound.base import (
    Adapter,
    ChannelSecrets,
    ChatMessage,
    RawRequest,
    Received,
    require_signed_headers,
)
from cabrain.channels.inbound.slack import SlackAdapter
from cabrain.channels.inbound.talk import TalkAdapter
from cabrain.channels.inbound.webhook import WebhookAdapter
from cabrain.channels.inbound.whatsapp import WhatsAppAdapter
from cabrain.errors import InputError

__all__ = [
    "ADAPTERS",
    "Adapter",
    "ChannelSecrets",
    "ChatMessage",
    "RawRequest",
    "Received",
    "SlackAdapter",
    "TalkAdapter",
    "WebhookAdapter",
    "WhatsAppAdapter",
    "adapter",
    "require_signed_headers",
]

ADAPTERS: dict[str, Adapter] = {a.kind: a for a in (SlackAdapter(), WhatsAppAdapter(), TalkAdapter(), WebhookAdapter())}
"""Every inbound adapter, by the kind a channel is configured with."""


def adapter(kind: str) -> Adapter:
    """The adapter for channels of ``kind``, or an :class:`InputError` naming the kinds there are."""
    try:
        return ADAPTERS[kind]
    except KeyError:
        raise InputError(
            f"unknown channel kind {kind!r:.40}", hint=f"use one of: {', '.join(sorted(ADAPTERS))}"
        ) from None
