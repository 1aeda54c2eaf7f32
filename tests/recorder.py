"""A loopback HTTP server that records every request it gets (method, path, headers, body) and
answers one way: a redirect, or an OpenAI-compatible chat completion, or 200 with ``{}``. The
egress tests (tests/*/test_egress.py) use it where the server must, or must never, be reached."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorder:
    host: str
    port: int = 0
    redirect_to: str | None = None  # answer every request with 302 to this URL
    seen: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size) if size else b""
            recorder.seen.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body.decode("utf-8", "replace"),
                }
            )
            if recorder.redirect_to is not None:
                self.send_response(302)
                self.send_header("Location", recorder.redirect_to + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            answer: dict[str, Any] = {}
            if self.path.endswith("/chat/completions"):  # the OpenAI wire format a model server speaks
                answer = {
                    "choices": [{"message": {"role": "assistant", "content": "Done."}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                }
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _answer

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextlib.contextmanager
def recording(host: str = "127.0.0.1", *, redirect_to: str | None = None) -> Iterator[Recorder]:
    """A :class:`Recorder` listening on ``host`` (a loopback address) for the block."""
    recorder = Recorder(host, redirect_to=redirect_to)
    server = ThreadingHTTPServer((host, 0), _handler(recorder))
    recorder.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
