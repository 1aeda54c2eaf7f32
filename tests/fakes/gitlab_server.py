"""A GitLab REST v4 stand-in for the gitlab connector's and the issue tracker's tests: what
python-gitlab calls to read a project's issues, merge requests, their notes and the wiki, to file an
issue and to list the merge requests linked to one, with GitLab's shapes and pagination.

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
     "faults": [{"status": 429, "times": 2, "retry_after": 1, "match": "/issues"}],
     "token_scopes": ["read_api"]}                                   # absent: ["api"]

What GitLab derives, the stand-in fills in: an item's ``id``, ``project_id``, ``web_url``, ``type``,
the defaults of absent fields, and (as GitLab touches an issue when a note is added or edited) an
issue's or merge request's ``updated_at`` is the latest of its own and its notes' times (compared as
text: write them all in GitLab's one format, ``2024-01-01T10:00:00.000Z``).

Each fault answers the next ``times`` requests whose method, path and query (``POST
/api/v4/projects/7/issues``, ``GET /api/v4/projects/7/issues?page=2``) contain ``match`` (all
requests without one) with ``status`` and ``{"message": ...}`` (or ``body`` as text/html, the way a
proxy answers), with a ``Retry-After`` header when ``retry_after`` is set, before the token is
checked; how many remain is kept in memory per fault (its index and content). ``"drop": true``
closes the connection without any answer instead. ``"after": true`` carries the request out first
(an issue filed and stored) and only then answers with the fault (or drops the connection), the way
a proxy times out on a write GitLab did: a client cannot tell it from one that never arrived.
A token is read from ``PRIVATE-TOKEN`` or ``Authorization: Bearer``; anything else is a 401. It
belongs to the user ``connector`` (``GET /user``), who authors what it files. A write (POST) needs
the token's ``api`` scope: with ``"token_scopes": ["read_api"]`` in the state file it is answered
403 ``{"error": "insufficient_scope", ...}``, as GitLab answers it.

Filing and links:

- ``POST /projects/:id/issues`` (JSON or a form: ``title``, ``description``, ``labels`` as a list
  or comma-separated) stores the issue in the state file with the project's next issue iid,
  ``opened``, authored by the token's user, ``created_at`` / ``updated_at`` now; answers 201 with
  it (``web_url`` filled in as for every issue).
- ``GET /projects/:id/issues`` and ``/merge_requests`` take ``search`` (every word of it, case
  folded, in the title or the description; ``in=title`` or ``in=description`` narrows where).
- ``GET /projects/:id/issues/:iid/related_merge_requests``: the project's merge requests whose title
  or description mentions ``#<iid>``; ``GET .../issues/:iid/closed_by``: those whose description says
  it closes the issue (``Closes #<iid>``, ``Fixes #<iid>``, ``Resolves #<iid>``, any case, GitLab's
  default closing pattern), whatever their state. A test links a merge request to an issue the way a
  user does: a merge request in the state file whose description says ``Closes #<iid>``.
Lists page by offset (``page``, ``per_page`` at most 100, default 20) with GitLab's headers
(``X-Page``, ``X-Per-Page``, ``X-Next-Page``, ``X-Prev-Page``, ``X-Total``, ``X-Total-Pages`` and a
``Link`` with ``rel="next"``); ``order_by`` and ``sort`` (default ``created_at``, ``desc``) order
them, ties by id. ``--log`` appends one JSON line per request (method, decoded path, query, status, token).
"""

from __future__ import annotations

import json
import math
import re
import zlib
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from tests.fakes import Stand, send_body, send_json, serve_stand

EPOCH = "2024-01-01T00:00:00.000Z"
ANON = {"id": 1, "username": "ghost", "name": "Ghost User", "state": "active"}
INSUFFICIENT = "The request requires higher privileges than provided by the access token."
TOKEN_USER = {"id": 1, "username": "connector", "name": "Connector"}  # whose token the stand-in accepts
CLOSING = (
    r"(?i)\b(?:close[sd]?|closing|fix(?:e[sd]|ing)?|resolve[sd]?|resolving|implement(?:s|ed|ing)?):?\s+#{iid}(?!\d)"
)
MENTION = r"(?<![\w/!&])#{iid}(?!\d)"


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


def found_by(item: dict[str, Any], search: str, where: str) -> bool:
    """Whether every word of ``search`` is in the item's title or description (``where``: which)."""
    text = " ".join(str(item.get(f) or "") for f in ("title", "description") if f in where.split(",")).casefold()
    return all(word in text for word in search.casefold().split())


def wiki_json(page: dict[str, Any], content: bool) -> dict[str, Any]:
    out = {"slug": page["slug"], "title": page.get("title", page["slug"]), "format": page.get("format", "markdown")}
    if content:
        out |= {"content": page.get("content", ""), "encoding": "UTF-8"}
    return out


