"""Outbound notification senders: one module per platform, each speaking that platform's own API.

A sender delivers one :class:`Notice` to one destination (``target``: a Slack channel, a WhatsApp
number, a Talk conversation, a browser's push subscription, a webhook URL) and answers the
platform's message id where it has one. It fails with :class:`DeliveryError` only, which says
whether a later attempt may succeed (``retry``, with the wait the platform asked for in
``retry_after``) and whether the destination is gone for good (``gone``: stop sending to it). The
caller (the outbox) owns retrying; no sender retries by itself.

The kinds, each a module loaded when used (its client library is imported only then)::

    slack      Slack Web API chat.postMessage (slack-sdk)
    whatsapp   WhatsApp Cloud API (Graph) text messages
    talk       Nextcloud Talk bot messages (HMAC-signed)
    webpush    Web Push with VAPID and aes128gcm payload encryption (pywebpush)
    webhook    Standard Webhooks: a signed JSON POST

A kind's module declares ``KIND`` and ``build(config, secret, *, clock) -> Sender``. ``config`` holds
base URLs and options, never a credential; ``secret`` is the token, bot secret, VAPID key or signing
secret that the caller read through the egress policy (:meth:`cabrain.egress.Egress.secret`). No
error message carries the secret. HTTP timeouts come from ``config["timeout_s"]`` (10 s by default).
Every request connects through ``egress`` (:mod:`cabrain.egress`): to an address the policy allows,
checked after the name is resolved, following no redirect outside it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from cabrain.clock import Clock, utc_now
from cabrain.egress import Egress
from cabrain.errors import CabrainError, ConfigError, InputError

__all__ = ["KINDS", "DeliveryError", "Notice", "Sender", "sender"]

KINDS: dict[str, str] = {
    "slack": "cabrain.notify.senders.slack",
    "whatsapp": "cabrain.notify.senders.whatsapp",
    "talk": "cabrain.notify.senders.talk",
    "webpush": "cabrain.notify.senders.webpush",
    "webhook": "cabrain.notify.senders.webhook",
}
# the client libraries a kind imports that a slim install may lack: top-level module to package
OPTIONAL = {"slack_sdk": "slack-sdk", "aiohttp": "slack-sdk", "pywebpush": "pywebpush", "py_vapid": "pywebpush"}

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Notice:
    """One event worded for one destination."""

    key: str  # unique per (event, destination): the idempotency key where the platform has one
    title: str
    text: str  # the plain-text message, links included
    links: list[str]
    data: dict[str, Any]  # the event as JSON (webhooks and web push send it)


class DeliveryError(CabrainError):
    """A notice was not delivered.

    ``retry``: a later attempt may succeed (429, 5xx, a refused or reset connection, a timeout);
    ``retry_after``: the seconds the platform asked to wait, where it said; ``gone``: the destination
    no longer exists (an expired push subscription, a deleted channel): stop sending to it.
    ``status_code`` is the platform's HTTP status where it answered one.
    """

    def __init__(
        self,
        message: str,
        *,
        retry: bool,
        retry_after: float | None = None,
        gone: bool = False,
        hint: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.retry = retry
        self.retry_after = retry_after
        self.gone = gone
        self.status_code = status_code


class Sender(Protocol):
    kind: str

    async def send(self, target: Mapping[str, Any], notice: Notice) -> str | None:
        """Deliver ``notice`` to ``target``; the platform's message id, if it gives one."""
        ...

    async def aclose(self) -> None: ...


def sender(
    kind: str, config: Mapping[str, Any], secret: str | None, *, clock: Clock = utc_now, egress: Egress | None = None
) -> Sender:
    """The sender of ``kind`` (:data:`KINDS`) on ``config``, authenticating with ``secret``, sending
    where ``egress`` allows (None: public addresses only)."""
    if kind not in KINDS:
        raise InputError(f"unknown notification kind {kind!r}; the kinds are: {', '.join(sorted(KINDS))}")
    if not isinstance(config, Mapping):
        raise InputError(f"a {kind} destination's config must be a JSON object")
    try:
        module = importlib.import_module(KINDS[kind])
    except ImportError as exc:
        package = OPTIONAL.get((exc.name or "").split(".")[0])
        if package is None:
            raise
        raise ConfigError(
            f"{kind} notifications need the {package} package, which is not installed",
            hint=f"pip install {package}",
        ) from exc
    built: Sender = module.build(config, secret, clock=clock, egress=egress or Egress())
    return built


def timeout_s(config: Mapping[str, Any]) -> float:
    value = config.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"timeout_s must be a positive number of seconds, not {value!r}")
    return float(value)


def whole(config: Mapping[str, Any], key: str, default: int, *, least: int = 0) -> int:
    """An integer option of at least ``least``, or a :class:`ConfigError` naming it."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{key} must be a whole number of at least {least}, not {value!r}")
    return value


def need_secret(kind: str, secret: str | None, what: str) -> str:
    if not secret:
        raise ConfigError(f"{kind} notifications need {what}, and none was given", hint=f"set {what} for it")
    return secret


def required(target: Mapping[str, Any], key: str, kind: str) -> str:
    """A required string of a destination, or a :class:`DeliveryError` that no retry mends."""
    value = target.get(key)
    if not isinstance(value, str) or not value:
        raise DeliveryError(
            f"a {kind} destination needs {key!r} (a non-empty string)", retry=False, hint=f"set {key} on it"
        )
    return value


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def shown(url: str) -> str:
    """A URL fit for an error message: scheme, host and path (no credentials, no query)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


def transient(status: int) -> bool:
    return status == 429 or status >= 500
