"""A GitLab REST v4 stand-in for the gitlab connector's tests: what python-gitlab calls to read a
project's issues, merge requests, their notes and the wiki, with GitLab's shapes and pagination.

Run: python -m tests.fakes.gitlab_server --port PORT --state FILE --token TOKEN [--log FILE].

FILE is JSON, re-read on every request, so a test edits the project between two scans:

    {"projects": [{"id": 7, "path_with_namespace": "team/app",      # "wiki_access_level": "disabled" ...
                   "issues": [{"iid": 1, "title": "...", "description": "...", "state": "opened",
                               "created_at": "2024-01-01T10:00:00.000Z", "updated_at": "...",
                               "labels": ["bug"], "author": {"username": "ann", "name": "Ann"},
                               "assignees": [{"username": "bo", "name": "Bo"}]}],
                   "merge_requests": [{"iid": 3, ..., "source_branch": "fix", "target_branch": "main"}],
                   "notes": {"issues/1": [{"id": 11, "body": "...", "system": false, "author": {...},
                                           "created_at": "...", "updated_at": "..."}],
                             "merge_requests/3": [...]},
                   "wiki": [{"slug": "home", "title": "Home", "content": "# Home ...", "format": "markdown"}]}],
     "faults": [{"status": 429, "times": 2, "retry_after": 1, "match": "/issues"}]}

What GitLab derives, the stand-in fills in: an item's ``id``, ``project_id``, ``web_url``, ``type``,
the defaults of absent fields, and (as GitLab touches an issue when a note is added or edited) an
issue's or merge request's ``updated_at`` is the latest of its own and its notes' times (compared as
text: write them all in GitLab's one format, ``2024-01-01T10:00:00.000Z``).

Each fault answers the next ``times`` requests whose path and query contain ``match`` (all
requests without one) with ``status`` and ``{"message": ...}`` (or ``body`` as text/html, the way a
proxy answers), with a ``Retry-After`` header when ``retry_after`` is set, before the token is
checked; how many remain is kept in memory per fault (its index and content).
A token is read from ``PRIVATE-TOKEN`` or ``Authorization: Bearer``; anything else is a 401.
Lists page by offset (``page``, ``per_page`` at most 100, default 20) with GitLab's headers
(``X-Page``, ``X-Per-Page``, ``X-Next-Page``, ``X-Prev-Page``, ``X-Total``, ``X-Total-Pages`` and a
``Link`` with ``rel="next"``); ``order_by`` and ``sort`` (default ``created_at``, ``desc``) order
them, ties by id. ``--log`` appends one JSON line per request (method, decoded path, query, status, token).
"""

from __future__ import annotations

import json
import math
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from tests.fakes import Stand, send_json, serve_stand

EPOCH = "2024-01-01T00:00:00.000Z"
ANON = {"id": 1, "username": "ghost", "name": "Ghost User", "state": "active"}


class GitLab(Stand):
    """The GitLab stand-in's state file, token, faults and request log."""


def user(value: dict[str, Any] | None) -> dict[str, Any]:
    """A user as GitLab embeds one (``author``, ``assignees``)."""
    if not value:
        return dict(ANON)
    name = value.get("username", "user")
    ident = value.get("id", zlib.crc32(name.encode()) % 100_000)
    return {"id": ident, "username": name, "name": value.get("name", name), "state": "active"}


def project_json(project: dict[str, Any], base: str) -> dict[str, Any]:
    path = project["path_with_namespace"]
    namespace, _, name = path.rpartition("/")
    levels = {f: project.get(f"{f}_access_level", "enabled") for f in ("issues", "merge_requests", "wiki")}
    return {
        "id": project["id"],
        "name": project.get("name", name),
        "path": name,
        "path_with_namespace": path,
        "name_with_namespace": f"{namespace} / {name}",
        "namespace": {"full_path": namespace, "name": namespace},
        "web_url": f"{base}/{path}",
        "default_branch": "main",
        "visibility": "private",
        "created_at": EPOCH,
        **{f"{f}_access_level": level for f, level in levels.items()},
        **{f"{f}_enabled": level != "disabled" for f, level in levels.items()},
    }


