"""A Vikunja REST API stand-in for the vikunja connector's and the issue tracker's tests: what the
source calls to list the projects and tasks a token sees and read a task's comments, and what the
tracker calls to create a task and find it again, with Vikunja's shapes and paging.

Run: python -m tests.fakes.vikunja_server --port PORT --state FILE --token TOKEN [--log FILE].

FILE is JSON, re-read on every request, so a test edits the instance between two scans::

    {"projects": [{"id": 1, "title": "Ops", "description": "<p>...</p>", "parent_project_id": 0,
                   "is_archived": false, "owner": {"id": 1, "username": "ann", "name": "Ann"},
                   "created": "...", "updated": "..."}],
     "tasks": [{"id": 10, "project_id": 1, "title": "...", "description": "<p>...</p>", "done": false,
                "done_at": null, "due_date": "2024-06-01T12:00:00Z", "priority": 2,
                "labels": [{"id": 1, "title": "bug"}], "assignees": [{"id": 2, "username": "bo"}],
                "created_by": {"id": 1, "username": "ann"}, "created": "...", "updated": "..."}],
     "comments": {"10": [{"id": 5, "comment": "<p>...</p>", "author": {"id": 2, "username": "bo"},
                          "created": "...", "updated": "..."}]},
     "api": "current",           # "0.24": /tasks/all, expand=comments refused (400); "0.22": /tasks/all, expand ignored
     "comments_disabled": false, # the comment routes missing (404), as with service.enabletaskcomments off
     "max_per_page": 50,
     "faults": [{"status": 429, "times": 2, "retry_after": 1, "match": "/tasks"}]}

Routes, under ``/api/v1``: ``GET /projects`` (archived ones only with ``is_archived=true``),
``GET /projects/{id}``, the collection of every task in an unarchived project (``GET /tasks`` on current,
``GET /tasks/all`` before; ``sort_by`` / ``order_by`` on ``id``, ``updated``, ``title``;
``expand=comments`` puts a task's first 50 comments in ``comments``, left out when it has none),
``s`` searching (case folded) a task's title and description, ``GET /tasks/{id}`` and
``GET /tasks/{id}/comments`` (paged on current and 0.24; 0.22 answers every comment on every page, as
its comment listing ignored ``page``). ``PUT /projects/{id}/tasks`` (Vikunja's verb for create; JSON
``title``, ``description``, ``done``, ``priority``, ``due_date``) stores a new task in the state file
(the next id, the project's next index, ``created_by`` the token's user, ``created`` / ``updated``
now) and answers 201 with it; an archived project answers 412, an unknown one 404, no title 400.
Lists page with ``page`` and ``per_page`` (at most ``max_per_page``, the default too) and send
``x-pagination-total-pages`` and ``x-pagination-result-count``. Absent fields are filled with Vikunja's defaults: Go's zero time
``0001-01-01T00:00:00Z`` for an unset date and ``null`` for an empty list. Errors are
``{"code": ..., "message": ...}``.

Each fault answers the next ``times`` requests whose method, path and query (``PUT
/api/v1/projects/1/tasks``) contain ``match`` (all requests without one) with ``status`` (and
``Retry-After`` when ``retry_after`` is set), before the token is checked; counts are kept in memory
per fault. ``"drop": true`` closes the connection without an answer instead; ``"after": true``
carries the request out (a task created) before answering with the fault. A token is read from
``Authorization: Bearer``; anything else is a 401. It belongs to ``ann`` (id 1), who creates what it
files. ``--log`` appends one JSON line per request (method, path, query, status).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes import Stand, serve_stand

EPOCH = "2024-01-01T00:00:00Z"
ZERO = "0001-01-01T00:00:00Z"
INLINE_COMMENTS = 50
TOKEN_USER = {"id": 1, "username": "ann", "name": "Ann Lee"}  # whose token the stand-in accepts


class Vikunja(Stand):
    """The Vikunja stand-in's state file, token, faults and request log."""


