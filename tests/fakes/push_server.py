"""A Web Push service stand-in (RFC 8030) for the web push sender's tests: it checks the VAPID
authorization (RFC 8292) and decrypts the payload (RFC 8291, ``aes128gcm``) with the subscriber's
keys, as the browser would, so a test sees exactly what the browser's service worker would get.

Run: python -m tests.fakes.push_server --port PORT --state FILE --token TOKEN [--log FILE]
(TOKEN is unused: a push service knows senders by their VAPID key, not a token).

FILE is JSON, re-read on every request; a test makes each subscription's keys with ``cryptography``
(a P-256 key pair and a 16-byte auth secret) and gives the browser's half here::

    {"subscriptions": {"s1": {"private_key": "<base64url of the raw 32-byte P-256 private key, or PEM>",
                              "auth": "<base64url of the 16-byte auth secret>",
                              "application_server_key": "<base64url VAPID public key>"}},  # optional
     "gone": ["s0"],
     "faults": [{"match": "/push/s1", "status": 503, "times": 2},
                {"match": "/push/", "status": 429, "retry_after": 7}]}

Route: ``POST /push/<id>``. In order: a subscription listed in ``gone`` is a 410 and an unknown one
a 404; ``Authorization: vapid t=<JWT>, k=<public key>`` must carry an ES256 JWT whose signature
verifies with ``k``, whose ``aud`` is this service's origin (``http://<Host>``), whose ``exp`` is in
the future and at most 24 hours away and whose ``sub`` is a ``mailto:`` or ``https:`` URL (else 401);
``k`` must be the subscription's ``application_server_key`` where it has one (else 403); ``TTL``
must be a non-negative integer (else 400); ``Content-Encoding`` must be ``aes128gcm`` (else 415);
the body at most 4096 bytes (else 413) and decrypt with the subscriber's keys (else 400). Success is
a 201 with ``Location: /message/<id>`` and the ``TTL`` kept.

Each fault answers the next ``times`` requests whose path contains ``match`` before anything is
checked (``Retry-After`` when ``retry_after`` is set). ``--log`` appends one JSON line per accepted
message: path, subscription, ttl, urgency, topic, aud, sub, location, and ``payload``: the decrypted
body (parsed when it is JSON, else its text).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
import time
import uuid
from http.server import ThreadingHTTPServer
from typing import Any

import http_ece
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils

from tests.fakes import Quiet, Stand, send_body, serve_stand

ROUTE = re.compile(r"^/push/([^/?]+)$")
MAX_BODY = 4096
MAX_EXP_S = 24 * 3600


class Push(Stand):
    """The push service stand-in's state file, faults and message log."""


def b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def private_key(text: str) -> ec.EllipticCurvePrivateKey:
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_private_key(text.encode(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key
    return ec.derive_private_key(int.from_bytes(b64url(text), "big"), ec.SECP256R1())


def vapid_claims(header: str, origin: str) -> tuple[dict[str, Any], str]:
    """The claims of a valid ``vapid t=..., k=...`` header and its key; ValueError for anything else."""
    scheme, _, params = header.partition(" ")
    if scheme.lower() != "vapid":
        raise ValueError(f"the authorization scheme is {scheme!r}, not vapid")
    parts = dict(p.strip().split("=", 1) for p in params.split(",") if "=" in p)
    token, key = parts.get("t", ""), parts.get("k", "")
    if not token or not key:
        raise ValueError("vapid needs t= and k=")
    try:
        head, body, signature = token.split(".")
        if json.loads(b64url(head)).get("alg") != "ES256":
            raise ValueError("the JWT is not ES256")
        raw = b64url(signature)
        if len(raw) != 64:
            raise ValueError("an ES256 signature is 64 bytes")
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64url(key))
        der = utils.encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        public.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
        claims: dict[str, Any] = json.loads(b64url(body))
    except (InvalidSignature, binascii.Error) as exc:
        raise ValueError(f"the JWT does not verify with k ({type(exc).__name__})") from exc
    if claims.get("aud") != origin:
        raise ValueError(f"aud is {claims.get('aud')!r}, not {origin!r}")
    now = time.time()
    if not isinstance(claims.get("exp"), int) or not now < claims["exp"] <= now + MAX_EXP_S:
        raise ValueError(f"exp {claims.get('exp')!r} is not within the next 24 hours")
    if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
        raise ValueError("sub must be a mailto: or https: URL")
    return claims, key


class Handler(Quiet):
    server: Server

    def do_POST(self) -> None:
        push = self.server.push
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        state = push.read()
        fault = push.fault(state.get("faults", []), self.path)
        if fault is not None:
            status = int(fault["status"])
            headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
            self.answer(status, fault.get("message", f"fault {status}"), headers)
            return
        route = ROUTE.match(self.path)
        if route is None:
            self.answer(404, "no such route")
            return
        name = route.group(1)
        if name in state.get("gone", []):
            self.answer(410, "push subscription has unsubscribed or expired")
            return
        subscription = state.get("subscriptions", {}).get(name)
        if subscription is None:
            self.answer(404, "no such subscription")
            return
        try:
            claims, key = vapid_claims(self.headers.get("Authorization", ""), f"http://{self.headers.get('Host')}")
        except ValueError as exc:
            self.answer(401, f"invalid VAPID authorization: {exc}")
            return
        if subscription.get("application_server_key") not in (None, key):
            self.answer(403, "the VAPID key is not the one this subscription was made with")
            return
        ttl = self.headers.get("TTL", "")
        if not ttl.isdigit():
            self.answer(400, "a TTL header (a number of seconds) is required")
            return
        if self.headers.get("Content-Encoding", "").lower() != "aes128gcm":
            self.answer(415, "Content-Encoding must be aes128gcm")
            return
        if len(body) > MAX_BODY:
            self.answer(413, f"the payload is over {MAX_BODY} bytes")
            return
        try:
            plain = http_ece.decrypt(
                body,
                private_key=private_key(subscription["private_key"]),
                auth_secret=b64url(subscription["auth"]),
                version="aes128gcm",
            )
        except (http_ece.ECEException, InvalidTag, ValueError, struct.error) as exc:
            self.answer(400, f"the payload does not decrypt: {type(exc).__name__}")
            return
        text = plain.decode()
        try:
            payload: Any = json.loads(text)
        except ValueError:
            payload = text
        location = f"/message/{uuid.uuid4()}"
        push.record(
            {
                "path": self.path,
                "subscription": name,
                "ttl": int(ttl),
                "urgency": self.headers.get("Urgency"),
                "topic": self.headers.get("Topic"),
                "aud": claims["aud"],
                "sub": claims["sub"],
                "location": location,
                "payload": payload,
            }
        )
        self.answer(201, "", {"Location": location, "TTL": ttl})

    def answer(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        send_body(self, status, text.encode(), "text/plain; charset=utf-8", headers)


class Server(ThreadingHTTPServer):
    push: Push


def main() -> None:
    serve_stand(Server, Handler, Push, "push")


if __name__ == "__main__":
    main()