def item_json(kind: str, item: dict[str, Any], project: dict[str, Any], base: str) -> dict[str, Any]:
    """An issue or merge request as GitLab answers it, ``updated_at`` touched by its notes."""
    iid = item["iid"]
    notes = project.get("notes", {}).get(f"{kind}/{iid}", [])
    created = item.get("created_at", EPOCH)
    touched = [item.get("updated_at", created)] + [n.get("updated_at", n.get("created_at", EPOCH)) for n in notes]
    segment = "issues" if kind == "issues" else "merge_requests"
    out = {
        "id": item.get("id", project["id"] * 100_000 + iid + (50_000 if kind == "merge_requests" else 0)),
        "iid": iid,
        "project_id": project["id"],
        "title": item.get("title", ""),
        "description": item.get("description"),
        "state": item.get("state", "opened"),
        "created_at": created,
        "updated_at": max(touched),
        "labels": item.get("labels", []),
        "author": user(item.get("author")),
        "assignees": [user(a) for a in item.get("assignees", [])],
        "user_notes_count": sum(1 for n in notes if not n.get("system")),
        "web_url": f"{base}/{project['path_with_namespace']}/-/{segment}/{iid}",
    }
    out["assignee"] = out["assignees"][0] if out["assignees"] else None
    if kind == "issues":
        out |= {"type": "ISSUE", "issue_type": "issue", "confidential": item.get("confidential", False)}
    else:
        out |= {
            "source_branch": item.get("source_branch", f"branch-{iid}"),
            "target_branch": item.get("target_branch", "main"),
            "reviewers": [user(r) for r in item.get("reviewers", [])],
            "draft": item.get("draft", False),
        }
    return out


def note_json(note: dict[str, Any], kind: str, parent: dict[str, Any]) -> dict[str, Any]:
    created = note.get("created_at", EPOCH)
    return {
        "id": note["id"],
        "type": note.get("type"),
        "body": note.get("body", ""),
        "author": user(note.get("author")),
        "created_at": created,
        "updated_at": note.get("updated_at", created),
        "system": bool(note.get("system", False)),
        "noteable_id": parent["id"],
        "noteable_iid": parent["iid"],
        "noteable_type": "Issue" if kind == "issues" else "MergeRequest",
        "project_id": parent["project_id"],
        "resolvable": False,
        "confidential": False,
        "internal": False,
    }


def wiki_json(page: dict[str, Any], content: bool) -> dict[str, Any]:
    out = {"slug": page["slug"], "title": page.get("title", page["slug"]), "format": page.get("format", "markdown")}
    if content:
        out |= {"content": page.get("content", ""), "encoding": "UTF-8"}
    return out


