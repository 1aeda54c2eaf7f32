"""A Google Drive API v3 stand-in for the gdrive connector's tests: what google-api-python-client
requests to list a drive's files and read them, with Drive's JSON shapes, paging and errors.

Run: python -m tests.fakes.drive_server --port PORT --state FILE --token TOKEN [--log FILE].

The client, given ``api_endpoint = http://127.0.0.1:PORT/drive/v3/``, requests:

- ``GET /drive/v3/files?q=...&pageSize=&pageToken=&fields=&orderBy=&corpora=`` (files.list);
- ``GET /drive/v3/files/{id}?fields=...`` (files.get) and ``?alt=media`` (files.get_media);
- ``GET /drive/v3/files/{id}/export?mimeType=...&alt=media`` (files.export_media).

FILE is JSON, re-read on every request, so a test edits the drive between two scans::

    {"files": [{"id": "f1", "name": "notes.txt", "mimeType": "text/plain", "parents": ["root"],
                "text": "...",                      # or "data_b64": "..." for bytes
                "version": "3", "createdTime": "...", "modifiedTime": "...", "trashed": false,
                "lastModifyingUser": {"displayName": "Ann"}, "owners": [{"displayName": "Ann"}],
                "driveId": "d1",                    # in a shared drive (needs supportsAllDrives)
                "export_too_large": true}],         # a Google file Drive refuses to export
     "max_page_size": 2,                            # Drive may answer fewer files than pageSize
     "faults": [{"status": 403, "reason": "userRateLimitExceeded", "times": 2, "retry_after": 1,
                 "match": "/files"}]}

A Google Doc's or Slides' ``text`` is its ``text/plain`` export (sent with a UTF-8 BOM, as Drive
does), a Sheet's its ``text/csv`` one. What Drive derives, the stand-in fills in: ``kind``, ``size``
and ``md5Checksum`` of a stored file, ``webViewLink``, and defaults for absent fields. ``fields`` is
honoured (a response carries what was asked, Drive's defaults when nothing was); ``q`` understands
``'<id>' in parents``, ``trashed = true|false``, ``mimeType = / != '<type>'`` and ``name = '<name>'``
joined by ``and`` (anything else: 400, as Drive refuses a query it cannot parse).

Each fault answers the next ``times`` requests whose path and query contain ``match`` (all requests
without one) with ``status`` and Google's error body (``reason`` in it; ``Retry-After`` when
``retry_after`` is set), before the token is checked; counts are kept in memory per fault. A token
is read from ``Authorization: Bearer``; anything else is a 401. ``--log`` appends one JSON line per
request (method, path, query, status, authorization).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes import Stand, serve_stand

EPOCH = "2024-01-01T00:00:00.000Z"
GOOGLE_APPS = "application/vnd.google-apps."
EXPORTS = {
    "application/vnd.google-apps.document": {"text/plain", "text/markdown", "text/html"},
    "application/vnd.google-apps.presentation": {"text/plain"},
    "application/vnd.google-apps.spreadsheet": {"text/csv"},
}
LIST_DEFAULT = "kind,incompleteSearch,nextPageToken,files(kind,id,name,mimeType)"
FILE_DEFAULT = "kind,id,name,mimeType"
_QUOTED = r"'((?:[^'\\]|\\.)*)'"
_CLAUSES = [
    ("parent", re.compile(rf"^{_QUOTED}\s+in\s+parents$")),
    ("trashed", re.compile(r"^trashed\s*=\s*(true|false)$")),
    ("mime", re.compile(rf"^mimeType\s*(=|!=)\s*{_QUOTED}$")),
    ("name", re.compile(rf"^name\s*=\s*{_QUOTED}$")),
]


class Drive(Stand):
    """The Drive stand-in's state file, token, faults and request log."""


class QueryError(ValueError):
    """A ``q`` Drive would refuse."""


def content(item: dict[str, Any]) -> bytes:
    if "data_b64" in item:
        return base64.b64decode(item["data_b64"])
    return str(item.get("text", "")).encode()


