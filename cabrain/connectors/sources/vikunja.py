"""Vikunja: a Vikunja instance's projects and tasks, each task with its comments, as items.

Vikunja has no well-kept Python client; this reads its REST API (``{url}/api/v1``) with httpx. The
config::

    {"url": "https://tasks.example.com", "token_env": "VIKUNJA_TOKEN", "projects": [3, 7]}

- ``token_env`` names the variable holding an API token (Settings › API Tokens; it needs read
  permission on projects, tasks and task comments), sent as ``Authorization: Bearer``;
- ``projects``: only those projects and the projects under them (Vikunja nests projects); absent,
  every project the token sees. Archived projects are left out, as Vikunja's own listings leave them
  (archiving one reads as deleting its items). The pseudo-projects (Favorites, saved filters) are
  skipped: their tasks are in their real projects.

Items:

- ``projects/<id>``: the project's title and description; version = its ``updated`` with a digest
  of what is shown;
- ``tasks/<id>``: the task (title, done, due date, labels, assignees, then its description) and
  one part per comment (anchor ``comment-<id>``, said by its author when it was written), all in the
  thread ``tasks/<id>``; url = ``{url}/tasks/<id>``.

A task's version: Vikunja does not touch a task's ``updated`` when a comment is added or edited, nor
when labels or assignees change, so the version is ``updated`` plus a digest of the task's rendered
fields, its labels and assignees and each comment's id and ``updated``. The comments come with the
listing where the server can (``expand=comments`` on current releases: a task's first 50, the key
left out when it has none). A task with 50 or more has its comments listed on its own
(``/tasks/<id>/comments``), and so has every task when no listed task carries the key (a server that
ignores the expansion, or no comment anywhere): then a scan costs one more request per task.

Which task listing: Vikunja 0.24 moved a project's tasks under its views
(``/projects/<id>/views/<view>/tasks``, where a view's filter, such as the List view's
``done = false``, hides tasks), so tasks are read from the collection of every task the token sees
(``GET /tasks`` on current releases, ``/tasks/all`` on older ones such as 0.22 to 0.24; tried in
that order once per source), unfiltered, ordered by id, and kept when their project is. Descriptions
and comments are HTML (Markdown before 0.22: a text without tags is read as Markdown). Lists page
with ``page`` / ``per_page`` and the ``x-pagination-total-pages`` header; a row seen on an earlier
page is not listed twice (0.22 answered every comment on every page).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, ClassVar

from cabrain.connectors.base import Document, ItemRef, Part, SourceSpec
from cabrain.connectors.config import checked
from cabrain.connectors.convert import Converted, to_text
from cabrain.connectors.retry import Retry, retry_after
from cabrain.connectors.split import split
from cabrain.egress import Egress
from cabrain.errors import InputError, SourceAuthError, SourceError

__all__ = ["KIND", "LOCAL", "VikunjaSource", "build", "configure"]

KIND = "vikunja"
LOCAL = False

log = logging.getLogger("cabrain.connectors")

PER_PAGE = 50  # Vikunja's default most items per page (service.maxitemsperpage)
INLINE_COMMENTS = 50  # expand=comments carries a task's first 50 comments
TASK_ROUTES = ("/tasks", "/tasks/all")  # current releases; older ones (0.22 to 0.24)
_TAG = re.compile(r"<[A-Za-z/!][^>]*>")
TOKEN_HINT = (
    "create an API token in Vikunja (Settings › API Tokens) with read permission on projects, tasks and "
    "task comments, and put it in ${env}"
)


def _check(config: dict[str, Any]) -> None:
    config["url"] = config["url"].removesuffix("/api/v1")
    projects = config["projects"]
    if projects is None:
        return
    if not projects or any(isinstance(p, bool) or not isinstance(p, int) or p <= 0 for p in projects):
        raise InputError(
            f"{KIND} connector: projects must be a list of project ids (positive integers), got {projects!r}",
            hint="a project's id is the number in its address: https://vikunja.example.com/projects/<id>",
        )
    config["projects"] = sorted(set(projects))


configure = checked(KIND, required={"url": str, "token_env": str}, optional={"projects": (list, None)}, check=_check)


def build(spec: SourceSpec, retry: Retry) -> VikunjaSource:
    config = configure(spec.config)
    if not spec.secret:
        raise SourceAuthError(
            f"{KIND} connector: no API token in ${config['token_env']}",
            hint=TOKEN_HINT.format(env=config["token_env"]),
        )
    return VikunjaSource(config, spec.secret, retry, part_chars=spec.part_chars, egress=spec.egress)


class VikunjaSource:
    """The projects and tasks one API token sees on one Vikunja instance."""

    kind: ClassVar[str] = KIND

    def __init__(
        self,
        config: Mapping[str, Any],
        token: str,
        retry: Retry,
        *,
        part_chars: int = 2000,
        timeout_s: float = 30.0,
        egress: Egress | None = None,
    ) -> None:
        self.url: str = config["url"]
        self.token_env: str = config["token_env"]
        self.wanted: set[int] | None = set(config["projects"]) if config.get("projects") else None
        self.retry = retry
        self.part_chars = part_chars
        self.client = (egress or Egress()).client(
            base_url=f"{self.url}/api/v1",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout_s,
        )
        self._route: tuple[str, bool] | None = None  # the task listing this server answers, and with comments

    # --- checking --------------------------------------------------------------------------------
    def check(self) -> None:
        """Requests with the token: the first project listed (the instance and the token), then
        each project the config names read (visible to the token's user)."""
        where = "check that url is the Vikunja instance's address (its API is under /api/v1)"
        try:
            response = self._get("list projects", "/projects", {"page": 1, "per_page": 1})
        except SourceAuthError:
            raise
        except SourceError as exc:
            if exc.status_code not in (404, 405):
                raise
            raise SourceError(
                f"{KIND}: {self.url} has no Vikunja API ({exc.message})", hint=where, status_code=404
            ) from None
        if not isinstance(_loads(response), list | None):
            raise SourceError(f"{KIND}: {self.url} answered something other than Vikunja's JSON", hint=where)
        for ident in sorted(self.wanted or ()):
            try:
                self._get("read project", f"/projects/{ident}")
            except SourceError as exc:
                if exc.status_code not in (403, 404):
                    raise
                raise type(exc)(
                    f"{KIND}: project {ident} is not visible to the token in ${self.token_env} ({exc.message})",
                    hint="check projects (the number in https://HOST/projects/<id>), and share the project with "
                    "the token's user",
                    status_code=exc.status_code,
                ) from None

    # --- listing ---------------------------------------------------------------------------------
    def scan(self) -> Iterator[ItemRef]:
        """The projects by id, then their tasks by id."""
        projects = self._projects()
        for project in projects:
            ident = project["id"]
            yield ItemRef(f"projects/{ident}", _project_version(project), f"{self.url}/projects/{ident}")
        kept = {p["id"] for p in projects}
        path, expand = self._task_route()
        params = {"sort_by": "id", "order_by": "asc"} | ({"expand": "comments"} if expand else {})
        tasks = [t for t in self._pages("list tasks", path, params) if t.get("project_id") in kept]
        # A task without comments has no "comments" key at all: the server honours the expansion
        # only if some task carries one (else each task's comments are listed on their own).
        inline = expand and any("comments" in t for t in tasks)
        for task in sorted(tasks, key=lambda t: int(t["id"])):
            ident = task["id"]
            comments = task.get("comments") or []
            if not inline or len(comments) >= INLINE_COMMENTS:
                comments = self._comments(ident)
            yield ItemRef(f"tasks/{ident}", _task_version(task, comments), f"{self.url}/tasks/{ident}")

    def _projects(self) -> list[dict[str, Any]]:
        """The real (positive id), unarchived projects to read: the configured ones and those under them."""
        found = [p for p in self._pages("list projects", "/projects", {}) if int(p.get("id") or 0) > 0]
        found = [p for p in found if not p.get("is_archived")]
        if self.wanted is not None:
            children: dict[int, list[int]] = {}
            for project in found:
                children.setdefault(int(project.get("parent_project_id") or 0), []).append(project["id"])
            chosen: set[int] = set()
            stack = sorted(self.wanted)
            while stack:
                ident = stack.pop()
                if ident not in chosen:
                    chosen.add(ident)
                    stack.extend(children.get(ident, []))
            missing = self.wanted - {p["id"] for p in found}
            if missing:
                log.warning("vikunja projects not visible to the token", extra={"projects": sorted(missing)})
            found = [p for p in found if p["id"] in chosen]
        return sorted(found, key=lambda p: int(p["id"]))

    def _task_route(self) -> tuple[str, bool]:
        """Which collection of every task this server answers, and whether it takes ``expand=comments``."""
        if self._route is not None:
            return self._route
        last: SourceError | None = None
        for path in TASK_ROUTES:
            for expand in (True, False):
                params = {"page": 1, "per_page": 1} | ({"expand": "comments"} if expand else {})
                try:
                    response = self._get("list tasks", path, params)
                except SourceError as exc:
                    if isinstance(exc, SourceAuthError) or exc.status_code not in (400, 404, 405):
                        raise
                    last = exc
                    if exc.status_code == 400:  # an older server refusing the expansion: try without
                        continue
                    break  # no such route: the next one
                if isinstance(_loads(response), list):
                    self._route = (path, expand)
                    return self._route
                break  # answered, but not with tasks (a web page): the next route
        raise SourceError(
            f"list tasks: {self.url} answers neither /api/v1/tasks nor /api/v1/tasks/all with tasks",
            hint="check that url is the Vikunja instance's address (its API is under /api/v1)",
            status_code=last.status_code if last else None,
        )

    def _comments(self, task: int) -> list[dict[str, Any]]:
        """A task's comments, oldest first; none where the server has comments turned off (404)."""
        try:
            comments = list(self._pages("list comments", f"/tasks/{task}/comments", {}))
        except SourceError as exc:
            if exc.status_code != 404 or isinstance(exc, SourceAuthError):
                raise
            return []
        return sorted(comments, key=lambda c: (str(c.get("created") or ""), int(c.get("id") or 0)))

    # --- fetching --------------------------------------------------------------------------------
    def fetch(self, ref: ItemRef) -> Document:
        kind, _, ident = ref.key.partition("/")
        if kind == "projects" and ident.isdigit():
            return self._project(ref, int(ident))
        if kind == "tasks" and ident.isdigit():
            return self._task(ref, int(ident))
        raise SourceError(f"{ref.key} is not a Vikunja project or task", status_code=404)

    def _project(self, ref: ItemRef, ident: int) -> Document:
        project = _json_of("read project", self._get("read project", f"/projects/{ident}"))
        title = str(project.get("title") or f"Project {ident}")
        body = _html_text(project.get("description"))
        text = title + (f"\n\n{body.text}" if body and body.text else "")
        owner = _name(project.get("owner"))
        parts = [
            Part(anchor=_anchored("project", p.anchor), text=p.text, speaker=owner, title=p.title)
            for p in split(text, markdown=bool(body and body.markdown), max_chars=self.part_chars, title=title)
        ]
        metadata = {"project_id": ident, "identifier": project.get("identifier") or None}
        return Document(ref, title, tuple(parts), _time(project.get("updated")), metadata)

    def _task(self, ref: ItemRef, ident: int) -> Document:
        task = _json_of("read task", self._get("read task", f"/tasks/{ident}"))
        comments = self._comments(ident)
        title = str(task.get("title") or f"Task {ident}")
        thread = f"tasks/{ident}"
        labels = [str(label.get("title")) for label in task.get("labels") or [] if label.get("title")]
        assignees = [n for n in (_name(a) for a in task.get("assignees") or []) if n]
        facts = [f"Done: {'yes' if task.get('done') else 'no'}" + _when(task.get("done_at"), " ({})")]
        facts += [f"Due: {_when(task.get('due_date'))}"] if _time(task.get("due_date")) else []
        facts += [f"Labels: {', '.join(labels)}"] if labels else []
        facts += [f"Assignees: {', '.join(assignees)}"] if assignees else []
        body = _html_text(task.get("description"))
        text = "\n".join([title, *facts]) + (f"\n\n{body.text}" if body and body.text else "")
        author = _name(task.get("created_by"))
        parts = [
            Part(anchor=_anchored("task", p.anchor), text=p.text, speaker=author, thread=thread, title=title)
            for p in split(text, markdown=bool(body and body.markdown), max_chars=self.part_chars, title=title)
        ]
        for comment in comments:
            said = _html_text(comment.get("comment"))
            if said is None or not said.text.strip():
                continue
            speaker, when = _name(comment.get("author")), _time(comment.get("created"))
            anchor = f"comment-{comment.get('id')}"
            parts += [
                Part(anchor=anchor + p.anchor, text=p.text, valid_at=when, speaker=speaker, thread=thread, title=title)
                for p in split(said.text, markdown=False, max_chars=self.part_chars)
            ]
        metadata = {
            "project_id": task.get("project_id"),
            "identifier": task.get("identifier") or None,
            "done": bool(task.get("done")),
            "labels": labels,
            "assignees": assignees,
        }
        return Document(ref, title, tuple(parts), _time(task.get("updated")), metadata)

    # --- requests --------------------------------------------------------------------------------
    def _pages(self, what: str, path: str, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Every row of a paged list, each id once (a server that ignores ``page`` repeats itself)."""
        seen: set[Any] = set()
        page = 1
        while True:
            response = self._get(what, path, {**params, "page": page, "per_page": PER_PAGE})
            rows = _json_of(what, response, list)
            fresh = [r for r in rows if isinstance(r, dict) and r.get("id") not in seen]
            seen.update(r.get("id") for r in fresh)
            yield from fresh
            total = response.headers.get("x-pagination-total-pages", "")
            if not fresh or (total.isdigit() and page >= int(total)):
                return
            page += 1

    def _get(self, what: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """The response to ``GET path``, its failures as SourceError, retried as they allow."""
        import httpx

        def attempt() -> httpx.Response:
            try:
                response = self.client.get(path, params=params)
            except httpx.HTTPError as exc:  # refused, reset, timed out: no answer at all
                raise SourceError(f"{what}: Vikunja did not answer ({exc or type(exc).__name__})") from exc
            if response.status_code >= 400:
                raise self._error(what, response)
            return response

        return self.retry.call(what, attempt)

    def _error(self, what: str, response: Any) -> SourceError:
        status: int = response.status_code
        body = _loads(response)
        detail = str(body.get("message") or "") if isinstance(body, dict) else ""
        detail = detail or response.reason_phrase or str(status)
        if status == 401:
            return SourceAuthError(
                f"{what}: the token in ${self.token_env} was refused ({detail})",
                hint=TOKEN_HINT.format(env=self.token_env),
            )
        if status == 403:
            return SourceAuthError(
                f"{what}: the token in ${self.token_env} lacks permission ({detail})",
                hint=TOKEN_HINT.format(env=self.token_env),
            )
        wait = retry_after(response.headers.get("retry-after"))
        return SourceError(f"{what}: Vikunja answered {status} ({detail})", status_code=status, retry_after=wait)

    def close(self) -> None:
        self.client.close()


def _loads(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _json_of(what: str, response: Any, kind: type = dict) -> Any:
    """The answer's JSON, of ``kind`` (a list: Go's ``null`` for an empty one reads as ``[]``)."""
    body = _loads(response)
    if body is None and kind is list:
        return []
    if not isinstance(body, kind):
        raise SourceError(f"{what}: Vikunja answered something other than a JSON {kind.__name__}", status_code=502)
    return body


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _project_version(project: Mapping[str, Any]) -> str:
    shown = [project.get(k) for k in ("title", "description", "identifier", "parent_project_id")]
    return f"{project.get('updated') or ''}#{_digest([shown, _name(project.get('owner'))])}"


def _task_version(task: Mapping[str, Any], comments: list[dict[str, Any]]) -> str:
    """``updated``, and a digest of what fetch shows that ``updated`` does not follow."""
    fields = ("title", "description", "done", "done_at", "due_date", "project_id", "identifier")
    shown = [task.get(k) for k in fields]
    labels = sorted((label.get("id"), label.get("title")) for label in task.get("labels") or [])
    people = sorted((a.get("id"), _name(a)) for a in task.get("assignees") or [])
    said = sorted((c.get("id"), c.get("updated")) for c in comments)
    return f"{task.get('updated') or ''}#{_digest([shown, labels, people, said, _name(task.get('created_by'))])}"


def _anchored(prefix: str, anchor: str) -> str:
    """A split part's anchor under ``prefix``: ``task``, ``task~2``, ``task/Steps`` ..."""
    if not anchor or anchor.startswith(("~", "#")):
        return prefix + anchor
    return f"{prefix}/{anchor}"


def _html_text(value: Any) -> Converted | None:
    """A description's or comment's text: HTML since Vikunja 0.22, Markdown before (no tags)."""
    if not value or not str(value).strip():
        return None
    text = str(value)
    try:
        return to_text(text.encode(), "x.html" if _TAG.search(text) else "x.md")
    except InputError:  # over the size limit: shown as nothing rather than failing the sync
        return None


def _name(user: Any) -> str | None:
    if not isinstance(user, Mapping):
        return None
    return str(user.get("name") or user.get("username") or "") or None


def _time(value: Any) -> datetime | None:
    """A Vikunja time; its zero time (``0001-01-01T00:00:00Z``) means none."""
    if not value or str(value).startswith("0001-01-01"):
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _when(value: Any, form: str = "{}") -> str:
    moment = _time(value)
    return form.format(moment.isoformat(timespec="minutes")) if moment else ""
