"""Issue trackers: file an issue in a team's tracker, and find the merge requests linked to it.

The live agent files an issue for a chat thread, and later tells the thread when the issue got a
merge request. A tracker reuses a connector's config (the dict a ``gitlab`` or ``vikunja``
connector has, checked by that kind's ``configure``), and the token from the variable it names::

    filing = tracker("gitlab", {"url": "https://gitlab.example.com", "project": "team/app",
                                "token_env": "GITLAB_TOKEN"}, token, Retry())
    issue = filing.file("Login loops on Safari", "Seen by two users ...", labels=["bug"], key="thread-42")
    ...
    filing.links(issue.ref)   # [Link("merge_request", "7", ".../-/merge_requests/7", "Fix ...", "opened")]

Writing needs more than reading: a GitLab token needs the ``api`` scope (``read_api`` only reads),
a Vikunja API token permission to create tasks. A refusal (401 / 403) is a
:class:`~cabrain.errors.SourceAuthError` whose hint names the token's variable and what it lacks;
any other failure a :class:`~cabrain.errors.SourceError`, every request through
:meth:`~cabrain.connectors.retry.Retry.call`.

**Filing at most once.** Creating is not idempotent: a create whose answer was lost (a dropped
connection, a proxy's 502) may have filed the issue. With a ``key`` (a word such as ``thread-42``)
the description ends with the marker ``<!-- cabrain:<key> -->`` (an HTML comment: not shown), and
before each try the project is searched for it; an issue already carrying it is returned instead of
a second one, so a retried create, and a second ``file`` with the same key, files one issue. Without
a key, only a failure that certainly filed nothing is retried (a 429, a connection never made);
another raises :class:`FilingUnconfirmed`, not retried.

- **GitLab** (python-gitlab, :class:`~cabrain.connectors.gitlab_client.GitLabClient`, as the
  source): an issue in the configured project (its description Markdown). The marker is looked for
  with ``search`` in the descriptions (``in=description``: GitLab's substring search, not its
  full-text one), then checked in each description found. :meth:`GitLabTracker.links` lists the
  issue's related merge requests (``/issues/:iid/related_merge_requests``: those that mention it)
  and those that close it when merged (``/issues/:iid/closed_by``), each once.
- **Vikunja** (httpx, as the source): a task in one project, created with ``PUT
  /api/v1/projects/{id}/tasks`` (Vikunja's verb for create). The connector's config names the
  projects it reads (``projects``); a tracker needs one: ``project`` in the config, else the one
  ``projects`` lists. The description is sent as HTML (the text escaped, a paragraph per blank-line
  separated block), as Vikunja's editor stores it. The marker is looked for with ``s`` over every
  task the token sees (``GET /tasks``; ``/tasks/all`` before 0.24). Labels are not set: Vikunja
  attaches labels by id in further requests, and a tracker does not create labels in a team's
  instance. :meth:`VikunjaTracker.links` is always empty: Vikunja has no merge requests.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cabrain.connectors.gitlab_client import ONCE, PER_PAGE, GitLabClient
from cabrain.connectors.retry import Retry, retry_after
from cabrain.connectors.sources import configure
from cabrain.egress import Egress
from cabrain.errors import InputError, SourceAuthError, SourceError

if TYPE_CHECKING:
    import httpx
    from gitlab.v4.objects import Project

__all__ = [
    "TRACKERS",
    "FiledIssue",
    "FilingUnconfirmed",
    "GitLabTracker",
    "Link",
    "Tracker",
    "VikunjaTracker",
    "tracker",
]

TITLE_CHARS = 255
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+=#-]{0,127}")
VIKUNJA_TASK_ROUTES = ("/tasks", "/tasks/all")  # current releases; older ones (0.22 to 0.24)
VIKUNJA_TOKEN_HINT = (
    "create an API token in Vikunja (Settings › API Tokens) allowed to create tasks and to read all "
    "tasks, for a user who may write in project {project}, and put it in ${env}"
)

log = logging.getLogger("cabrain.connectors")


@dataclass(frozen=True)
class FiledIssue:
    """An issue as filed: ``ref`` is what :meth:`Tracker.links` takes (a GitLab iid, a Vikunja task id)."""

    kind: str  # "gitlab" | "vikunja"
    project: str  # the project's path or id, as configured
    ref: str
    url: str  # where a person opens it
    title: str


@dataclass(frozen=True)
class Link:
    """A merge request linked to an issue."""

    kind: str  # "merge_request"
    ref: str  # its iid
    url: str  # its web_url
    title: str
    state: str  # opened / merged / closed (/ locked)


class Tracker(Protocol):
    """A team's issue tracker, as one project in it."""

    kind: str

    def file(self, title: str, description: str, *, labels: Sequence[str] = (), key: str | None = None) -> FiledIssue:
        """The issue, filed (the title on one line, at most 255 characters). With ``key``, the issue
        already filed with that key if there is one: see the module's "Filing at most once"."""
        ...

    def links(self, ref: str) -> list[Link]:
        """The merge requests linked to issue ``ref``, each once, by iid."""
        ...

    def close(self) -> None:
        """Release the HTTP client."""
        ...


