"""Web Push: a notice pushed to a browser's push subscription (RFC 8030), its payload encrypted for
that browser (RFC 8291, ``aes128gcm``) and the request signed with the server's VAPID key (RFC 8292),
through pywebpush.

The secret is the VAPID private key: PEM text, or base64url of the raw 32-byte key (what most VAPID
generators print), or base64 DER; its public key is the ``applicationServerKey`` the browser
subscribed with. Config::

    {"vapid_subject": "mailto:ops@example.com", "ttl": 86400, "urgency": "normal",
     "timeout_s": 10, "allow_http": false, "push_services": ["fcm.googleapis.com"]}

``push_services`` (optional) lists the push services' hosts a subscriber that is not an admin may
subscribe an endpoint on (a leading dot: any host under it; by default FCM, Mozilla's, Apple's and
Windows'), checked by :mod:`cabrain.notify.facade`; every endpoint also passes the egress policy
(:mod:`cabrain.egress`) when it is subscribed and when a push is sent.

A target is the subscription's JSON as the browser gives it (``PushSubscription.toJSON()``):
``{"endpoint": "https://...", "keys": {"p256dh": "...", "auth": "..."}}``. Only https endpoints are
sent to unless ``allow_http`` (tests on loopback). The payload is JSON ``{"title", "body", "links",
"data"}`` of at most 3,000 bytes (push services take 4 KiB of ciphertext): ``body`` is cut to fit,
after ``data`` and then ``links`` are left out if even an empty body would not. The message id
answered is the push message's ``Location``.

Answers: 404 and 410 mean the subscription expired or was withdrawn: gone; 429 and 5xx are retried
(after ``Retry-After``); 400, 401, 403 (a VAPID key other than the one subscribed with), 413 and any
other 4xx are not.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import requests
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid, VapidException
from pywebpush import WebPushException, webpush

from cabrain.clock import Clock, utc_now
from cabrain.connectors.retry import retry_after
from cabrain.egress import Egress, EgressDenied
from cabrain.errors import ConfigError
from cabrain.notify.senders import (
    DeliveryError,
    Notice,
    clip,
    need_secret,
    required,
    shown,
    timeout_s,
    transient,
    whole,
)

__all__ = ["KIND", "MAX_PAYLOAD", "WebPushSender", "build", "payload", "vapid_key"]

KIND = "webpush"
MAX_PAYLOAD = 3000  # bytes of JSON before encryption
VAPID_LIFETIME_S = 12 * 3600  # RFC 8292 allows at most 24 hours
URGENCIES = ("very-low", "low", "normal", "high")
KEY_HINT = "give the VAPID private key as PEM text or as base64url of the raw 32-byte P-256 key"


def vapid_key(secret: str) -> Vapid:
    """The VAPID signer for a private key in PEM, raw base64url or base64 DER."""
    text = secret.strip()
    try:
        if text.startswith("-----BEGIN"):
            key: object = serialization.load_pem_private_key(text.encode(), password=None)
        else:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            if len(raw) == 32:
                key = ec.derive_private_key(int.from_bytes(raw, "big"), ec.SECP256R1())
            else:
                key = serialization.load_der_private_key(raw, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ConfigError("the VAPID private key could not be read", hint=KEY_HINT) from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ConfigError("the VAPID private key is not a P-256 (prime256v1) EC key", hint=KEY_HINT)
    return Vapid(private_key=key)


def _size(doc: Mapping[str, Any]) -> int:
    return len(_dumps(doc).encode())


def _dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def payload(notice: Notice, limit: int = MAX_PAYLOAD) -> str:
    """The notice as the push message's JSON, at most ``limit`` bytes (see the module's docstring)."""
    doc: dict[str, Any] = {"title": clip(notice.title, 200), "body": "", "links": notice.links, "data": notice.data}
    if _size(doc) > limit:
        doc["data"] = {}
    if _size(doc) > limit:
        doc["links"] = []
    text = notice.text
    if _size(doc | {"body": text}) <= limit:
        doc["body"] = text
        return _dumps(doc)
    fits, over = 0, len(text)  # the longest prefix that fits, by bisection
    while fits + 1 < over:
        middle = (fits + over) // 2
        if _size(doc | {"body": text[:middle] + "…"}) <= limit:
            fits = middle
        else:
            over = middle
    doc["body"] = text[:fits] + "…" if fits else ""
    return _dumps(doc)


class WebPushSender:
    kind = KIND

    def __init__(
        self, config: Mapping[str, Any], secret: str | None, *, clock: Clock = utc_now, egress: Egress
    ) -> None:
        subject = str(config.get("vapid_subject") or "")
        if not subject.startswith(("mailto:", "https://")):
            raise ConfigError(
                f"vapid_subject must be a mailto: or https: URL that push services can reach you at, not {subject!r}",
                hint='set vapid_subject, e.g. "mailto:ops@example.com"',
            )
        self.subject = subject
        self.vapid = vapid_key(need_secret(KIND, secret, "the VAPID private key"))
        self.ttl = whole(config, "ttl", 86400)
        self.urgency = config.get("urgency")
        if self.urgency is not None and self.urgency not in URGENCIES:
            raise ConfigError(f"urgency must be one of {', '.join(URGENCIES)}, not {self.urgency!r}")
        self.timeout = timeout_s(config)
        self.allow_http = bool(config.get("allow_http", False))
        self.egress = egress
        self.clock = clock

    async def send(self, target: Mapping[str, Any], notice: Notice) -> str | None:
        endpoint = required(target, "endpoint", KIND)
        keys = target.get("keys")
        if not isinstance(keys, Mapping) or not keys.get("p256dh") or not keys.get("auth"):
            raise DeliveryError(
                "a push subscription needs keys.p256dh and keys.auth",
                retry=False,
                hint="store the browser's whole push subscription (its JSON form: endpoint and keys)",
            )
        parts = urlsplit(endpoint)
        if parts.scheme != "https" and not (parts.scheme == "http" and self.allow_http):
            raise DeliveryError(
                f"a push endpoint must be https, not {shown(endpoint)}", retry=False, hint="resubscribe the browser"
            )
        where = f"push to {shown(endpoint)}"
        claims: dict[str, str | int] = {
            "sub": self.subject,
            "aud": f"{parts.scheme}://{parts.netloc}",
            "exp": int(self.clock().timestamp()) + VAPID_LIFETIME_S,
        }
        headers: dict[str, str | int | float] = {"Urgency": self.urgency} if self.urgency else {}
        subscription = {"endpoint": endpoint, "keys": {"p256dh": str(keys["p256dh"]), "auth": str(keys["auth"])}}
        try:
            self.egress.check_url(endpoint, "a push endpoint")
        except EgressDenied as exc:
            raise DeliveryError(f"{where}: {exc.message}", retry=False, hint=exc.hint) from exc
        session = self.egress.session()  # every connection, a redirect's too, to a checked address
        try:
            response = await asyncio.to_thread(
                webpush,
                subscription,
                data=payload(notice),
                vapid_private_key=self.vapid,
                vapid_claims=claims,
                ttl=self.ttl,
                timeout=self.timeout,
                headers=headers,
                requests_session=session,
            )
        except EgressDenied as exc:
            raise DeliveryError(f"{where}: {exc.message}", retry=False, hint=exc.hint) from exc
        except WebPushException as exc:
            raise _refused(exc, where) from exc
        except requests.Timeout as exc:
            raise DeliveryError(f"{where}: the push service did not answer in time", retry=True) from exc
        except requests.ConnectionError as exc:
            raise DeliveryError(f"{where}: could not reach the push service", retry=True) from exc
        except requests.RequestException as exc:
            raise DeliveryError(f"{where}: {type(exc).__name__}", retry=False) from exc
        except (VapidException, ValueError) as exc:
            # a malformed subscription key or VAPID claim: the same request would fail again
            raise DeliveryError(f"{where}: the subscription or the VAPID claims are invalid", retry=False) from exc
        finally:
            session.close()
        location = getattr(response, "headers", {}).get("Location")
        return str(location) if location else None

    async def aclose(self) -> None:
        return None


def _refused(exc: WebPushException, where: str) -> DeliveryError:
    status = exc.status_code
    if status is None:  # raised before sending: the subscription lacks what encryption needs
        return DeliveryError(f"{where}: {exc.message}", retry=False, hint="resubscribe the browser")
    reason = getattr(exc.response, "reason", "") or ""
    message = f"{where}: the push service answered {status} {reason}".rstrip()
    if status in (404, 410):
        return DeliveryError(
            f"{message}: the subscription expired or was withdrawn",
            retry=False,
            gone=True,
            hint="drop this subscription; the browser subscribes anew",
            status_code=status,
        )
    if transient(status):
        return DeliveryError(message, retry=True, retry_after=retry_after(exc.retry_after), status_code=status)
    hints = {
        401: "the VAPID signature was refused: check vapid_subject and the VAPID key",
        403: "the VAPID key is not the one the browser subscribed with (its applicationServerKey)",
        413: "the payload is too large for this push service",
    }
    return DeliveryError(message, retry=False, hint=hints.get(status), status_code=status)


def build(config: Mapping[str, Any], secret: str | None, *, clock: Clock = utc_now, egress: Egress) -> WebPushSender:
    return WebPushSender(config, secret, clock=clock, egress=egress)