class Handler(BaseHTTPRequestHandler):
    server: Server
    entry: dict[str, Any]
    pending: dict[str, Any] | None

    def do_GET(self) -> None:
        self.handle_method("GET")

    def do_POST(self) -> None:
        self.handle_method("POST")

    def handle_method(self, method: str) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        token = self.headers.get("PRIVATE-TOKEN")
        self.entry = {"method": method, "path": unquote(split.path), "query": query, "private_token": token}
        self.pending = None  # an "after" fault, answered once the request is done
        body = self.form() if method == "POST" else {}
        if method == "POST":
            self.entry["body"] = body
        gitlab = self.server.gitlab
        state = gitlab.read()
        fault = gitlab.fault(state.get("faults", []), f"{method} {self.path}")
        if fault is not None and fault.get("after"):
            self.pending = fault
            fault = None
        if fault is not None:
            self.fault_answer(fault)
        elif not self.authorised():
            self.fail(401, "401 Unauthorized")
        elif method == "POST" and "api" not in state.get("token_scopes", ["api"]):
            self.answer(403, {"error": "insufficient_scope", "error_description": INSUFFICIENT, "scope": "api"}, None)
        else:
            seg = [unquote(s) for s in split.path.split("/")[1:]]
            if method == "POST":
                self.write(seg, body)
            else:
                self.route(state, seg, split.path, query)

    def fault_answer(self, fault: dict[str, Any]) -> None:
        """What a fault answers: nothing (the connection closed), a proxy's page, or GitLab's error."""
        status = int(fault["status"]) if "status" in fault else 502
        if fault.get("drop"):
            self.server.gitlab.record(self.entry | {"status": None, "dropped": True})
            self.close_connection = True
            return
        headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
        if "body" in fault:
            self.text(status, str(fault["body"]), headers)
        else:
            self.fail(status, f"{status} {self.responses.get(status, ('Error',))[0]}", headers)

    def form(self) -> dict[str, Any]:
        """A write's fields, sent as JSON (python-gitlab) or as a form (curl)."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        if "json" in self.headers.get("Content-Type", ""):
            loaded = json.loads(raw or "{}")
            return loaded if isinstance(loaded, dict) else {}
        return {k: v[-1] for k, v in parse_qs(raw).items()}

    def write(self, seg: list[str], body: dict[str, Any]) -> int:
        """``POST /api/v4/projects/:id/issues``: the issue filed, stored in the state file."""
        rest = seg[2:] if seg[:2] == ["api", "v4"] else []
        if len(rest) != 3 or rest[0] != "projects" or rest[2] != "issues":
            return self.fail(404, "404 Not Found")
        title = str(body.get("title") or "").strip()
        if not title:
            return self.answer(400, {"error": "title is missing"}, None)
        labels = body.get("labels") or []
        if isinstance(labels, str):
            labels = [label.strip() for label in labels.split(",")]
        gitlab = self.server.gitlab
        with gitlab.lock:  # answered outside it: the log takes the same lock
            state = gitlab.read()
            project = self.project(state, rest[1])
            if project is not None:
                issues = project.setdefault("issues", [])
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
                issue = {
                    "iid": max((i["iid"] for i in issues), default=0) + 1,
                    "title": title[:255],
                    "description": body.get("description"),
                    "state": "opened",
                    "labels": [label for label in labels if label],
                    "author": dict(TOKEN_USER),
                    "created_at": now,
                    "updated_at": now,
                }
                issues.append(issue)
                temporary = gitlab.state.with_suffix(".writing")
                temporary.write_text(json.dumps(state))
                temporary.replace(gitlab.state)
        if project is None:
            return self.fail(404, "404 Project Not Found")
        return self.answer(201, item_json("issues", issue, project, self.base()), None)

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
            return self.ok(TOKEN_USER | {"state": "active"})
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
            if query.get("search"):
                items = [i for i in items if found_by(i, query["search"], query.get("in", "title,description"))]
            return self.page(items, path, query, base)
        found = [i for i in items if str(i["iid"]) == tail[0]]
        if not found:
            return self.fail(404, "404 Not found")
        if len(tail) == 1:
            return self.ok(found[0])
        if tail[1:] == ["notes"]:
            notes = project.get("notes", {}).get(f"{kind}/{found[0]['iid']}", [])
            return self.page([note_json(n, kind, found[0]) for n in notes], path, query, base)
        if kind == "issues" and tail[1:] in (["related_merge_requests"], ["closed_by"]):
            pattern = re.compile(
                (MENTION if tail[1] == "related_merge_requests" else CLOSING).format(iid=found[0]["iid"])
            )
            merges = [item_json("merge_requests", m, project, base) for m in project.get("merge_requests", [])]
            fields = ("title", "description") if tail[1] == "related_merge_requests" else ("description",)
            linked = [m for m in merges if any(pattern.search(str(m.get(f) or "")) for f in fields)]
            return self.page(linked, path, query, base)
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
        """Send the answer, logged first (a test reads the log as soon as its client has the answer);
        a pending "after" fault's answer instead, the request done."""
        if self.pending is not None and status < 400:
            fault, self.pending = self.pending, None
            self.entry["done"] = status
            self.fault_answer(fault)
            return int(fault.get("status", 502))
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
        send_body(self, status, body.encode(), "text/html", headers)

    def log_message(self, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    gitlab: GitLab


def main() -> None:
    serve_stand(Server, Handler, GitLab, "gitlab")


if __name__ == "__main__":
    main()
