"""A webhook receiver stand-in for the webhook sender's tests: it verifies the Standard Webhooks
signature (https://www.standardwebhooks.com) the way a receiver's library does, and keeps what it
verified.

Run: python -m tests.fakes.hook_server --port PORT --state FILE --token SECRET [--log FILE].

SECRET is the signing secret: ``whsec_<base64 key>``, or any other string used as its UTF-8 bytes.
FILE is JSON, re-read on every request::

    {"gone": ["/old"],                  # paths that answer 410 Gone
     "tolerance_s": 300,                # how far webhook-timestamp may be from now
     "faults": [{"match": "/hook", "status": 503, "times": 2},
                {"match": "/hook", "status": 429, "retry_after": 7}]}

Any path takes a ``POST``. In order: a path in ``gone`` is a 410; ``webhook-id``,
``webhook-timestamp`` and ``webhook-signature`` must all be there (400); the timestamp within
``tolerance_s`` of now (401); one of the space-separated ``v1,<base64>`` signatures the HMAC-SHA256
of ``{id}.{timestamp}.{body}`` with the key (401); the body JSON (400). Success is a 204.

Each fault answers the next ``times`` requests whose path contains ``match`` before anything is
checked (``Retry-After`` when ``retry_after`` is set). ``--log`` appends one JSON line per verified
delivery: path, id, timestamp, content_type, body (the parsed JSON), ``verified: true``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from http.server import ThreadingHTTPServer

from tests.fakes import Quiet, Stand, send_body, serve_stand


class Hook(Stand):
    """The webhook receiver's state file, signing secret, faults and delivery log."""

    def key(self) -> bytes:
        if self.token.startswith("whsec_"):
            return base64.b64decode(self.token.removeprefix("whsec_"))
        return self.token.encode()


class Handler(Quiet):
    server: Server

    def do_POST(self) -> None:
        hook = self.server.hook
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        state = hook.read()
        fault = hook.fault(state.get("faults", []), self.path)
        if fault is not None:
            status = int(fault["status"])
            headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
            self.answer(status, fault.get("message", f"fault {status}"), headers)
            return
        if self.path in state.get("gone", []):
            self.answer(410, "this webhook was removed")
            return
        msg_id = self.headers.get("webhook-id")
        stamp = self.headers.get("webhook-timestamp")
        signatures = self.headers.get("webhook-signature")
        if not msg_id or not stamp or not signatures:
            self.answer(400, "missing webhook-id, webhook-timestamp or webhook-signature")
            return
        if not stamp.isdigit() or abs(time.time() - int(stamp)) > float(state.get("tolerance_s", 300)):
            self.answer(401, "webhook-timestamp is too far from now")
            return
        signed = f"{msg_id}.{stamp}.".encode() + body
        expected = base64.b64encode(hmac.new(hook.key(), signed, hashlib.sha256).digest()).decode()
        given = [s.partition(",")[2] for s in signatures.split() if s.startswith("v1,")]
        if not any(hmac.compare_digest(expected, g) for g in given):
            self.answer(401, "no valid signature")
            return
        try:
            payload = json.loads(body)
        except ValueError:
            self.answer(400, "the body is not JSON")
            return
        hook.record(
            {
                "path": self.path,
                "id": msg_id,
                "timestamp": int(stamp),
                "content_type": self.headers.get("Content-Type"),
                "body": payload,
                "verified": True,
            }
        )
        self.answer(204, "")

    def answer(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        send_body(self, status, text.encode(), "text/plain; charset=utf-8", headers)


class Server(ThreadingHTTPServer):
    hook: Hook


def main() -> None:
    serve_stand(Server, Handler, Hook, "hook")


if __name__ == "__main__":
    main()
