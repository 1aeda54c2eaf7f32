"""Stand-ins for what cannot run here (hosted models), as real HTTP servers on loopback."""

import argparse
import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def send_body(
    handler: BaseHTTPRequestHandler,
    status: int,
    data: bytes,
    content_type: str | None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """One answer: its status, type (none for an empty body), length, other headers and body."""
    handler.send_response(status)
    if content_type and data:
        handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


class Quiet(BaseHTTPRequestHandler):
    """A stand-in's handler: it logs what a test asks for (its Stand's log), not every request."""

    def log_message(self, *args: object) -> None:
        pass


def send_json(handler: BaseHTTPRequestHandler, payload: object, status: int = 200) -> None:
    data = json.dumps(payload, ensure_ascii=False).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class Stand:
    """What a stand-in of a hosted service keeps (tests/fakes/gitlab_server.py, drive_server.py,
    vikunja_server.py): the state file it re-reads on every request (a test edits the service's
    contents between two calls), the token it accepts, the faults' spent counts and the request log."""

    def __init__(self, state: Path, token: str, log: Path | None) -> None:
        self.state = state
        self.token = token
        self.log = log
        self.lock = threading.Lock()
        self.spent: dict[tuple[int, str], int] = {}

    def read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state.read_text())
        return data

    def fault(self, faults: list[dict[str, Any]], target: str) -> dict[str, Any] | None:
        """The first fault that still answers a request for ``target``, counted as spent."""
        with self.lock:
            for index, fault in enumerate(faults):
                if fault.get("match", "") not in target:
                    continue
                key = (index, json.dumps(fault, sort_keys=True))
                if self.spent.get(key, 0) < int(fault.get("times", 1)):
                    self.spent[key] = self.spent.get(key, 0) + 1
                    return fault
        return None

    def record(self, entry: dict[str, Any]) -> None:
        if self.log is None:
            return
        with self.lock, self.log.open("a") as out:
            out.write(json.dumps(entry) + "\n")


def serve_stand(
    server: type[ThreadingHTTPServer], handler: type[BaseHTTPRequestHandler], stand: type[Stand], attribute: str
) -> None:
    """A stand-in's ``main``: ``--port P --state FILE --token T [--log FILE]``, on loopback, forever;
    the handler finds its :class:`Stand` as ``self.server.<attribute>``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    running = server(("127.0.0.1", args.port), handler)
    setattr(running, attribute, stand(args.state, args.token, args.log))
    running.serve_forever()
