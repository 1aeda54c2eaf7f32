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

Requests go through :class:`~cabrain.connectors.gitlab_client.GitLabClient` (python-gitlab's own
retries off, each request, each page of a listing included, through the one retry layer, failures
as SourceError), shared with the issue tracker (:mod:`cabrain.connectors.trackers`). The token
travels as ``PRIVATE-TOKEN`` (a personal, project or group access token with the ``read_api``
scope). python-gitlab is imported when a source is built, not with CaBrain.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from cabrain.connectors.base import Document, ItemRef, Part, SourceSpec
from cabrain.connectors.config import checked
from cabrain.connectors.gitlab_client import ONCE, PER_PAGE, GitLabClient, UnreadableAnswer
from cabrain.connectors.retry import Retry
from cabrain.connectors.split import split
from cabrain.egress import Egress
from cabrain.errors import InputError, SourceError

if TYPE_CHECKING:
    from gitlab.v4.objects import Project

__all__ = ["INCLUDE", "KIND", "LOCAL", "GitLabSource", "UnreadableAnswer", "build", "configure"]

KIND = "gitlab"
LOCAL = False
INCLUDE = ("issues", "merge_requests", "wiki")
THREADS = {"issues": ("issue", "#"), "merge_requests": ("merge request", "!")}

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
    return GitLabSource(configure(spec.config), spec.secret, retry, part_chars=spec.part_chars, egress=spec.egress)


class GitLabSource:
    """One GitLab project, read through python-gitlab over one HTTP session."""

    kind: ClassVar[str] = KIND

    def __init__(
        self,
        config: Mapping[str, Any],
        token: str | None,
        retry: Retry,
        *,
        part_chars: int = 2000,
        egress: Egress | None = None,
    ) -> None:
        self._api = GitLabClient(config, token, retry, scope="read_api", egress=egress)
        self._include: list[str] = list(config["include"])
        self._part_chars = part_chars

    # --- checking -------------------------------------------------------------------------------------
    def check(self) -> None:
        """The project, read with the token (one request): a refused token, a missing scope or a
        project the token's user cannot see fails here with what to fix."""
        self._api.load_project()

    # --- listing --------------------------------------------------------------------------------------
    def scan(self) -> Iterator[ItemRef]:
        project = self._api.load_project()
        seen: set[str] = set()
        for kind in self._include:
            if not _enabled(project.attributes, kind):
                log.info("gitlab feature off", extra={"project": self._api.name, "feature": kind})
                continue
            for ref in self._refs(project, kind):
                if ref.key not in seen:  # offset pages shift when an item is added or deleted meanwhile
                    seen.add(ref.key)
                    yield ref

    def _refs(self, project: Project, kind: str) -> Iterator[ItemRef]:
        if kind == "wiki":
            pages = self._api.pages(
                f"list the wiki pages of {self._api.name}",
                lambda: project.wikis.list(iterator=True, with_content=1, per_page=PER_PAGE, **ONCE),
            )
            for page in pages:
                yield self._wiki_ref(project, page.attributes)
            return
        manager = project.issues if kind == "issues" else project.mergerequests
        items = self._api.pages(
            f"list the {THREADS[kind][0]}s of {self._api.name}",
            lambda: manager.list(
                iterator=True, state="all", order_by="created_at", sort="asc", per_page=PER_PAGE, **ONCE
            ),
        )
        for item in items:
            attrs = item.attributes
            yield ItemRef(f"{kind}/{attrs['iid']}", str(attrs["updated_at"]), str(attrs["web_url"]), hint=_slim(attrs))

    # --- reading --------------------------------------------------------------------------------------
    def fetch(self, ref: ItemRef) -> Document:
        project = self._api.project or self._api.load_project()
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
        gone = f"{noun} {mark}{iid} is gone from {self._api.name} at {self._api.url}"
        attrs = ref.hint
        if attrs.get("iid") != iid:  # a ref the sync made from its key, not from this scan: read the item
            got = self._api.call(f"read {noun} {mark}{iid}", lambda: manager.get(iid, **ONCE), missing=gone)
            attrs = _slim(got.attributes)
            ref = ItemRef(ref.key, str(attrs["updated_at"]), str(attrs["web_url"]))
        item = manager.get(iid, lazy=True)  # no request: only the notes' path
        notes = self._api.pages(
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
                "project": self._api.name,
            },
        )

    def _wiki(self, project: Project, slug: str) -> Document:
        """A wiki page, split into its sections (Markdown by its headings, other formats as plain text)."""
        gone = f"wiki page {slug!r} is gone from {self._api.name} at {self._api.url}"
        page = self._api.call(f"read wiki page {slug!r}", lambda: project.wikis.get(slug, **ONCE), missing=gone)
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
            metadata={"project": self._api.name, "slug": slug, "format": markup},
        )

    def _wiki_ref(self, project: Project, attrs: Mapping[str, Any]) -> ItemRef:
        slug = str(attrs["slug"])
        content = f"{attrs.get('format') or 'markdown'}\n{attrs.get('title') or ''}\n{attrs.get('content') or ''}"
        version = hashlib.sha256(content.encode()).hexdigest()
        return ItemRef(f"wiki/{slug}", version, f"{project.web_url}/-/wikis/{quote(slug, safe='/')}")

    def close(self) -> None:
        self._api.close()


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