class FilingUnconfirmed(SourceError):
    """A create without a key failed in a way that does not tell whether the issue was filed (no
    answer, a 5xx): not retried, lest it be filed twice."""

    @property
    def transient(self) -> bool:
        return False


# --- GitLab ---------------------------------------------------------------------------------------------
class GitLabTracker:
    """Issues in one GitLab project, filed and followed through python-gitlab (the ``api`` scope)."""

    kind = "gitlab"

    def __init__(
        self, config: Mapping[str, Any], token: str | None, retry: Retry, *, egress: Egress | None = None
    ) -> None:
        self._api = GitLabClient(config, token, retry, scope="api", egress=egress)
        self._project: Project = self._api.gl.projects.get(self._api.ident, lazy=True)  # no request
        self._missing = f"no project {self._api.ident!r} at {self._api.url}"

    def file(self, title: str, description: str, *, labels: Sequence[str] = (), key: str | None = None) -> FiledIssue:
        title = _title(title)
        marker = _marker(key)
        data = {"title": title, "description": _with_marker(description, marker), "labels": ",".join(_labels(labels))}
        what = f"file an issue in {self._api.name}"

        def create() -> FiledIssue:
            made = self._api.once(what, lambda: self._project.issues.create(data, **ONCE), missing=self._missing)
            return self._filed(made.attributes)

        find = (lambda: self._find(marker)) if marker else None
        return _file(
            self._api.retry, what, create=create, find=find, unsent=_gitlab_unsent, where=f"{self._api.name}'s issues"
        )

    def _find(self, marker: str) -> FiledIssue | None:
        """The earliest issue whose description carries ``marker``, if any (one request, not retried)."""
        query: dict[str, Any] = {
            "search": marker.removeprefix("<!-- ").removesuffix(" -->"),
            "in": "description",  # GitLab's substring search (not its full-text one), in descriptions
            "state": "all",
            "order_by": "created_at",
            "sort": "asc",
            "per_page": PER_PAGE,
            "get_all": False,
        }
        found = self._api.once(
            f"look for an issue already filed in {self._api.name}",
            lambda: self._project.issues.list(iterator=False, **query, **ONCE),
            missing=self._missing,
        )
        for item in found:
            if marker in str(item.attributes.get("description") or ""):
                log.info("tracker issue already filed", extra={"kind": self.kind, "iid": item.attributes["iid"]})
                return self._filed(item.attributes)
        return None

    def _filed(self, attrs: Mapping[str, Any]) -> FiledIssue:
        return FiledIssue(self.kind, str(self._api.ident), str(attrs["iid"]), str(attrs["web_url"]), attrs["title"])

    def links(self, ref: str) -> list[Link]:
        if not ref.strip().isdigit():
            raise InputError(f"gitlab tracker: an issue's ref is its iid (a number), got {ref!r}")
        iid = int(ref)
        issue = self._project.issues.get(iid, lazy=True)  # no request: only the path
        gone = f"no issue #{iid} in {self._api.name} at {self._api.url}"
        related = self._api.pages(
            f"list the merge requests related to issue #{iid}",
            lambda: iter(issue.related_merge_requests(iterator=True, per_page=PER_PAGE, **ONCE)),
            missing=gone,
        )
        closing = self._api.pages(
            f"list the merge requests that close issue #{iid}",
            lambda: iter(issue.closed_by(iterator=True, per_page=PER_PAGE, **ONCE)),
            missing=gone,
        )
        found: dict[Any, Link] = {}
        for merge in [*related, *closing]:
            # by id: a merge request of another project (a fork) may share an iid with one of this one
            found.setdefault(
                merge.get("id") or merge["web_url"],
                Link(
                    "merge_request",
                    str(merge["iid"]),
                    str(merge["web_url"]),
                    str(merge.get("title") or ""),
                    str(merge.get("state") or ""),
                ),
            )
        return sorted(found.values(), key=lambda link: (int(link.ref), link.url))

    def close(self) -> None:
        self._api.close()


