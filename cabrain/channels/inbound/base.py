"""What every inbound chat adapter shares: the request it is handed, the secrets it checks it with,
the messages it gives back, and the few checks each one makes the same way.

The types live here rather than in the package's ``__init__`` so that each adapter module can import
them while ``__init__`` imports the adapters to build its registry.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from cabrain.errors import ConfigError, InputError, MethodNotAllowed, Unauthenticated

__all__ = [
    "TOLERANCE_S",
    "Adapter",
    "ChannelSecrets",
    "ChatMessage",
    "RawRequest",
    "Received",
    "digests_match",
    "fresh_timestamp",
    "from_unix",
    "json_body",
    "require_header",
    "require_method",
    "require_signed_headers",
    "signing_secret",
]

TOLERANCE_S = 5 * 60
"""How far a signed timestamp may be from now, either way, before the request is refused as a replay."""

_UNIX_SECONDS = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True)
class RawRequest:
    """An HTTP request as the platform sent it: the body is the exact bytes its signature covers."""

    method: str
    headers: Mapping[str, str]  # lower-cased names
    query: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class ChannelSecrets:
    """What a channel is configured with to check its platform's requests."""

    signing_secret: str | None  # Slack signing secret / WhatsApp app secret / Talk bot secret / whsec_...
    verify_token: str | None = None  # WhatsApp's hub.verify_token
    max_skew_s: float = 300.0  # a signed timestamp further from now is refused (CABRAIN_CHANNEL_MAX_SKEW_S)


@dataclass(frozen=True)
class ChatMessage:
    """One message a person wrote, as an adapter read it from its platform's payload."""

    event_id: str  # the platform's unique id for this message, to drop replays and retries
    speaker: str  # display name if the payload has one, else the user id
    speaker_id: str
    text: str
    sent_at: datetime  # timezone-aware UTC
    channel: str
    thread: str  # a stable id of the conversation thread
    reply_to: dict[str, Any]  # what an outbound reply needs to land in the same thread
    # the conversation the message is a turn of (its memory's metadata.thread) when that is not
    # ``thread``: a Slack channel's top-level messages are one conversation, though each is the
    # thread its replies go to. Its sittings are found from the messages' times.
    conversation: str | None = None


@dataclass(frozen=True)
class Received:
    """What a verified request held: its messages, and the answer the platform expects if not 200 JSON."""

    messages: list[ChatMessage]
    reply: tuple[int, str, bytes] | None = None  # (status, content type, body)
    event_id: str | None = None  # the delivery's own id (Slack event_id, webhook-id) for dedup of retries


class Adapter(Protocol):
    """Verifies one platform's signed webhook request and reads the messages in it."""

    kind: str

    @property
    def signed_by(self) -> Mapping[str, tuple[str, ...]]:
        """By method: the headers a signed request carries."""
        ...

    def receive(self, request: RawRequest, secrets: ChannelSecrets, now: datetime) -> Received: ...


def require_signed_headers(adapter: Adapter, request: RawRequest, platform: str) -> None:
    """The checks made before a byte of the body is read: a method the platform sends, and the
    headers its signature travels in (the signature itself is checked by :meth:`Adapter.receive`)."""
    headers = adapter.signed_by.get(request.method.upper())
    if headers is None:
        require_method(request, platform, *adapter.signed_by)
        return
    for name in headers:
        require_header(request, name, platform)


def signing_secret(secrets: ChannelSecrets, platform: str, *, hint: str) -> str:
    """The configured secret, or a :class:`ConfigError`: no request can be trusted without it."""
    if not secrets.signing_secret:
        raise ConfigError(
            f"{platform} channel: no signing secret is configured, so no request can be verified", hint=hint
        )
    return secrets.signing_secret


def require_method(request: RawRequest, platform: str, *allowed: str) -> None:
    if request.method.upper() not in allowed:
        raise MethodNotAllowed(
            f"{platform} channel: {request.method} is not answered here",
            hint=f"{platform} sends {' or '.join(allowed)} requests to this endpoint",
        )


def require_header(request: RawRequest, name: str, platform: str) -> str:
    value = request.headers.get(name)
    if not value:
        raise Unauthenticated(
            f"{platform} channel: missing signature: the request has no {name} header",
            hint=f"only {platform} itself, signing with the channel's secret, can post here",
        )
    return value


def fresh_timestamp(value: str, now: datetime, platform: str, header: str, tolerance_s: float = TOLERANCE_S) -> int:
    """The signed Unix timestamp in ``header``, refused unless it is within ``tolerance_s`` of now."""
    if not _UNIX_SECONDS.fullmatch(value):
        raise Unauthenticated(f"{platform} channel: malformed timestamp: {header} is not Unix seconds")
    stamp = int(value)
    skew = now.timestamp() - stamp
    if abs(skew) > tolerance_s:
        raise Unauthenticated(
            f"{platform} channel: stale timestamp: {header} is {abs(skew):.0f} s "
            f"{'behind' if skew > 0 else 'ahead of'} this server's clock (at most {tolerance_s:.0f} s either way)",
            hint="a replayed request is refused this way; if the platform's requests all fail so, check this server's clock (NTP)",
        )
    return stamp


def digests_match(expected: str, given: str) -> bool:
    """Constant-time comparison of two ASCII digests (a non-ASCII ``given`` never matches)."""
    try:
        return hmac.compare_digest(expected.encode("ascii"), given.encode("ascii"))
    except UnicodeEncodeError:
        return False


def json_body(body: bytes, platform: str) -> Any:
    """The verified body decoded as JSON, or an :class:`InputError` saying why it is not."""
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{platform} channel: the request body is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{platform} channel: the request body is not JSON ({exc.msg} at character {exc.pos})"
        ) from None


def from_unix(value: Any, platform: str, where: str) -> datetime:
    """A Unix time in seconds (a number or a numeric string, fractions allowed) as an aware UTC datetime."""
    try:
        seconds = float(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
    except ValueError:
        seconds = None
    if seconds is None or seconds != seconds or not 0 <= seconds < 253402300800:  # NaN, or outside years 1970-9999
        raise InputError(f"{platform} channel: {where} must be a Unix time in seconds, got {value!r:.80}")
    return datetime.fromtimestamp(seconds, UTC)
