"""Capture's way to the service: one ``POST /v1/capture`` per event over standard-library HTTP, and a
local queue (``CABRAIN_HOME/capture-queue.jsonl``) for when the service is down, sent with the next
event or by ``cabrain capture --flush``. Standard library only (the hook's path).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time

from cabrain.faces.capture.config import CaptureConfig, CaptureError

TYPE_CHECKING = False  # typing itself costs the hook a few milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


class ServiceDown(Exception):
    pass


class _Url:
    """``scheme://host[:port][/path]``, split without urllib (a few milliseconds of imports per event)."""

    def __init__(self, url: str) -> None:
        scheme, sep, rest = url.strip().partition("://")
        if not sep or scheme.lower() not in ("http", "https"):
            raise CaptureError(f"CABRAIN_API_URL must be an http:// or https:// URL, got {url!r}")
        self.scheme = scheme.lower()
        authority, slash, path = rest.partition("/")
        self.path = slash + path
        authority = authority.rpartition("@")[2]
        if authority.startswith("["):  # [::1]:8000
            host, _, port = authority[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = authority.partition(":")
        if not host or (port and not port.isdigit()):
            raise CaptureError(f"CABRAIN_API_URL has no usable host[:port]: {url!r}")
        self.hostname = host
        self.port = int(port) if port else None


def _request(config: CaptureConfig, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
    try:
        url = _Url(config.api_url or "")
    except CaptureError as exc:  # misconfigured: nothing can be sent, so the event's memories are queued
        raise ServiceDown(str(exc)) from None
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
    target = url.path.rstrip("/") + path
    try:
        if url.scheme == "https":
            status, raw = _https(url, method, target, data, headers, config.timeout_s)
        else:
            status, raw = _plain_http(url, method, target, data, headers, config.timeout_s)
    except (OSError, ValueError, IndexError) as exc:  # refused, reset, timed out, a garbled answer
        raise ServiceDown(str(exc) or type(exc).__name__) from exc
    if status >= 500:
        raise ServiceDown(f"HTTP {status}")
    try:
        return status, json.loads(raw or b"null")
    except ValueError:
        return status, None


def _plain_http(
    url: _Url, method: str, target: str, data: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, bytes]:
    """One HTTP/1.1 exchange over a socket. The hook runs on every event; ``http.client`` alone
    would add about 17 ms of imports to each."""
    import socket  # only an event with something to send pays for its import

    host, port = url.hostname or "127.0.0.1", url.port or 80
    lines = [
        f"{method} {target or '/'} HTTP/1.1",
        f"Host: {host}:{port}",
        "Connection: close",
        f"Content-Length: {len(data)}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split()[1])
    fields = {k.strip().lower(): v.strip().lower() for k, _, v in (h.partition(":") for h in header_lines)}
    if fields.get("transfer-encoding") == "chunked":
        payload = _dechunk(payload)
    return status, payload


def _dechunk(payload: bytes) -> bytes:
    out, rest = [], payload
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2 :]
    return b"".join(out)


def _https(
    url: _Url, method: str, target: str, data: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, bytes]:
    import http.client  # https only: plain http (the usual loopback service) is spared its imports

    connection = http.client.HTTPSConnection(url.hostname or "", url.port, timeout=timeout)
    try:
        connection.request(method, target or "/", body=data, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def send(
    config: CaptureConfig,
    target: dict[str, str],
    memories: list[dict[str, Any]],
    decide: bool,
    recall: str | None = None,
    turns: list[str] | None = None,
) -> dict[str, Any]:
    """Hand memories over (and, in the same request, recall for context, with the dialogue's earlier
    ``turns``); the service's answer (``namespace``: where they went, ``hits``: the recall's)."""
    body: dict[str, Any] = {**target, "items": memories, "decide": decide}
    if recall:
        body["recall"] = {"query": recall, "k": config.context_k, **({"context": turns} if turns else {})}
    status, answer = _request(config, "POST", "/v1/capture", body)
    if status != 202 or not isinstance(answer, dict):
        message = (answer or {}).get("error", {}).get("message") if isinstance(answer, dict) else None
        raise CaptureError(f"the service refused the captured memories (HTTP {status}): {message or answer}")
    if answer.get("withheld"):
        print(f"cabrain capture: {answer['withheld']}", file=sys.stderr)
    return answer


@contextlib.contextmanager
def _locked_queue(config: CaptureConfig) -> Iterator[str]:
    os.makedirs(config.home, exist_ok=True)
    with open(config.beside_queue(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield config.queue_path
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def enqueue_locally(
    config: CaptureConfig, target: dict[str, str], memories: list[dict[str, Any]], decide: bool
) -> None:
    entry = {**target, "items": memories, "decide": decide, "queued_at": time.time()}
    line = json.dumps(entry, ensure_ascii=False)
    with _locked_queue(config) as path:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def flush_queue(config: CaptureConfig) -> tuple[int, int]:
    """Send what the local queue holds; (sent, left). Stops at the first batch the service cannot take."""
    if not os.path.exists(config.queue_path):
        return 0, 0
    with _locked_queue(config) as path:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        sent = 0
        for line in lines:
            entry = json.loads(line)
            target = {"project": entry["project"]} if entry.get("project") else {"namespace": entry["namespace"]}
            try:
                send(config, target, entry["items"], entry.get("decide", True))
            except ServiceDown:
                break
            except CaptureError as exc:  # refused for good (e.g. no write access): say so, keep it aside
                print(f"cabrain capture: dropped a queued batch: {exc}", file=sys.stderr)
                with open(config.beside_queue(".rejected.jsonl"), "a", encoding="utf-8") as rejected:
                    rejected.write(line + "\n")
            sent += 1
        left = lines[sent:]
        tmp = config.beside_queue(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in left))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return sent, len(left)