def _gitlab_unsent(error: SourceError) -> bool:
    """Whether a failed request certainly never reached GitLab: a 429, or no connection made."""
    if error.status_code == 429:
        return True
    import requests
    import urllib3

    cause = error.__cause__
    if isinstance(cause, requests.exceptions.ConnectTimeout):
        return True
    if isinstance(cause, requests.exceptions.ConnectionError) and cause.args:
        inner = cause.args[0]
        return isinstance(getattr(inner, "reason", inner), urllib3.exceptions.NewConnectionError)
    return False


# --- Vikunja --------------------------------------------------------------------------------------------
class VikunjaTracker:
    """Tasks in one Vikunja project, created over its REST API with httpx."""

    kind = "vikunja"

    def __init__(
        self,
        config: Mapping[str, Any],
        token: str,
        retry: Retry,
        *,
        project: int,
        timeout_s: float = 30.0,
        egress: Egress | None = None,
    ) -> None:
        self.url: str = config["url"]
        self.token_env: str = config["token_env"]
        self.project = project
        self.retry = retry
        self.client = (egress or Egress()).client(
            base_url=f"{self.url}/api/v1",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout_s,
        )
        self._route: str | None = None  # the collection of every task this server answers

    def file(self, title: str, description: str, *, labels: Sequence[str] = (), key: str | None = None) -> FiledIssue:
        title = _title(title)
        marker = _marker(key)
        if labels:
            log.info("vikunja tracker sets no labels", extra={"labels": list(labels)})
        body = {"title": title, "description": _html(description) + (f"\n{marker}" if marker else "")}
        what = f"create a task in project {self.project}"

        def create() -> FiledIssue:
            response = self._once(what, "PUT", f"/projects/{self.project}/tasks", body=body)
            return self._filed(_json(what, response))

        find = (lambda: self._find(marker)) if marker else None
        return _file(
            self.retry, what, create=create, find=find, unsent=_vikunja_unsent, where=f"project {self.project}'s tasks"
        )

    def _find(self, marker: str) -> FiledIssue | None:
        what = f"look for a task already created in project {self.project}"
        params = {"s": marker.removeprefix("<!-- ").removesuffix(" -->"), "page": 1, "per_page": 50}
        params |= {"sort_by": "id", "order_by": "asc"}
        rows = None
        for route in [self._route] if self._route else VIKUNJA_TASK_ROUTES:
            try:
                rows = _json(what, self._once(what, "GET", route, params=params), list)
            except SourceError as exc:
                if isinstance(exc, SourceAuthError) or exc.status_code not in (404, 405):
                    raise
                continue  # no such route here: the older one
            self._route = route
            break
        if rows is None:
            raise SourceError(
                f"{what}: Vikunja at {self.url} answers neither /api/v1/tasks nor /api/v1/tasks/all",
                hint="check that url is the Vikunja instance's address (its API is under /api/v1)",
                status_code=404,
            )
        for task in rows:
            if task.get("project_id") == self.project and marker in str(task.get("description") or ""):
                log.info("tracker issue already filed", extra={"kind": self.kind, "task": task.get("id")})
                return self._filed(task)
        return None

    def _filed(self, task: Mapping[str, Any]) -> FiledIssue:
        ident = task["id"]
        return FiledIssue(self.kind, str(self.project), str(ident), f"{self.url}/tasks/{ident}", str(task["title"]))

    def links(self, ref: str) -> list[Link]:
        """Always none: Vikunja has no merge requests (a task's ``related_tasks`` relate tasks only)."""
        return []

    def _once(
        self, what: str, method: str, path: str, *, params: Mapping[str, Any] | None = None, body: Any = None
    ) -> httpx.Response:
        """One request, its failure as SourceError (retried by the caller's Retry)."""
        import httpx

        try:
            response = self.client.request(method, path, params=params, json=body)
        except httpx.HTTPError as exc:  # refused, reset, timed out: no answer at all
            raise SourceError(f"{what}: Vikunja at {self.url} did not answer ({exc or type(exc).__name__})") from exc
        if response.status_code >= 400:
            raise self._error(what, response)
        return response

    def _error(self, what: str, response: httpx.Response) -> SourceError:
        status = response.status_code
        try:
            answer = response.json()
        except ValueError:
            answer = None
        detail = str(answer.get("message") or "") if isinstance(answer, dict) else ""
        detail = detail or response.reason_phrase or str(status)
        if status in (401, 403):
            refused = "was refused" if status == 401 else "lacks permission"
            return SourceAuthError(
                f"{what}: the token in ${self.token_env} {refused} ({detail})",
                hint=VIKUNJA_TOKEN_HINT.format(env=self.token_env, project=self.project),
            )
        if status == 404 and "/projects/" in str(response.request.url):
            return SourceError(
                f"{what}: Vikunja at {self.url} has no project {self.project} the token sees ({detail})",
                hint="a project's id is the number in its address: https://vikunja.example.com/projects/<id>",
                status_code=404,
            )
        wait = retry_after(response.headers.get("retry-after"))
        return SourceError(f"{what}: Vikunja answered {status} ({detail})", status_code=status, retry_after=wait)

    def close(self) -> None:
        self.client.close()


