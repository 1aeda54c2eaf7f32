"""The frontier side of ``cabrain bench workflows``: a scripted model server on loopback that speaks
OpenAI's ``/v1/chat/completions`` and answers each testbed task with its reference (what a frontier
model would be trusted to answer), and, asked to judge, rates a candidate against the reference by the
testbed's own rule (100 right, 0 wrong, the rule's reason): the loop measured with a judge that is
never wrong, so that what it shows is what the local models can do. Usage is counted as a quarter of
the characters (about a token each); the caller prices it (``CABRAIN_WORKFLOW_PRICES``).

Run: ``python -m cabrain.bench.frontier --testbed DIR --port PORT`` with its API key in
``FRONTIER_STANDIN_KEY`` (a call without it is refused, 401). Prints ``READY`` once it listens.
"""

from __future__ import annotations

import argparse
import hmac
import json
import math
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cabrain.workflows import testbed
from cabrain.workflows.scoring import JUDGE_SYSTEM

KEY_VARIABLE = "FRONTIER_STANDIN_KEY"
_TASK = re.compile(r"Task:\n(.*?)(?:\n\nContext:\n.*)?$", re.S)


class Oracle:
    """The testbed's tasks by their text."""

    def __init__(self, kinds: list[testbed.Kind]) -> None:
        self.tasks = {t.task.strip(): (k, t) for k in kinds for t in k.tasks}

    def find(self, text: str) -> tuple[testbed.Kind, testbed.Task] | None:
        found = _TASK.search(text.split("Reference answer:\n", 1)[0].strip())
        key = (found.group(1) if found else text).strip()
        while key.startswith("Task:\n"):
            key = key.removeprefix("Task:\n").strip()
        return self.tasks.get(key)

    def answer(self, system: str, user: str) -> str:
        if system.strip() == JUDGE_SYSTEM.strip():
            return self.judge(user)
        found = self.find(user.rsplit("\n\nTask:\n", 1)[-1] if "\n\nTask:\n" in user else user)
        if found is None:
            return "I do not know this task."
        return found[1].reference

    def judge(self, user: str) -> str:
        found = self.find(user)
        candidate = user.split("Candidate answer:\n", 1)[-1]
        if found is None:
            return json.dumps({"score": 0, "reason": "the task is not in the testbed"})
        ok, why = testbed.right(found[0], found[1], candidate)
        return json.dumps({"score": 100 if ok else 0, "reason": "right" if ok else why[:200]})


def tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def handler(oracle: Oracle, key: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            given = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), key.encode()):
                self._send(401, {"error": {"message": "invalid API key", "type": "invalid_request_error"}})
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": "not found"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                messages = {m["role"]: str(m["content"]) for m in body["messages"]}
            except (ValueError, KeyError, TypeError) as exc:
                self._send(400, {"error": {"message": f"bad request: {exc}"}})
                return
            system, user = messages.get("system", ""), messages.get("user", "")
            text = oracle.answer(system, user)
            self._send(
                200,
                {
                    "id": "standin",
                    "object": "chat.completion",
                    "model": body.get("model", "frontier"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": tokens(system + user), "completion_tokens": tokens(text)},
                },
            )

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cabrain.bench.frontier")
    parser.add_argument("--testbed", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    key = os.environ.pop(KEY_VARIABLE, "")
    if not key:
        print(f"FAILED no API key in {KEY_VARIABLE}", flush=True)
        return 2
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(Oracle(testbed.load(Path(args.testbed))), key))
    print("READY", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
