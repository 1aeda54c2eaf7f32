"""Webhooks: a notice POSTed as JSON to a URL, signed per the Standard Webhooks specification
(https://www.standardwebhooks.com).

The body is ``{"type": <the event's kind>, "timestamp": <ISO 8601>, "data": <the event>, "title",
"text", "links"}``, sent with three headers: ``webhook-id`` (the notice's key: the same on every try
of one delivery, so a receiver drops repeats), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}``. The key is
the secret: ``whsec_`` and base64 of the key bytes, as Standard Webhooks libraries make them, or any
other string, used as its UTF-8 bytes (the signing is the channels' own,
:func:`cabrain.channels.inbound.webhook.sign`, so what CaBrain sends it would also accept). Config::

    {"timeout_s": 10}

A target is ``{"url": "https://hooks.example.com/cabrain"}`` (http or https; a URL with a user name
or password in it is refused: credentials go in the signing secret, not in a URL that is logged).

Answers: any 2xx is delivered; 410 means the receiver is gone for good; 429, 5xx and a lost
connection are retried (after ``Retry-After``); other statuses, redirects included, are not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from cabrain.channels.inbound.webhook import sign  # one signing, both ways
from cabrain.clock import Clock, utc_now
from cabrain.egress import Egress
from cabrain.notify.senders import DeliveryError, Notice, need_secret, required, shown
from cabrain.notify.senders.http import client, post, refused

__all__ = ["KIND", "WebhookSender", "build"]

KIND = "webhook"


class WebhookSender:
    kind = KIND

    def __init__(
        self, config: Mapping[str, Any], secret: str | None, *, clock: Clock = utc_now, egress: Egress
    ) -> None:
        self.secret = need_secret(KIND, secret, "a webhook signing secret")
        sign(self.secret, "check", 0, b"")  # a malformed whsec_ secret fails here, not on every delivery
        self.clock = clock
        self.http = client(config, egress)

    async def send(self, target: Mapping[str, Any], notice: Notice) -> str | None:
        url = required(target, "url", KIND)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise DeliveryError(f"a webhook URL must be http(s), not {shown(url)}", retry=False)
        if parts.username is not None or parts.password is not None:
            raise DeliveryError(
                f"the webhook URL {shown(url)} has a user name or password in it",
                retry=False,
                hint="take the credentials out of the URL; the receiver verifies the signature instead",
            )
        now = self.clock()
        body = json.dumps(
            {
                "type": notice.data.get("kind"),
                "timestamp": now.isoformat(),
                "data": notice.data,
                "title": notice.title,
                "text": notice.text,
                "links": notice.links,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        headers = {
            "Content-Type": "application/json",
            **sign(self.secret, notice.key, int(now.timestamp()), body if isinstance(body, bytes) else body.encode()),
        }
        what = f"webhook {notice.key}"
        response = await post(self.http, url, what=what, content=body, headers=headers)
        if response.is_success:
            return None
        if response.status_code == 410:
            raise refused(response, what, detail="the receiver is gone", gone=True, hint="remove this webhook")
        if response.is_redirect:
            there = shown(str(response.next_request.url)) if response.next_request else "another URL"
            raise refused(
                response,
                what,
                detail=f"redirected to {there}",
                hint="configure the URL it redirects to",
            )
        if response.status_code in (401, 403):
            raise refused(response, what, hint="the receiver refused the signature: give it the same secret")
        raise refused(response, what)

    async def aclose(self) -> None:
        await self.http.aclose()


def build(config: Mapping[str, Any], secret: str | None, *, clock: Clock = utc_now, egress: Egress) -> WebhookSender:
    return WebhookSender(config, secret, clock=clock, egress=egress)
