"""A Nextcloud Talk stand-in for the Talk notification sender's tests: a bot posting a message into
a conversation (``/ocs/v2.php/apps/spreed/api/v1/bot/{token}/message``), signature checked as Talk
checks it, answered in OCS JSON.

Run: python -m tests.fakes.talk_server --port PORT --state FILE --token SECRET [--log FILE].

SECRET is the bot's shared secret. FILE is JSON, re-read on every request::

    {"rooms": {"abc123": {"messages": [17, 18]}},   # the conversations the bot is set up in, and
                                                     # the ids of messages in them (for replyTo)
     "max_length": 32000,
     "faults": [{"match": "/bot/abc123/", "status": 503, "times": 2},
                {"match": "/message", "status": 429, "retry_after": 7}]}

Checks, in Talk's order (spreed's ``BotController::sendMessage``): ``OCS-APIRequest: true`` (else 412,
as Nextcloud's CSRF check answers); a non-empty ``message`` (400); ``X-Nextcloud-Talk-Bot-Random`` of
at least 32 characters and an ``X-Nextcloud-Talk-Bot-Signature`` (400); the signature, hex
HMAC-SHA256 of random + message with SECRET, for a bot set up in the conversation (401: Talk answers
the same for a wrong secret and for a conversation without the bot); ``replyTo`` one of the
conversation's messages (400); the message at most ``max_length`` characters (413); ``referenceId``
at most 64 characters (400). Success is a 201 with ``{"ocs": {"meta": {"status": "ok", "statuscode":
201, "message": "OK"}, "data": null}}``; the body may be JSON or a form.

Each fault answers the next ``times`` requests whose path contains ``match`` before anything is
checked, with an OCS failure body and ``Retry-After`` when ``retry_after`` is set. ``--log`` appends
one JSON line per accepted message: path, room, message, referenceId, replyTo, silent, id, and
``verified: true`` (its signature was checked).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

from tests.fakes import Quiet, Stand, send_body, serve_stand

ROUTE = re.compile(r"^/ocs/v2\.php/apps/spreed/api/v1/bot/([^/]+)/message$")
REASONS = {201: "Created", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 413: "Payload Too Large"}


class Talk(Stand):
    """The Talk stand-in's state file, bot secret, faults and message log."""

    ids = itertools.count(1000)


def ocs(status: int, data: Any = None, message: str | None = None) -> dict[str, Any]:
    ok = status < 400
    meta = {"status": "ok" if ok else "failure", "statuscode": status, "message": message or REASONS.get(status, "")}
    return {"ocs": {"meta": meta, "data": data if ok else (data or [])}}


class Handler(Quiet):
    server: Server

    def do_POST(self) -> None:
        talk = self.server.talk
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode()
        state = talk.read()
        fault = talk.fault(state.get("faults", []), self.path)
        if fault is not None:
            status = int(fault["status"])
            headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
            self.answer(status, ocs(status, message=fault.get("message", f"fault {status}")), headers)
            return
        route = ROUTE.match(self.path.split("?")[0])
        if route is None:
            self.answer(
                404, ocs(404, message="Invalid query, please check the syntax. API specifications are here: ...")
            )
            return
        if self.headers.get("OCS-APIRequest", "").lower() != "true":
            self.answer(412, {"message": "CSRF check failed"})
            return
        if self.headers.get("Content-Type", "").startswith("application/json"):
            args = json.loads(raw or "{}")
        else:
            args = {k: v[-1] for k, v in parse_qs(raw).items()}
        room = unquote(route.group(1))
        message = args.get("message")
        if not isinstance(message, str) or not message.strip():
            self.answer(400, ocs(400))
            return
        random = self.headers.get("X-Nextcloud-Talk-Bot-Random", "")
        signature = self.headers.get("X-Nextcloud-Talk-Bot-Signature", "")
        if len(random) < 32 or not signature:
            self.answer(400, ocs(400))
            return
        expected = hmac.new(talk.token.encode(), (random + message).encode(), hashlib.sha256).hexdigest()
        rooms = state.get("rooms", {})
        if room not in rooms or not hmac.compare_digest(expected, signature.lower()):
            self.answer(401, ocs(401))
            return
        reply_to = args.get("replyTo")
        if reply_to not in (None, 0, "0") and int(reply_to) not in rooms[room].get("messages", []):
            self.answer(400, ocs(400))
            return
        if len(message) > int(state.get("max_length", 32000)):
            self.answer(413, ocs(413))
            return
        reference = args.get("referenceId", "")
        if len(str(reference)) > 64:
            self.answer(400, ocs(400))
            return
        talk.record(
            {
                "path": self.path,
                "room": room,
                "message": message,
                "referenceId": reference,
                "replyTo": int(reply_to) if reply_to not in (None, "") else None,
                "silent": args.get("silent") in (True, "true", "1"),
                "id": next(talk.ids),
                "verified": True,
            }
        )
        self.answer(201, ocs(201))

    def answer(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        send_body(self, status, json.dumps(payload).encode(), "application/json; charset=utf-8", headers)


class Server(ThreadingHTTPServer):
    talk: Talk


def main() -> None:
    serve_stand(Server, Handler, Talk, "talk")


if __name__ == "__main__":
    main()