def user_json(value: dict[str, Any] | None) -> dict[str, Any]:
    value = value or {"id": 1, "username": "ann"}
    return {
        "id": value.get("id", 1),
        "name": value.get("name", ""),
        "username": value.get("username", f"user{value.get('id', 1)}"),
        "created": EPOCH,
        "updated": EPOCH,
    }


def project_json(project: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": project["id"],
        "title": project.get("title", ""),
        "description": project.get("description", ""),
        "identifier": project.get("identifier", ""),
        "hex_color": "",
        "parent_project_id": project.get("parent_project_id", 0),
        "owner": user_json(project.get("owner")),
        "is_archived": bool(project.get("is_archived", False)),
        "background_information": None,
        "background_blur_hash": "",
        "is_favorite": False,
        "position": float(project["id"]) * 65536,
        "max_right": 2,
        "created": project.get("created", EPOCH),
        "updated": project.get("updated", EPOCH),
    }


def comment_json(comment: dict[str, Any]) -> dict[str, Any]:
    created = comment.get("created", EPOCH)
    return {
        "id": comment["id"],
        "comment": comment.get("comment", ""),
        "author": user_json(comment.get("author")),
        "reactions": None,
        "created": created,
        "updated": comment.get("updated", created),
    }


def task_json(task: dict[str, Any], projects: dict[int, dict[str, Any]]) -> dict[str, Any]:
    project = projects.get(task["project_id"], {})
    index = task.get("index", task["id"])
    labels = [
        {"id": lb.get("id", 0), "title": lb.get("title", ""), "description": "", "hex_color": "e8e8e8"}
        | {"created_by": user_json(None), "created": EPOCH, "updated": EPOCH}
        for lb in task.get("labels") or []
    ]
    assignees = [user_json(a) for a in task.get("assignees") or []]
    return {
        "id": task["id"],
        "title": task.get("title", ""),
        "description": task.get("description", ""),
        "done": bool(task.get("done", False)),
        "done_at": task.get("done_at") or ZERO,
        "due_date": task.get("due_date") or ZERO,
        "reminders": None,
        "project_id": task["project_id"],
        "repeat_after": 0,
        "repeat_mode": 0,
        "priority": task.get("priority", 0),
        "start_date": ZERO,
        "end_date": ZERO,
        "assignees": assignees or None,
        "labels": labels or None,
        "hex_color": "",
        "percent_done": 0,
        "identifier": f"{project.get('identifier')}-{index}" if project.get("identifier") else f"#{index}",
        "index": index,
        "related_tasks": {},
        "attachments": None,
        "cover_image_attachment_id": 0,
        "is_favorite": False,
        "created": task.get("created", EPOCH),
        "updated": task.get("updated", EPOCH),
        "bucket_id": 0,
        "position": 0,
        "reactions": None,
        "created_by": user_json(task.get("created_by")),
    }


