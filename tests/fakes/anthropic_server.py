"""A scripted Anthropic Messages API on loopback (it stands in for the hosted API, which tests
cannot reach). Lets the anthropic SDK's own tool runner (`client.beta.messages.run_tools`) drive a
tool exactly as it would against Claude.

Run: python -m tests.fakes.anthropic_server --port PORT.
- POST /_script  {"tool": "memory", "calls": [input, ...]}: the next conversation asks for these
  tool calls, one per turn, then ends its turn.
- GET /_log: every tool_result the runner sent back, in order ({"content", "is_error"}).
- POST /v1/messages: the Messages API.
"""

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fakes import send_json

STATE = {"tool": "memory", "calls": [], "turn": 0, "log": []}
LOCK = threading.Lock()


def _message(content: list, stop_reason: str, turn: int) -> dict:
    return {
        "id": f"msg_{turn}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


class Handler(BaseHTTPRequestHandler):
    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

    def do_GET(self):
        if self.path == "/_log":
            send_json(self, STATE["log"])
        else:
            send_json(self, {"error": "not found"}, 404)

    def do_POST(self):
        body = self._body()
        path = self.path.split("?")[0]
        with LOCK:
            if path == "/_script":
                STATE.update(tool=body.get("tool", "memory"), calls=list(body["calls"]), turn=0, log=[])
                send_json(self, {"ok": True})
                return
            if path != "/v1/messages":
                send_json(self, {"type": "error", "error": {"type": "not_found_error", "message": path}}, 404)
                return
            last = body["messages"][-1]
            if last["role"] == "user" and isinstance(last["content"], list):
                for block in last["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        STATE["log"].append({"content": block.get("content"), "is_error": bool(block.get("is_error"))})
            turn = STATE["turn"]
            STATE["turn"] += 1
            if turn < len(STATE["calls"]):
                use = {"type": "tool_use", "id": f"toolu_{turn}", "name": STATE["tool"], "input": STATE["calls"][turn]}
                send_json(self, _message([use], "tool_use", turn))
            else:
                send_json(self, _message([{"type": "text", "text": "Done."}], "end_turn", turn))

    def log_message(self, *args):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    ThreadingHTTPServer(("127.0.0.1", parser.parse_args().port), Handler).serve_forever()


if __name__ == "__main__":
    main()
