"""A WhatsApp Cloud API (Graph API) stand-in for the WhatsApp notification sender's tests: sending
a text message from a business phone number, with Graph's answers and error bodies.

Run: python -m tests.fakes.whatsapp_server --port PORT --state FILE --token TOKEN [--log FILE].

FILE is JSON, re-read on every request::

    {"phone_numbers": ["106540352242922"],     # absent: every phone number id is one
     "faults": [{"match": "/messages", "status": 503, "times": 2},
                {"match": "/messages", "status": 429, "code": 130429, "retry_after": 7},
                {"match": "/messages", "status": 400, "code": 131047, "message": "Re-engagement message"}]}

Route: ``POST /{version}/{phone_number_id}/messages`` (``version`` like ``v21.0``). The token is
read from ``Authorization: Bearer``; another than TOKEN is a 401 with Graph's ``OAuthException``
code 190. The body must be what the Cloud API requires of a text message: ``messaging_product``
``"whatsapp"``, ``to``, ``type`` ``"text"`` (the only type this stand-in takes), ``text.body``
(at most 4096 characters), and where given ``recipient_type`` ``"individual"`` and a string
``context.message_id``; otherwise a 400 with code 100. An unknown phone number id is a 400 with code
100, subcode 33. Success answers ``{"messaging_product": "whatsapp", "contacts": [{"input", "wa_id"}],
"messages": [{"id": "wamid.<random>"}]}``.

Each fault answers the next ``times`` requests whose path contains ``match`` before the token is
checked, with a Graph error body (``code`` and ``message`` from the fault) and ``Retry-After`` when
``retry_after`` is set. ``--log`` appends one JSON line per accepted message: path, phone_number_id,
to, body, preview_url, context, id.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes import Quiet, Stand, send_body, serve_stand

ROUTE = re.compile(r"^/(v\d+\.\d+)/([^/]+)/messages$")
MAX_BODY = 4096


class WhatsApp(Stand):
    """The WhatsApp stand-in's state file, token, faults and message log."""


def graph_error(message: str, code: int, *, kind: str = "OAuthException", subcode: int | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": message, "type": kind, "code": code}
    if subcode is not None:
        error["error_subcode"] = subcode
    error["fbtrace_id"] = secrets.token_urlsafe(16)
    return {"error": error}


class Handler(Quiet):
    server: Server

    def do_POST(self) -> None:
        wa = self.server.whatsapp
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        state = wa.read()
        fault = wa.fault(state.get("faults", []), self.path)
        if fault is not None:
            status = int(fault["status"])
            code = int(fault.get("code", 131000 if status >= 500 else 100))
            headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
            self.answer(status, graph_error(fault.get("message", f"(#{code}) fault {status}"), code), headers)
            return
        if self.headers.get("Authorization") != f"Bearer {wa.token}":
            self.answer(401, graph_error("Invalid OAuth access token - Cannot parse access token", 190))
            return
        route = ROUTE.match(self.path.split("?")[0])
        if route is None:
            self.answer(400, graph_error("Unknown path components: " + self.path, 2500))
            return
        number = route.group(2)
        numbers = state.get("phone_numbers")
        if numbers is not None and number not in numbers:
            message = (
                f"Unsupported post request. Object with ID '{number}' does not exist, cannot be loaded due to "
                "missing permissions, or does not support this operation."
            )
            self.answer(400, graph_error(message, 100, kind="GraphMethodException", subcode=33))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self.answer(400, graph_error("(#100) Invalid JSON in the request body", 100))
            return
        problem = invalid(body)
        if problem:
            self.answer(400, graph_error(problem, 100))
            return
        to = str(body["to"])
        wamid = "wamid." + base64.b64encode(secrets.token_bytes(30)).decode()
        wa.record(
            {
                "path": self.path,
                "phone_number_id": number,
                "to": to,
                "body": body["text"]["body"],
                "preview_url": body["text"].get("preview_url", False),
                "context": body.get("context"),
                "id": wamid,
            }
        )
        self.answer(
            200,
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": re.sub(r"\D", "", to)}],
                "messages": [{"id": wamid}],
            },
        )

    def answer(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        extra = dict(headers or {})
        if status == 401:
            extra["WWW-Authenticate"] = 'OAuth "Facebook Platform" "invalid_token"'
        send_body(self, status, json.dumps(payload).encode(), "application/json; charset=UTF-8", extra)


def invalid(body: Any) -> str | None:
    """What the Cloud API would refuse in a text message's body, in its words (None: nothing)."""
    if not isinstance(body, dict):
        return "(#100) The request body must be a JSON object"
    if body.get("messaging_product") != "whatsapp":
        return "(#100) The parameter messaging_product is required."
    if body.get("recipient_type", "individual") != "individual":
        return f'(#100) Param recipient_type must be one of {{INDIVIDUAL, GROUP}} - got "{body["recipient_type"]}".'
    if not isinstance(body.get("to"), str) or not body["to"]:
        return "(#100) The parameter to is required."
    if body.get("type", "text") != "text":
        return f"(#100) The stand-in takes only text messages, not {body.get('type')!r}"
    text = body.get("text")
    if not isinstance(text, dict) or not isinstance(text.get("body"), str) or not text["body"]:
        return "(#100) The parameter text['body'] is required."
    if len(text["body"]) > MAX_BODY:
        return f"(#100) Param text['body'] must be at most {MAX_BODY} characters long."
    if "preview_url" in text and not isinstance(text["preview_url"], bool):
        return "(#100) Param text['preview_url'] must be a boolean."
    context = body.get("context")
    if context is not None and (not isinstance(context, dict) or not isinstance(context.get("message_id"), str)):
        return "(#100) The parameter context['message_id'] is required."
    return None


class Server(ThreadingHTTPServer):
    whatsapp: WhatsApp


def main() -> None:
    serve_stand(Server, Handler, WhatsApp, "whatsapp")


if __name__ == "__main__":
    main()
