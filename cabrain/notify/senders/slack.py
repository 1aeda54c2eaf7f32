"""Slack: a notice posted with the Web API's ``chat.postMessage`` (slack-sdk's async client).

The secret is a bot token (``xoxb-...``) with the ``chat:write`` scope. Config::

    {"base_url": "https://slack.com/api/", "timeout_s": 10}

A target is ``{"channel": "C0123456789", "thread_ts": "1712345678.000100"}`` (``thread_ts``, when
given, posts the notice as a reply in that thread). Link previews are off: a notice's links are many
and short-lived. The message id answered is the message's ``ts``.

Slack answers most failures with HTTP 200 and ``{"ok": false, "error": ...}``; they map to:
``ratelimited`` (HTTP 429): retry after ``Retry-After``; a refused token (``invalid_auth``,
``not_authed``, ``account_inactive``, ``token_revoked``, ``missing_scope``): no retry; a channel that
no longer exists (``channel_not_found``, ``is_archived``): gone; 5xx and a lost connection: retry.
slack-sdk's own retry handlers are off: the outbox retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from cabrain.clock import Clock, utc_now
from cabrain.connectors.retry import retry_after
from cabrain.egress import Egress, EgressDenied
from cabrain.notify.senders import DeliveryError, Notice, clip, need_secret, required, timeout_s, transient

__all__ = ["KIND", "SlackSender", "build"]

KIND = "slack"
MAX_TEXT = 40_000  # Slack truncates longer messages

TOKEN_ERRORS = {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "missing_scope"}
GONE_ERRORS = {"channel_not_found", "is_archived"}
RETRY_ERRORS = {"ratelimited", "fatal_error", "internal_error", "service_unavailable", "request_timeout"}
TOKEN_HINT = (
    "give the Slack app's bot token (xoxb-...) with the chat:write scope; reinstall the app to the "
    "workspace if the token was revoked"
)
HINTS = {
    "not_in_channel": "invite the Slack app to the channel (/invite @app) or give it chat:write.public",
    "msg_too_long": "the message is too long for Slack",
}


class SlackSender:
    kind = KIND

    def __init__(self, config: Mapping[str, Any], secret: str | None, egress: Egress) -> None:
        self.egress = egress
        self.client = AsyncWebClient(
            token=need_secret(KIND, secret, "a Slack bot token"),
            base_url=str(config.get("base_url", "https://slack.com/api/")),
            timeout=int(max(1, round(timeout_s(config)))),
            retry_handlers=[],
        )

    async def send(self, target: Mapping[str, Any], notice: Notice) -> str | None:
        channel = required(target, "channel", KIND)
        thread_ts = target.get("thread_ts")
        what = f"Slack chat.postMessage to {channel}"
        if self.client.session is None:  # made in the running loop: every address it connects to is checked
            self.client.session = aiohttp.ClientSession(connector=self.egress.aiohttp_connector(), trust_env=False)
        try:
            response = await self.client.chat_postMessage(
                channel=channel,
                text=clip(notice.text, MAX_TEXT),
                thread_ts=str(thread_ts) if thread_ts else None,
                unfurl_links=False,
            )
        except SlackApiError as exc:
            raise _refused(exc, what, channel) from exc
        except EgressDenied as exc:
            raise DeliveryError(f"{what}: {exc.message}", retry=False, hint=exc.hint) from exc
        except TimeoutError as exc:
            raise DeliveryError(f"{what}: Slack did not answer in time", retry=True) from exc
        except aiohttp.ClientError as exc:
            raise DeliveryError(f"{what}: could not reach Slack ({type(exc).__name__})", retry=True) from exc
        except SlackClientError as exc:
            raise DeliveryError(f"{what}: {type(exc).__name__}", retry=False) from exc
        ts = response.get("ts")
        return str(ts) if ts is not None else None

    async def aclose(self) -> None:
        session = self.client.session
        if session is not None and not session.closed:
            await session.close()


def _refused(exc: SlackApiError, what: str, channel: str) -> DeliveryError:
    response = exc.response
    status = int(getattr(response, "status_code", 0) or 0)
    data = getattr(response, "data", None)
    error = str(data.get("error", "")) if isinstance(data, Mapping) else ""
    headers = getattr(response, "headers", None) or {}
    wait = retry_after(next((str(v) for k, v in headers.items() if k.lower() == "retry-after"), None))
    said = f"{error} (HTTP {status})" if error else f"HTTP {status}"
    if error in TOKEN_ERRORS:
        return DeliveryError(
            f"{what}: Slack refused the token: {said}", retry=False, hint=TOKEN_HINT, status_code=status
        )
    if error in GONE_ERRORS:
        return DeliveryError(
            f"{what}: the channel {channel} is gone: {said}",
            retry=False,
            gone=True,
            hint="pick another channel for this destination",
            status_code=status,
        )
    retry = error in RETRY_ERRORS or transient(status)
    return DeliveryError(
        f"{what}: Slack answered {said}",
        retry=retry,
        retry_after=wait if retry else None,
        hint=HINTS.get(error),
        status_code=status,
    )


def build(config: Mapping[str, Any], secret: str | None, *, clock: Clock = utc_now, egress: Egress) -> SlackSender:
    return SlackSender(config, secret, egress)
