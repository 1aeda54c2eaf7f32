"""Nextcloud Talk: a notice posted into a conversation by a Talk bot (Talk 17.1 / Nextcloud 27.1+).

``POST {url}/ocs/v2.php/apps/spreed/api/v1/bot/{room}/message``, signed with the bot's shared
secret (the one given to ``occ talk:bot:install``): ``X-Nextcloud-Talk-Bot-Random`` is 64 random
hex characters and ``X-Nextcloud-Talk-Bot-Signature`` the hex HMAC-SHA256 of that random followed
by the message text (Talk signs the message, not the JSON around it). The bot needs the
``response`` feature and must be set up in the conversation. Config::

    {"url": "https://cloud.example.com", "max_length": 32000, "timeout_s": 10}

A target is ``{"room": "<conversation token>"}``, optionally with ``backend`` (the Nextcloud URL a
webhook came from, over the config's) and ``reply_to`` (a message id the notice answers). The
message's ``referenceId`` is the SHA-256 of the notice's key, so a delivery shows up once in a
"get messages" listing however often it was tried. Talk answers 201 with no message id.

Answers: 401 (a wrong secret, or the bot not set up in that conversation) is not retried, nor is
413 (longer than the server's limit); 404 means the conversation (or Talk itself) is not there:
gone; 429 (Talk's brute-force protection after failed signatures) and 5xx are retried.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from cabrain.clock import Clock, utc_now
from cabrain.egress import Egress
from cabrain.notify.senders import DeliveryError, Notice, clip, need_secret, required, whole
from cabrain.notify.senders.http import client, post, refused

__all__ = ["KIND", "TalkSender", "build", "sign_message"]

KIND = "talk"
MAX_LENGTH = 32_000  # Talk's default chat max-length (1000 before Nextcloud 16.0.1)
SECRET_HINT = (
    "give the bot's shared secret (occ talk:bot:install), and set the bot up in the conversation "
    "(occ talk:bot:setup <bot-id> <conversation-token>) with the response feature"
)


def sign_message(secret: str, message: str) -> dict[str, str]:
    """The headers that sign ``message`` as the bot holding ``secret``."""
    random = secrets.token_hex(32)
    digest = hmac.new(secret.encode(), (random + message).encode(), hashlib.sha256).hexdigest()
    return {"X-Nextcloud-Talk-Bot-Random": random, "X-Nextcloud-Talk-Bot-Signature": digest}


class TalkSender:
    kind = KIND

    def __init__(self, config: Mapping[str, Any], secret: str | None, egress: Egress) -> None:
        self.secret = need_secret(KIND, secret, "the Talk bot's shared secret")
        self.url = str(config.get("url") or "").rstrip("/")
        self.max_length = whole(config, "max_length", MAX_LENGTH, least=1)
        self.http = client(config, egress)

    async def send(self, target: Mapping[str, Any], notice: Notice) -> str | None:
        room = required(target, "room", KIND)
        base = str(target.get("backend") or self.url).rstrip("/")
        if not base:
            raise DeliveryError(
                "a Talk destination needs the Nextcloud URL", retry=False, hint="set url in the destination's config"
            )
        message = clip(notice.text, self.max_length)
        body: dict[str, Any] = {
            "message": message,
            "referenceId": hashlib.sha256(notice.key.encode()).hexdigest(),
            "silent": False,
        }
        reply_to = target.get("reply_to")
        if reply_to is not None:
            if isinstance(reply_to, bool) or not str(reply_to).isdigit():
                raise DeliveryError(f"a Talk reply_to is a message id (a number), not {reply_to!r}", retry=False)
            body["replyTo"] = int(reply_to)
        url = f"{base}/ocs/v2.php/apps/spreed/api/v1/bot/{quote(room, safe='')}/message"
        what = f"Talk message to conversation {room}"
        headers = {
            "OCS-APIRequest": "true",
            "Content-Type": "application/json",
            "Accept": "application/json",
            **sign_message(self.secret, message),
        }
        response = await post(self.http, url, what=what, json=body, headers=headers)
        status = response.status_code
        if status in (200, 201):
            return None
        if status == 401:
            raise refused(response, what, detail="the bot's signature was not accepted", hint=SECRET_HINT)
        if status == 404:
            raise refused(
                response,
                what,
                detail="no such conversation (deleted, or a wrong token), or Talk is not installed there",
                hint="check the conversation token and the Nextcloud URL",
                gone=True,
            )
        if status == 413:
            raise refused(response, what, detail="the message is longer than the server takes", hint="lower max_length")
        if status == 400:
            raise refused(response, what, detail="an empty message, or reply_to is not a message of this conversation")
        raise refused(response, what)

    async def aclose(self) -> None:
        await self.http.aclose()


def build(config: Mapping[str, Any], secret: str | None, *, clock: Clock = utc_now, egress: Egress) -> TalkSender:
    return TalkSender(config, secret, egress)