def file_json(item: dict[str, Any]) -> dict[str, Any]:
    """A file resource with every field Drive would have for it."""
    ident, mime = item["id"], item.get("mimeType", "application/octet-stream")
    person = {"kind": "drive#user", "displayName": "Ann", "emailAddress": "ann@example.com", "me": True}
    modified = item.get("modifiedTime", EPOCH)
    out = {
        "kind": "drive#file",
        "id": ident,
        "name": item.get("name", ident),
        "mimeType": mime,
        "parents": item.get("parents", ["root"]),
        "trashed": bool(item.get("trashed", False)),
        "createdTime": item.get("createdTime", EPOCH),
        "modifiedTime": modified,
        "owners": item.get("owners", [person]),
        "lastModifyingUser": item.get("lastModifyingUser", person),
        "webViewLink": item.get("webViewLink", view_link(ident, mime)),
    }
    if item.get("version", 1) is not None:  # null in the state: a file without one
        out["version"] = str(item.get("version", "1"))
    if item.get("driveId"):
        out["driveId"] = item["driveId"]
    if not mime.startswith(GOOGLE_APPS):
        data = content(item)
        out |= {"size": str(len(data)), "md5Checksum": hashlib.md5(data).hexdigest()}
    return out


def view_link(ident: str, mime: str) -> str:
    kinds = {"document": "document", "spreadsheet": "spreadsheets", "presentation": "presentation"}
    kind = kinds.get(mime.removeprefix(GOOGLE_APPS)) if mime.startswith(GOOGLE_APPS) else None
    if kind:
        return f"https://docs.google.com/{kind}/d/{ident}/edit?usp=drivesdk"
    if mime == f"{GOOGLE_APPS}folder":
        return f"https://drive.google.com/drive/folders/{ident}"
    return f"https://drive.google.com/file/d/{ident}/view?usp=drivesdk"


def split_fields(spec: str) -> list[str]:
    """``a,b(c,d),e`` as ``["a", "b(c,d)", "e"]``."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(spec):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(spec[start:i].strip())
            start = i + 1
    out.append(spec[start:].strip())
    return [f for f in out if f]


def select(resource: Any, spec: str) -> Any:
    """``resource`` cut down to the partial response ``spec`` asks for."""
    if isinstance(resource, list):
        return [select(r, spec) for r in resource]
    if not isinstance(resource, dict) or spec in ("", "*"):
        return resource
    out = {}
    for field in split_fields(spec):
        name, _, sub = field.partition("(")
        name = name.strip()
        if name in resource:
            out[name] = select(resource[name], sub[:-1]) if sub else resource[name]
    return out


def matcher(q: str) -> Any:
    """A predicate on file resources for a Drive query ``q``."""
    tests = []
    for clause in filter(None, (c.strip() for c in re.split(r"\s+and\s+", q.strip(), flags=re.IGNORECASE))):
        for kind, pattern in _CLAUSES:
            found = pattern.match(clause)
            if found:
                tests.append((kind, [unquote_q(g) for g in found.groups()]))
                break
        else:
            raise QueryError(clause)

    def matches(f: dict[str, Any]) -> bool:
        for kind, args in tests:
            if kind == "parent" and args[0] not in f["parents"]:
                return False
            if kind == "trashed" and f["trashed"] != (args[0] == "true"):
                return False
            if kind == "mime" and (f["mimeType"] == args[1]) != (args[0] == "="):
                return False
            if kind == "name" and f["name"] != args[0]:
                return False
        return True

    return matches


def ordering(name: str) -> Callable[[dict[str, Any]], str]:
    """A sort key for ``orderBy``'s field ``name``."""
    return lambda resource: str(resource.get(name, ""))