def _vikunja_unsent(error: SourceError) -> bool:
    """Whether a failed request certainly never reached Vikunja: a 429, or no connection made."""
    import httpx

    return error.status_code == 429 or isinstance(error.__cause__, httpx.ConnectError | httpx.ConnectTimeout)


def _json(what: str, response: httpx.Response, kind: type = dict) -> Any:
    """The answer's JSON, of ``kind`` (Go's ``null`` for an empty list reads as ``[]``)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if body is None and kind is list:
        return []
    if not isinstance(body, kind):
        raise SourceError(f"{what}: Vikunja answered something other than a JSON {kind.__name__}", status_code=502)
    return body


# --- choosing -------------------------------------------------------------------------------------------
def _gitlab(config: Mapping[str, Any], token: str | None, retry: Retry, egress: Egress) -> Tracker:
    return GitLabTracker(configure("gitlab", config), token, retry, egress=egress)


def _vikunja(config: Mapping[str, Any], token: str | None, retry: Retry, egress: Egress) -> Tracker:
    checked = configure("vikunja", {k: v for k, v in config.items() if k != "project"})
    project = config.get("project")
    if project is None:
        listed = checked["projects"] or []
        if len(listed) != 1:
            raise InputError(
                f"vikunja tracker: name the project to file tasks in (project: <id>); the connector reads "
                f"{'every project' if not listed else 'projects ' + ', '.join(map(str, listed))}",
                hint="a project's id is the number in its address: https://vikunja.example.com/projects/<id>",
            )
        project = listed[0]
    if isinstance(project, str) and project.strip().isdigit():
        project = int(project)
    if isinstance(project, bool) or not isinstance(project, int) or project <= 0:
        raise InputError(f"vikunja tracker: project must be a project's id (a positive integer), got {project!r}")
    if not token:
        raise SourceAuthError(
            f"vikunja tracker: no API token in ${checked['token_env']}",
            hint=VIKUNJA_TOKEN_HINT.format(env=checked["token_env"], project=project),
        )
    return VikunjaTracker(checked, token, retry, project=project, egress=egress)


TRACKERS: dict[str, Callable[[Mapping[str, Any], str | None, Retry, Egress], Tracker]] = {
    "gitlab": _gitlab,
    "vikunja": _vikunja,
}


def tracker(
    kind: str, config: Mapping[str, Any], token: str | None, retry: Retry, *, egress: Egress | None = None
) -> Tracker:
    """The tracker for a connector of ``kind`` with ``config`` (checked as that kind checks it), the
    token read from the variable its ``token_env`` names, its requests through ``egress`` (None:
    public addresses only); InputError for a kind without one."""
    if kind not in TRACKERS:
        raise InputError(f"no issue tracker for connector kind {kind!r}; the trackers are: {', '.join(TRACKERS)}")
    if not isinstance(config, Mapping):
        raise InputError(f"a {kind} tracker's config must be a JSON object")
    return TRACKERS[kind](config, token, retry, egress or Egress())


# --- filing, shared -------------------------------------------------------------------------------------
def _file(
    retry: Retry,
    what: str,
    *,
    create: Callable[[], FiledIssue],
    find: Callable[[], FiledIssue | None] | None,
    unsent: Callable[[SourceError], bool],
    where: str,
) -> FiledIssue:
    """``create()``, filed at most once: with ``find`` (a key), each try first looks for the issue
    already filed; without, a failure that may have filed it is not retried."""

    def attempt() -> FiledIssue:
        if find is not None:
            found = find()
            if found is not None:
                return found
        try:
            return create()
        except SourceError as exc:
            if find is None and exc.transient and not unsent(exc):
                raise FilingUnconfirmed(
                    f"{exc.message}; the issue may have been filed all the same: look in {where} before "
                    "filing it again",
                    hint="give file() a key: a failed create is then looked for before it is retried",
                    status_code=exc.status_code,
                ) from exc
            raise

    return retry.call(what, attempt)


def _title(title: str) -> str:
    """The title on one line, at most :data:`TITLE_CHARS` characters (cut with an ellipsis)."""
    line = " ".join(str(title).split())
    if not line:
        raise InputError("an issue needs a title")
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def _marker(key: str | None) -> str | None:
    if key is None:
        return None
    if not _KEY.fullmatch(key):
        raise InputError(
            f"an issue's key must be 1 to 128 letters, digits and . _ : / @ + = # - (starting with a letter or "
            f"digit), got {key!r}"
        )
    return f"<!-- cabrain:{key} -->"


def _with_marker(description: str, marker: str | None) -> str:
    text = str(description or "").rstrip()
    if marker is None:
        return text
    return f"{text}\n\n{marker}" if text else marker


def _labels(labels: Sequence[str]) -> list[str]:
    if isinstance(labels, str):
        raise InputError("labels must be a list of label names, not one string")
    out = [str(label).strip() for label in labels if str(label).strip()]
    if any("," in label for label in out):
        raise InputError(f"a label's name cannot hold a comma (GitLab splits on them), got {out!r}")
    return list(dict.fromkeys(out))


def _html(text: str) -> str:
    """Plain text as Vikunja's editor stores a description: a paragraph per blank-line separated block."""
    blocks = [b.strip() for b in re.split(r"\n\s*\n", str(text or "")) if b.strip()]
    return "".join(f"<p>{html.escape(b).replace(chr(10), '<br>')}</p>" for b in blocks)
