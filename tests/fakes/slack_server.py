"""A Slack Web API stand-in for the Slack notification sender's tests: ``chat.postMessage`` and
``auth.test``, with Slack's answers (HTTP 200 with ``{"ok": false, "error": ...}`` for most failures).

Run: python -m tests.fakes.slack_server --port PORT --state FILE --token TOKEN [--log FILE].

FILE is JSON, re-read on every request::

    {"channels": {"C0ALERTS": {}, "C0OLD": {"archived": true}},   # absent: every channel exists
     "faults": [{"match": "chat.postMessage", "status": 503, "times": 2},
                {"match": "chat.postMessage", "status": 429, "retry_after": 7},
                {"match": "chat.postMessage", "status": 200, "error": "not_in_channel"}]}

Routes, under ``/api``: ``POST chat.postMessage`` (a form or a JSON body, as slack-sdk sends it;
``channel`` and ``text`` required; ``thread_ts`` posts in a thread) answers ``{"ok": true, "channel",
"ts", "message"}``; ``POST auth.test`` answers who the token is. The token is read from
``Authorization: Bearer`` (or a ``token`` form field): none is ``not_authed``, another than TOKEN
``invalid_auth``. An unknown channel is ``channel_not_found``, an archived one ``is_archived``.

Each fault answers the next ``times`` requests whose path contains ``match`` before the token is
checked: status 429 as Slack does (``{"ok": false, "error": "ratelimited"}`` and ``Retry-After``),
any other status with ``{"ok": false, "error": <error>}`` when the fault names an ``error``, else an
HTML error page (what Slack's edge answers for a 5xx). ``--log`` appends one JSON line per accepted
message: path, channel, text, thread_ts, unfurl_links, ts.
"""

from __future__ import annotations

import itertools
import json
import time
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from tests.fakes import Quiet, Stand, send_body, send_json, serve_stand

BOT = {"user": "cabrain", "user_id": "U0CABRAIN", "bot_id": "B0CABRAIN", "team": "Stand", "team_id": "T0STAND"}


class Slack(Stand):
    """The Slack stand-in's state file, token, faults and message log."""

    counter = itertools.count(1)

    def next_ts(self) -> str:
        return f"{int(time.time())}.{next(self.counter):06d}"


class Handler(Quiet):
    server: Server

    def do_POST(self) -> None:
        slack = self.server.slack
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode()
        state = slack.read()
        fault = slack.fault(state.get("faults", []), self.path)
        if fault is not None:
            self.fail(fault)
            return
        if self.headers.get("Content-Type", "").startswith("application/json"):
            args = json.loads(raw or "{}")
        else:
            args = {k: v[-1] for k, v in parse_qs(raw).items()}
        auth = self.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else args.get("token")
        if not token:
            send_json(self, {"ok": False, "error": "not_authed"})
            return
        if token != slack.token:
            send_json(self, {"ok": False, "error": "invalid_auth"})
            return
        method = self.path.split("?")[0].removeprefix("/api/")
        if method == "auth.test":
            send_json(self, {"ok": True, "url": "https://stand.slack.com/", **BOT})
        elif method == "chat.postMessage":
            self.post_message(state, args)
        else:
            send_json(self, {"ok": False, "error": "unknown_method"}, 404)

    def post_message(self, state: dict[str, Any], args: dict[str, Any]) -> None:
        slack = self.server.slack
        channel = args.get("channel")
        channels = state.get("channels")
        if not channel or (channels is not None and channel not in channels):
            send_json(self, {"ok": False, "error": "channel_not_found"})
            return
        if channels is not None and channels[channel].get("archived"):
            send_json(self, {"ok": False, "error": "is_archived"})
            return
        text = args.get("text")
        if not text and not args.get("blocks") and not args.get("attachments"):
            send_json(self, {"ok": False, "error": "no_text"})
            return
        ts = slack.next_ts()
        message: dict[str, Any] = {"type": "message", "subtype": "bot_message", "text": text, "ts": ts}
        message |= {"user": BOT["user_id"], "bot_id": BOT["bot_id"], "team": BOT["team_id"]}
        if args.get("thread_ts"):
            message["thread_ts"] = args["thread_ts"]
        unfurl = args.get("unfurl_links")
        slack.record(
            {
                "path": self.path,
                "channel": channel,
                "text": text,
                "thread_ts": args.get("thread_ts"),
                "unfurl_links": unfurl in (True, "true", "1") if unfurl is not None else None,
                "ts": ts,
            }
        )
        send_json(self, {"ok": True, "channel": channel, "ts": ts, "message": message})

    def fail(self, fault: dict[str, Any]) -> None:
        status = int(fault["status"])
        headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
        if status == 429 or "error" in fault:
            data = json.dumps({"ok": False, "error": fault.get("error", "ratelimited")}).encode()
            kind = "application/json; charset=utf-8"
        else:
            data = f"<html><body><h1>{status}</h1>Slack is having trouble.</body></html>".encode()
            kind = "text/html; charset=utf-8"
        send_body(self, status, data, kind, headers)


class Server(ThreadingHTTPServer):
    slack: Slack


def main() -> None:
    serve_stand(Server, Handler, Slack, "slack")


if __name__ == "__main__":
    main()