def unquote_q(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


class Handler(BaseHTTPRequestHandler):
    server: Server
    entry: dict[str, Any]  # this request, for the log

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        drive = self.server.drive
        # logged as the answer goes out (see send), so the log is in the order the client saw
        self.entry = {"method": "GET", "path": unquote(split.path), "query": query}
        state = drive.read()
        fault = drive.fault(state.get("faults", []), self.path)
        if fault is not None:
            status = int(fault["status"])
            headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
            reason = fault.get("reason", {429: "rateLimitExceeded"}.get(status, "backendError"))
            self.fail(status, fault.get("message", f"fault {status}"), reason, headers=headers)
            return
        if self.headers.get("Authorization") != f"Bearer {drive.token}":
            self.fail(401, "Request had invalid authentication credentials.", "authError")
            return
        self.route(state, [unquote(s) for s in split.path.split("/")[1:]], query)

    def route(self, state: dict[str, Any], seg: list[str], query: dict[str, str]) -> int:
        if seg[:3] != ["drive", "v3", "files"]:
            return self.fail(404, "Not Found", "notFound")
        rest = seg[3:]
        files = [file_json(f) | {"_raw": f} for f in state.get("files", [])]
        shared = query.get("supportsAllDrives") == "true"
        if not rest:
            return self.list_files(state, files, query, shared)
        found = [f for f in files if f["id"] == rest[0] and (shared or "driveId" not in f)]
        if not found:
            return self.fail(404, f"File not found: {rest[0]}.", "notFound", location="fileId")
        item = found[0]
        raw = item.pop("_raw")
        mime = item["mimeType"]
        if rest[1:] == ["export"]:
            if not mime.startswith(GOOGLE_APPS):
                return self.fail(403, "Export only supports Docs Editors files.", "fileNotExportable")
            target = query.get("mimeType", "")
            if target not in EXPORTS.get(mime, set()):
                return self.fail(400, "The requested conversion is not supported.", "badRequest")
            if raw.get("export_too_large"):
                return self.fail(403, "This file is too large to be exported.", "exportSizeLimitExceeded")
            data = content(raw)
            return self.send(200, (b"\xef\xbb\xbf" + data) if target == "text/plain" else data, target)
        if rest[1:]:
            return self.fail(404, "Not Found", "notFound")
        if query.get("alt") == "media":
            if mime.startswith(GOOGLE_APPS):
                message = "Only files with binary content can be downloaded. Use Export with Docs Editors files."
                return self.fail(403, message, "fileNotDownloadable")
            return self.send(200, content(raw), mime)
        return self.json(select(item, query.get("fields", FILE_DEFAULT)))

    def list_files(
        self, state: dict[str, Any], files: list[dict[str, Any]], query: dict[str, str], shared: bool
    ) -> int:
        try:
            matches = matcher(query.get("q", ""))
        except QueryError:
            return self.fail(400, "Invalid Value", "invalid", location="q")
        every_drive = shared and query.get("includeItemsFromAllDrives") == "true"
        rows = [f for f in files if matches(f) and (every_drive or "driveId" not in f)]
        for row in rows:
            row.pop("_raw")
        rows.sort(key=lambda r: str(r["id"]))  # ties in the order asked fall back on the id
        for key in reversed([k.strip() for k in query.get("orderBy", "").split(",") if k.strip()]):
            name, _, direction = key.partition(" ")
            rows.sort(key=ordering(name), reverse=direction.strip() == "desc")
        size = min(int(query.get("pageSize", 100)), 1000, int(state.get("max_page_size", 1000)))
        token = query.get("pageToken", "")
        if token and not re.fullmatch(r"~\d+", token):
            return self.fail(400, "Invalid Value", "invalid", location="pageToken")
        offset = int(token[1:]) if token else 0
        answer: dict[str, Any] = {
            "kind": "drive#fileList",
            "incompleteSearch": False,
            "files": rows[offset : offset + size],
        }
        if offset + size < len(rows):
            answer["nextPageToken"] = f"~{offset + size}"
        return self.json(select(answer, query.get("fields", LIST_DEFAULT)))

    def json(self, payload: object, status: int = 200, headers: dict[str, str] | None = None) -> int:
        return self.send(status, json.dumps(payload).encode(), "application/json; charset=UTF-8", headers)

    def fail(
        self,
        status: int,
        message: str,
        reason: str,
        *,
        location: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> int:
        """Google's error body: ``{"error": {"code", "message", "errors": [{"reason", "domain", ...}]}}``."""
        detail: dict[str, Any] = {"message": message, "domain": "global", "reason": reason}
        if location:
            detail |= {"location": location, "locationType": "parameter"}
        if reason in ("rateLimitExceeded", "userRateLimitExceeded"):
            detail["domain"] = "usageLimits"
        return self.json({"error": {"code": status, "message": message, "errors": [detail]}}, status, headers)

    def send(self, status: int, data: bytes, kind: str, headers: dict[str, str] | None = None) -> int:
        self.server.drive.record(self.entry | {"status": status, "authorization": self.headers.get("Authorization")})
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        return status

    def log_message(self, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    drive: Drive


def main() -> None:
    serve_stand(Server, Handler, Drive, "drive")


if __name__ == "__main__":
    main()