class Handler(BaseHTTPRequestHandler):
    server: Server
    entry: dict[str, Any]  # this request, for the log
    pending: dict[str, Any] | None

    def do_GET(self) -> None:
        self.handle_method("GET")

    def do_PUT(self) -> None:
        self.handle_method("PUT")

    def handle_method(self, method: str) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        expand = parse_qs(split.query).get("expand", [])
        vikunja = self.server.vikunja
        # logged as the answer goes out (see answer), so the log is in the order the client saw
        self.entry = {"method": method, "path": unquote(split.path), "query": query}
        self.pending = None  # an "after" fault, answered once the request is done
        body: Any = None
        if method == "PUT":
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"null")
            self.entry["body"] = body
        state = vikunja.read()
        fault = vikunja.fault(state.get("faults", []), f"{method} {self.path}")
        if fault is not None and fault.get("after"):
            self.pending, fault = fault, None
        if fault is not None:
            self.fault_answer(fault)
            return
        if self.headers.get("Authorization") != f"Bearer {vikunja.token}":
            self.fail(401, "missing, malformed, expired or otherwise invalid token provided")
            return
        seg = [unquote(s) for s in split.path.split("/")[1:] if s]
        if method == "PUT":
            self.create(seg, body)
        else:
            self.route(state, seg, query, expand)

    def fault_answer(self, fault: dict[str, Any]) -> None:
        if fault.get("drop"):
            self.server.vikunja.record(self.entry | {"status": None, "dropped": True})
            self.close_connection = True
            return
        status = int(fault.get("status", 502))
        headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
        self.fail(status, fault.get("message", f"fault {status}"), headers=headers)

    def create(self, seg: list[str], body: Any) -> int:
        """``PUT /api/v1/projects/{id}/tasks``: a new task, stored in the state file."""
        rest = seg[2:] if seg[:2] == ["api", "v1"] else []
        if len(rest) != 3 or rest[0] != "projects" or rest[2] != "tasks" or not rest[1].isdigit():
            return self.fail(404, "Not Found")
        if not isinstance(body, dict):
            return self.fail(400, "Invalid model provided.", code=2002)
        title = str(body.get("title") or "").strip()
        if not title:
            return self.fail(400, "Task title cannot be empty.", code=4001)
        vikunja = self.server.vikunja
        with vikunja.lock:  # answered outside it: the log takes the same lock
            state = vikunja.read()
            ident = int(rest[1])
            project = next((p for p in state.get("projects", []) if p["id"] == ident), None)
            if project is not None and not project.get("is_archived"):
                tasks = state.setdefault("tasks", [])
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                index = max((t.get("index", t["id"]) for t in tasks if t["project_id"] == ident), default=0) + 1
                task = {
                    "id": max((t["id"] for t in tasks), default=0) + 1,
                    "index": index,
                    "project_id": ident,
                    "title": title,
                    "description": body.get("description") or "",
                    "done": bool(body.get("done", False)),
                    "priority": int(body.get("priority") or 0),
                    "due_date": body.get("due_date"),
                    "created_by": dict(TOKEN_USER),
                    "created": now,
                    "updated": now,
                }
                tasks.append(task)
                temporary = vikunja.state.with_suffix(".writing")
                temporary.write_text(json.dumps(state))
                temporary.replace(vikunja.state)
        if project is None:
            return self.fail(404, "The project does not exist.", code=3001)
        if project.get("is_archived"):
            return self.fail(412, "This project is archived. Editing or creating new tasks is not possible.")
        projects = {p["id"]: project_json(p) for p in state.get("projects", [])}
        return self.answer(201, task_json(task, projects), None)

    def route(self, state: dict[str, Any], seg: list[str], query: dict[str, str], expand: list[str]) -> int:
        if seg[:2] != ["api", "v1"]:
            return self.fail(404, "Not Found")
        rest, api = seg[2:], state.get("api", "current")
        projects = {p["id"]: project_json(p) for p in state.get("projects", [])}
        comments = {str(k): [comment_json(c) for c in v] for k, v in state.get("comments", {}).items()}
        tasks = [task_json(t, projects) for t in state.get("tasks", [])]
        if rest == ["projects"]:
            archived = query.get("is_archived") == "true"
            rows = [p for p in projects.values() if archived or not p["is_archived"]]
            return self.page(state, sorted(rows, key=lambda p: p["id"]), query)
        if len(rest) == 2 and rest[0] == "projects":
            found = projects.get(int(rest[1])) if rest[1].lstrip("-").isdigit() else None
            return self.ok(found) if found else self.fail(404, "The project does not exist.", code=3001)
        if rest == (["tasks"] if api == "current" else ["tasks", "all"]):
            return self.collection(state, tasks, projects, comments, query, expand)
        if rest == ["tasks"]:
            return self.fail(404, "Not Found")
        if rest and rest[0] == "tasks" and len(rest) in (2, 3):
            if not rest[1].isdigit():
                return self.fail(400, "Invalid model provided.", code=2002)
            found_tasks = [t for t in tasks if t["id"] == int(rest[1])]
            if not found_tasks:
                return self.fail(404, "The task does not exist.", code=4002)
            if len(rest) == 2:
                return self.ok(found_tasks[0])
            if rest[2] == "comments" and not state.get("comments_disabled"):
                rows = sorted(comments.get(rest[1], []), key=lambda c: c["id"])
                if api == "0.22":  # every comment whatever the page, yet counted in pages
                    pages = math.ceil(len(rows) / max(1, int(query.get("per_page", 50))))
                    return self.ok(
                        rows, {"x-pagination-total-pages": str(pages), "x-pagination-result-count": str(len(rows))}
                    )
                return self.page(state, rows, query)
        return self.fail(404, "Not Found")

    def collection(
        self,
        state: dict[str, Any],
        tasks: list[dict[str, Any]],
        projects: dict[int, dict[str, Any]],
        comments: dict[str, list[dict[str, Any]]],
        query: dict[str, str],
        expand: list[str],
    ) -> int:
        """Every task of an unarchived project, ordered as asked, its comments in it when expanded."""
        api = state.get("api", "current")
        known = {"current": {"subtasks", "buckets", "reactions", "comments"}, "0.24": {"subtasks", "buckets"}}
        if api in known and any(e not in known[api] for e in expand):
            return self.fail(400, "The task expand value is invalid.", code=4025)
        rows = [t for t in tasks if not projects.get(t["project_id"], {}).get("is_archived", True)]
        if query.get("s"):
            needle = query["s"].casefold()
            rows = [t for t in rows if needle in f"{t['title']}\n{t['description']}".casefold()]
        field = query.get("sort_by", "id")
        if field not in ("id", "updated", "title"):
            return self.fail(400, f"The task field '{field}' is invalid.", code=4016)
        rows.sort(key=lambda t: (t[field], t["id"]), reverse=query.get("order_by", "asc") == "desc")
        if api == "current" and "comments" in expand:
            for row in rows:
                said = sorted(comments.get(str(row["id"]), []), key=lambda c: c["id"])[:INLINE_COMMENTS]
                if said:
                    row["comments"] = said
        return self.page(state, rows, query)

    def page(self, state: dict[str, Any], rows: list[dict[str, Any]], query: dict[str, str]) -> int:
        most = int(state.get("max_per_page", 50))
        per_page = int(query.get("per_page", most))
        per_page = most if per_page < 1 else min(per_page, most)
        number = max(1, int(query.get("page", 1)))
        chunk = rows[(number - 1) * per_page : number * per_page]
        headers = {
            "x-pagination-total-pages": str(math.ceil(len(rows) / per_page)),
            "x-pagination-result-count": str(len(chunk)),
        }
        return self.ok(chunk, headers)

    def ok(self, payload: object, headers: dict[str, str] | None = None) -> int:
        return self.answer(200, payload, headers)

    def fail(self, status: int, message: str, *, code: int | None = None, headers: dict[str, str] | None = None) -> int:
        body: dict[str, Any] = {"message": message} if code is None else {"code": code, "message": message}
        return self.answer(status, body, headers)

    def answer(self, status: int, payload: object, headers: dict[str, str] | None) -> int:
        if self.pending is not None and status < 400:  # the request done: the fault answers for it
            fault, self.pending = self.pending, None
            self.entry["done"] = status
            self.fault_answer(fault)
            return int(fault.get("status", 502))
        self.server.vikunja.record(self.entry | {"status": status})
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        return status

    def log_message(self, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    vikunja: Vikunja


def main() -> None:
    serve_stand(Server, Handler, Vikunja, "vikunja")


if __name__ == "__main__":
    main()
