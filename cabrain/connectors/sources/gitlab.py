"""A GitLab project as a source: its issues, merge requests and wiki pages, read with python-gitlab.

    {"url": "https://gitlab.example.com", "project": "team/app", "token_env": "GITLAB_TOKEN",
     "include": ["issues", "merge_requests", "wiki"], "ssl_verify": true}

Each issue and merge request is one item (``issues/12``, ``merge_requests/3``) whose version is its
``updated_at``, which GitLab moves when the description changes and when a comment is added or
edited. It reads as its description (with its state, labels and assignees, and a merge request's
branches) and one part per comment, in one thread; system notes ("changed the milestone") are left
out. Each wiki page is one item (``wiki/<slug>``) whose version is a hash of its title, format and
content (the listing carries the content, so a scan stays one paged call per kind), split into its
sections. A feature the project has turned off (its wiki, say) is skipped, not an error.

python-gitlab's own retries are off (``retry_transient_errors``, ``obey_rate_limit`` and
``max_retries`` on every call): each request, each page of a listing included, goes through
:meth:`~cabrain.connectors.retry.Retry.call`, the one retry layer, with the ``Retry-After`` a 429 or a
503 asked for. The token travels as ``PRIVATE-TOKEN`` (a personal, project or group access token
with the ``read_api`` scope). python-gitlab is imported when a source is built, not with CaBrain.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from urllib.parse import quote

from cabrain.connectors.base import Document, ItemRef, Part, SourceSpec
from cabrain.connectors.config import checked
from cabrain.connectors.retry import Retry, retry_after
from cabrain.connectors.split import split
from cabrain.errors import InputError, SourceAuthError, SourceError

if TYPE_CHECKING:
    import requests
    from gitlab.base import RESTObject
    from gitlab.v4.objects import Project

__all__ = ["INCLUDE", "KIND", "LOCAL", "GitLabSource", "UnreadableAnswer", "build", "configure"]

KIND = "gitlab"
LOCAL = False
INCLUDE = ("issues", "merge_requests", "wiki")
PER_PAGE = 100
TIMEOUT_S = 60.0
# Every call: python-gitlab neither sleeps on a 429 nor retries a 5xx or a lost connection itself.
ONCE: dict[str, Any] = {"obey_rate_limit": False, "max_retries": 0, "retry_transient_errors": False}
THREADS = {"issues": ("issue", "#"), "merge_requests": ("merge request", "!")}

T = TypeVar("T")
log = logging.getLogger("cabrain.connectors")


def _check(config: dict[str, Any]) -> None:
    include = config["include"]
    if not include or any(kind not in INCLUDE for kind in include):
        raise InputError(f"gitlab connector: include must list some of {', '.join(INCLUDE)}, got {include!r}")
    config["include"] = [kind for kind in INCLUDE if kind in include]
    project = config["project"]
    if isinstance(project, str):
        project = project.strip().strip("/")
        if project.isdigit():
            project = int(project)
        elif "/" not in project or "://" in project or any(c.isspace() for c in project):
            raise InputError(
                f"gitlab connector: project must be a numeric id or a path like group/name, got {config['project']!r}"
            )
    if isinstance(project, int) and project <= 0:
        raise InputError(f"gitlab connector: project must be a positive id, got {project!r}")
    config["project"] = project


configure = checked(
    KIND,
    required={"url": str, "project": (str, int)},
    optional={"token_env": (str, None), "include": (list, list(INCLUDE)), "ssl_verify": (bool, True)},
    check=_check,
)


def build(spec: SourceSpec, retry: Retry) -> GitLabSource:
    """The source for ``spec`` (its config checked again; the token is ``spec.secret``)."""
    return GitLabSource(configure(spec.config), spec.secret, retry, part_chars=spec.part_chars)


class GitLabSource:
    """One GitLab project, read through python-gitlab over one HTTP session."""

    kind: ClassVar[str] = KIND

    def __init__(self, config: Mapping[str, Any], token: str | None, retry: Retry, *, part_chars: int = 2000) -> None:
        import gitlab
        import requests

        self._url: str = config["url"]
        self._ident: str | int = config["project"]
        self._token_env: str | None = config.get("token_env")
        self._include: list[str] = list(config["include"])
        self._retry = retry
        self._part_chars = part_chars
        self._errors = (gitlab.exceptions.GitlabError, requests.RequestException)
        self._auth_error = gitlab.exceptions.GitlabAuthenticationError
        self._parse_error = gitlab.exceptions.GitlabParsingError
        self._ssl_error = requests.exceptions.SSLError
        self._headers: Mapping[str, str] = {}
        session = requests.Session()
        session.hooks["response"].append(self._answered)  # a failure's Retry-After: python-gitlab drops headers
        self._gl = gitlab.Gitlab(
            self._url,
            private_token=token or None,
            ssl_verify=bool(config.get("ssl_verify", True)),
            timeout=TIMEOUT_S,
            retry_transient_errors=False,
            keep_base_url=True,  # pagination links follow the URL configured, not GitLab's external_url
            session=session,
        )
        self._project: Project | None = None

    # --- listing --------------------------------------------------------------------------------------
    def scan(self) -> Iterator[ItemRef]:
        project = self._load_project()
        seen: set[str] = set()
        for kind in self._include:
            if not _enabled(project.attributes, kind):
                log.info("gitlab feature off", extra={"project": self._name, "feature": kind})
                continue
            for ref in self._refs(project, kind):
                if ref.key not in seen:  # offset pages shift when an item is added or deleted meanwhile
                    seen.add(ref.key)
                    yield ref

    def _refs(self, project: Project, kind: str) -> Iterator[ItemRef]:
        if kind == "wiki":
            pages = self._pages(
                f"list the wiki pages of {self._name}",
                lambda: project.wikis.list(iterator=True, with_content=1, per_page=PER_PAGE, **ONCE),
            )
            for page in pages:
                yield self._wiki_ref(project, page.attributes)
            return
        manager = project.issues if kind == "issues" else project.mergerequests
        items = self._pages(
            f"list the {THREADS[kind][0]}s of {self._name}",
            lambda: manager.list(
                iterator=True, state="all", order_by="created_at", sort="asc", per_page=PER_PAGE, **ONCE
            ),
        )
        for item in items:
            attrs = item.attributes
            yield ItemRef(f"{kind}/{attrs['iid']}", str(attrs["updated_at"]), str(attrs["web_url"]), hint=_slim(attrs))

    # --- reading --------------------------------------------------------------------------------------
    def fetch(self, ref: ItemRef) -> Document:
        project = self._project or self._load_project()
        kind, _, ident = ref.key.partition("/")
        if kind in THREADS and ident.isdigit():
            return self._thread(project, kind, int(ident), ref)
        if kind == "wiki" and ident:
            return self._wiki(project, ident)
        raise SourceError(
            f"{ref.key!r} is not a GitLab item (issues/<iid>, merge_requests/<iid> or wiki/<slug>)", status_code=404
        )

    def _thread(self, project: Project, kind: str, iid: int, ref: ItemRef) -> Document:
        """An issue or merge request: its description, then each comment, one thread."""
        noun, mark = THREADS[kind]
        manager = project.issues if kind == "issues" else project.mergerequests
        gone = f"{noun} {mark}{iid} is gone from {self._name} at {self._url}"
        attrs = ref.hint
        if attrs.get("iid") != iid:  # a ref the sync made from its key, not from this scan: read the item
            got = self._call(f"read {noun} {mark}{iid}", lambda: manager.get(iid, **ONCE), missing=gone)
            attrs = _slim(got.attributes)
            ref = ItemRef(ref.key, str(attrs["updated_at"]), str(attrs["web_url"]))
        item = manager.get(iid, lazy=True)  # no request: only the notes' path
        notes = self._pages(
            f"list the comments on {noun} {mark}{iid}",
            lambda: item.notes.list(iterator=True, order_by="created_at", sort="asc", per_page=PER_PAGE, **ONCE),
            missing=gone,
        )
        thread = f"issue #{iid}" if kind == "issues" else f"!{iid}"
        parts = [
            Part(
                anchor="description",
                text=_description(attrs),
                valid_at=_time(attrs.get("created_at")),
                speaker=attrs.get("author"),
                thread=thread,
            )
        ]
        for note in notes:
            body = str(note.attributes.get("body") or "")
            if note.attributes.get("system") or not body.strip():
                continue
            parts.append(
                Part(
                    anchor=f"note-{note.attributes['id']}",
                    text=body,
                    valid_at=_latest(note.attributes.get("created_at"), note.attributes.get("updated_at")),
                    speaker=_person(note.attributes.get("author")),
                    thread=thread,
                )
            )
        return Document(
            ref=ref,
            title=f"{mark}{iid} {attrs.get('title') or ''}".strip(),
            parts=tuple(parts),
            valid_at=_time(attrs.get("updated_at")),
            metadata={
                "state": attrs.get("state"),
                "labels": attrs.get("labels", []),
                "iid": iid,
                "project": self._name,
            },
        )

    def _wiki(self, project: Project, slug: str) -> Document:
        """A wiki page, split into its sections (Markdown by its headings, other formats as plain text)."""
        gone = f"wiki page {slug!r} is gone from {self._name} at {self._url}"
        page = self._call(f"read wiki page {slug!r}", lambda: project.wikis.get(slug, **ONCE), missing=gone)
        attrs = page.attributes
        title = str(attrs.get("title") or slug)
        markup = str(attrs.get("format") or "markdown")
        parts = split(
            str(attrs.get("content") or ""), markdown=markup == "markdown", max_chars=self._part_chars, title=title
        )
        return Document(
            ref=self._wiki_ref(project, attrs),
            title=title,
            parts=tuple(parts),
            metadata={"project": self._name, "slug": slug, "format": markup},
        )

    def _wiki_ref(self, project: Project, attrs: Mapping[str, Any]) -> ItemRef:
        slug = str(attrs["slug"])
        content = f"{attrs.get('format') or 'markdown'}\n{attrs.get('title') or ''}\n{attrs.get('content') or ''}"
        version = hashlib.sha256(content.encode()).hexdigest()
        return ItemRef(f"wiki/{slug}", version, f"{project.web_url}/-/wikis/{quote(slug, safe='/')}")

    def close(self) -> None:
        self._gl.session.close()

    # --- requests -------------------------------------------------------------------------------------
    @property
    def _name(self) -> str:
        """The project as people name it (its path), once read; the configured id or path before."""
        if self._project is not None:
            return str(self._project.attributes.get("path_with_namespace") or self._ident)
        return str(self._ident)

    def _load_project(self) -> Project:
        self._project = self._call(
            f"read project {self._ident}",
            lambda: self._gl.projects.get(self._ident, **ONCE),
            missing=f"no project {self._ident!r} at {self._url}",
            hint="check the project's numeric id or its path (group/name); GitLab answers 404 too for a "
            "private project the token's user cannot see",
        )
        return self._project

    def _pages(
        self, what: str, start: Callable[[], Iterator[RESTObject]], *, missing: str | None = None
    ) -> Iterator[RESTObject]:
        """Every object of a listing. Its first page comes with ``start``; each next one is fetched
        (and retried alone) when the one before is used up."""
        listing = self._call(what, start, missing=missing)
        while True:
            item = self._call(what, lambda: next(listing, None), missing=missing)
            if item is None:
                return
            yield item

    def _call(self, what: str, fn: Callable[[], T], *, missing: str | None = None, hint: str | None = None) -> T:
        """``fn()`` (one request to GitLab), its failures as SourceError, retried by the Retry;
        ``missing`` (and ``hint``) say what a 404 means."""

        def once() -> T:
            self._headers = {}
            try:
                return fn()
            except self._errors as exc:
                raise self._error(what, exc, missing, hint) from exc

        return self._retry.call(what, once)

    def _answered(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._headers = response.headers

    def _error(self, what: str, exc: Exception, missing: str | None, hint: str | None) -> SourceError:
        """The SourceError for a failed request: auth errors stop the sync, 429/5xx/no answer are retried."""
        where = f"GitLab at {self._url}"
        code: int | None = getattr(exc, "response_code", None)
        if isinstance(exc, self._auth_error) or code == 401:
            if not self._token_env:
                return SourceAuthError(
                    f"{where} refused to {what} without a token (401)",
                    hint="set token_env to the name of a variable holding an access token with the read_api scope",
                )
            return SourceAuthError(
                f"{where} refused the token to {what} (401): check the token in ${self._token_env}",
                hint=f"${self._token_env} may be mistyped, expired or revoked; it needs the read_api scope",
            )
        if code == 403:
            token = f"the token in ${self._token_env}" if self._token_env else "the token"
            return SourceAuthError(
                f"{where} forbids {what} (403): {token} lacks the read_api scope or access to {self._name}",
                hint=f"give {token} the read_api scope, and its user at least the Reporter role in {self._name}",
            )
        if code == 404:
            return SourceError(missing or f"{what}: {where} answered 404 (not found)", status_code=404, hint=hint)
        if code is not None:
            message = str(getattr(exc, "error_message", "") or exc)[:200]
            return SourceError(
                f"{what}: {where} answered {code} ({message})",
                status_code=code,
                retry_after=retry_after(self._headers.get("Retry-After")),
            )
        if isinstance(exc, self._parse_error):
            return UnreadableAnswer(
                f"{what}: {where} answered something that is not GitLab's JSON",
                hint="check that url is the GitLab instance's address (without /api/v4), and any proxy before it",
            )
        tls = isinstance(exc, self._ssl_error)
        return SourceError(
            f"{what}: could not reach {where} ({type(exc).__name__}: {exc})",
            hint="a self-signed certificate needs its CA installed, or ssl_verify false"
            if tls
            else "check the url, and that the instance is up and reachable from here",
        )


class UnreadableAnswer(SourceError):
    """GitLab (or a proxy before it) answered a request with something other than its JSON (a
    maintenance page with status 200). Not retried: python-gitlab's listing has moved past the page
    by then, so a retry would skip it, and the items on it would read as deleted."""

    @property
    def transient(self) -> bool:
        return False


def _enabled(attrs: Mapping[str, Any], kind: str) -> bool:
    """Whether the project has ``kind`` (issues, merge_requests, wiki) turned on."""
    level = attrs.get(f"{kind}_access_level")
    if level is not None:
        return bool(level != "disabled")
    return attrs.get(f"{kind}_enabled", True) is not False


def _slim(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """What a fetch needs of an issue or merge request as its listing gave it (kept as the ref's hint,
    so the fetch reads only the comments; the whole listing's objects would weigh on a large scan)."""
    out = {
        "iid": attrs.get("iid"),
        "title": attrs.get("title") or "",
        "description": attrs.get("description") or "",
        "state": attrs.get("state"),
        "labels": [label if isinstance(label, str) else label.get("name") for label in attrs.get("labels") or []],
        "assignees": [_person(a) for a in attrs.get("assignees") or []],
        "author": _person(attrs.get("author")),
        "created_at": attrs.get("created_at"),
        "updated_at": attrs.get("updated_at"),
        "web_url": attrs.get("web_url"),
    }
    if "source_branch" in attrs:
        out["branches"] = (attrs.get("source_branch"), attrs.get("target_branch"))
        out["reviewers"] = [_person(r) for r in attrs.get("reviewers") or []]
    return out


def _description(attrs: Mapping[str, Any]) -> str:
    """The title, the description, and a line of facts (state, labels, assignees, branches)."""
    facts = [f"state: {attrs.get('state')}"]
    if attrs.get("labels"):
        facts.append("labels: " + ", ".join(attrs["labels"]))
    if any(attrs.get("assignees") or ()):
        facts.append("assignees: " + ", ".join(a for a in attrs["assignees"] if a))
    if "branches" in attrs:
        source, target = attrs["branches"]
        facts.append(f"merges {source} -> {target}")
        if any(attrs.get("reviewers") or ()):
            facts.append("reviewers: " + ", ".join(r for r in attrs["reviewers"] if r))
    return "\n\n".join(
        p for p in (attrs.get("title"), str(attrs.get("description") or "").strip(), "; ".join(facts)) if p
    )


def _person(user: Any) -> str | None:
    if not isinstance(user, Mapping):
        return None
    return user.get("name") or user.get("username") or None


def _time(value: Any) -> datetime | None:
    """GitLab's ISO 8601 times (``2024-05-01T10:00:00.000Z``), as aware datetimes."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _latest(*values: Any) -> datetime | None:
    times = [t for t in map(_time, values) if t is not None]
    return max(times) if times else None