class Handler(BaseHTTPRequestHandler):
    server: Server
    entry: dict[str, Any]

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        token = self.headers.get("PRIVATE-TOKEN")
        self.entry = {"method": "GET", "path": unquote(split.path), "query": query, "private_token": token}
        gitlab = self.server.gitlab
        state = gitlab.read()
        fault = gitlab.fault(state.get("faults", []), self.path)
        if fault is not None:
            status = int(fault["status"])
            headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
            if "body" in fault:
                self.text(status, str(fault["body"]), headers)
            else:
                self.fail(status, f"{status} {self.responses.get(status, ('Error',))[0]}", headers)
        elif not self.authorised():
            self.fail(401, "401 Unauthorized")
        else:
            self.route(state, [unquote(s) for s in split.path.split("/")[1:]], split.path, query)

    def authorised(self) -> bool:
        token = self.server.gitlab.token
        bearer = self.headers.get("Authorization", "")
        return self.headers.get("PRIVATE-TOKEN") == token or bearer == f"Bearer {token}"

    def base(self) -> str:
        return f"http://{self.headers.get('Host', f'127.0.0.1:{self.server.server_port}')}"

    def route(self, state: dict[str, Any], seg: list[str], path: str, query: dict[str, str]) -> int:
        """Answer ``seg`` (the path's decoded segments); returns the status sent."""
        if seg[:2] != ["api", "v4"]:
            return self.fail(404, "404 Not Found")
        rest = seg[2:]
        if rest == ["version"]:
            return self.ok({"version": "17.5.0", "revision": "standin"})
        if rest == ["user"]:
            return self.ok({"id": 1, "username": "connector", "name": "Connector", "state": "active"})
        if len(rest) < 2 or rest[0] != "projects":
            return self.fail(404, "404 Not Found")
        project = self.project(state, rest[1])
        if project is None:
            return self.fail(404, "404 Project Not Found")
        base = self.base()
        tail = rest[2:]
        if not tail:
            return self.ok(project_json(project, base))
        kind = tail[0]
        if kind in ("issues", "merge_requests"):
            return self.threads(project, kind, tail[1:], path, query, base)
        if kind == "wikis":
            pages = project.get("wiki", [])
            if len(tail) == 1:
                content = query.get("with_content", "") in ("1", "true")
                return self.page([wiki_json(p, content) for p in pages], path, query, base, ordered=False)
            found = [p for p in pages if p["slug"] == "/".join(tail[1:])]
            return self.ok(wiki_json(found[0], True)) if found else self.fail(404, "404 Wiki Page Not Found")
        return self.fail(404, "404 Not Found")

    def threads(
        self, project: dict[str, Any], kind: str, tail: list[str], path: str, query: dict[str, str], base: str
    ) -> int:
        items = [item_json(kind, i, project, base) for i in project.get(kind, [])]
        if not tail:
            wanted = query.get("state", "all")
            if wanted != "all":
                items = [i for i in items if i["state"] == wanted]
            return self.page(items, path, query, base)
        found = [i for i in items if str(i["iid"]) == tail[0]]
        if not found:
            return self.fail(404, "404 Not found")
        if len(tail) == 1:
            return self.ok(found[0])
        if tail[1:] == ["notes"]:
            notes = project.get("notes", {}).get(f"{kind}/{found[0]['iid']}", [])
            return self.page([note_json(n, kind, found[0]) for n in notes], path, query, base)
        return self.fail(404, "404 Not Found")

    @staticmethod
    def project(state: dict[str, Any], ident: str) -> dict[str, Any] | None:
        for project in state.get("projects", []):
            if ident == str(project["id"]) or ident == project["path_with_namespace"]:
                return project
        return None

    def page(
        self, rows: list[dict[str, Any]], path: str, query: dict[str, str], base: str, *, ordered: bool = True
    ) -> int:
        """One page of ``rows``, ordered as asked, with GitLab's offset pagination headers."""
        if ordered:
            field = query.get("order_by", "created_at")
            rows = sorted(rows, key=lambda r: (str(r.get(field, "")), r.get("id", 0)))
            if query.get("sort", "desc") == "desc":
                rows.reverse()
        per_page = max(1, min(100, int(query.get("per_page", 20))))
        number = max(1, int(query.get("page", 1)))
        pages = max(1, math.ceil(len(rows) / per_page))
        chunk = rows[(number - 1) * per_page : number * per_page]

        def link(n: int) -> str:
            return f"{base}{path}?{urlencode({**query, 'page': n, 'per_page': per_page})}"

        links = {"prev": number - 1} if number > 1 else {}
        links |= ({"next": number + 1} if number < pages else {}) | {"first": 1, "last": pages}
        headers = {
            "X-Page": str(number),
            "X-Per-Page": str(per_page),
            "X-Next-Page": str(number + 1) if number < pages else "",
            "X-Prev-Page": str(number - 1) if number > 1 else "",
            "X-Total": str(len(rows)),
            "X-Total-Pages": str(pages),
            "Link": ", ".join(f'<{link(n)}>; rel="{rel}"' for rel, n in links.items()),
        }
        return self.ok(chunk, headers)

    def ok(self, payload: object, headers: dict[str, str] | None = None) -> int:
        return self.answer(200, payload, headers)

    def fail(self, status: int, message: str, headers: dict[str, str] | None = None) -> int:
        return self.answer(status, {"message": message}, headers)

    def answer(self, status: int, payload: object, headers: dict[str, str] | None) -> int:
        """Send the answer, logged first (a test reads the log as soon as its client has the answer)."""
        self.server.gitlab.record(self.entry | {"status": status})
        if not headers:
            send_json(self, payload, status)
            return status
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        return status

    def text(self, status: int, body: str, headers: dict[str, str]) -> None:
        """A page that is not JSON (what a proxy answers in GitLab's stead)."""
        self.server.gitlab.record(self.entry | {"status": status})
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    gitlab: GitLab


def main() -> None:
    serve_stand(Server, Handler, GitLab, "gitlab")


if __name__ == "__main__":
    main()
