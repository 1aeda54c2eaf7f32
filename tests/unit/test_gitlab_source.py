"""The gitlab connector kind against a GitLab stand-in (tests/fakes/gitlab_server.py) on loopback:
the real python-gitlab over real HTTP, the shared Retry with its sleeps recorded instead of slept."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cabrain.connectors.base import ItemRef
from cabrain.connectors.sources import configure
from cabrain.connectors.sources.gitlab import UnreadableAnswer
from cabrain.errors import InputError, SourceAuthError, SourceError
from tests.conftest import REPO, brings, free_port
from tests.standins import RunningStand, running

TOKEN = "t0k"
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
ANN = {"username": "ann", "name": "Ann Lee"}
BO = {"username": "bo", "name": "Bo Park"}
DEPLOY = (
    "# Deploy\n\nHow a release reaches production, step by step, for whoever is on call this week.\n\n"
    "## Build\n\n" + "The pipeline builds the image from the tagged commit and pushes it to the registry. " * 4 + "\n\n"
    "## Rollback\n\n" + "Revert the tag, redeploy the previous image and page the on-call engineer at once. " * 4 + "\n"
)


def at(hours: float) -> str:
    """GitLab's time format, ``hours`` after START."""
    return (START + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def issue(iid: int, **fields: Any) -> dict[str, Any]:
    base = {
        "iid": iid,
        "title": f"Issue {iid}",
        "description": f"What issue {iid} is about.",
        "created_at": at(iid),
        "updated_at": at(iid + 0.5),
        "author": ANN,
    }
    return base | fields


def project(issues: int | list[dict[str, Any]] = 3, **extra: Any) -> dict[str, Any]:
    """Project 7, team/app: ``issues`` issues (or these), two merge requests, two wiki pages."""
    return {
        "id": 7,
        "path_with_namespace": "team/app",
        "issues": issues if isinstance(issues, list) else [issue(i) for i in range(1, issues + 1)],
        "merge_requests": [
            issue(1, title="Fix the login redirect", source_branch="fix-login", target_branch="main", assignees=[BO]),
            issue(2, title="Bump the base image", state="merged"),
        ],
        "notes": {},
        "wiki": [
            {"slug": "home", "title": "Home", "content": "Welcome to the app's wiki.", "format": "markdown"},
            {"slug": "guides/deploy", "title": "Deploy", "content": DEPLOY, "format": "markdown"},
        ],
    } | extra


class Stand(RunningStand):
    """The stand-in, and how this kind's tests write its state."""

    def write(self, *projects: dict[str, Any], faults: list[dict[str, Any]] | None = None) -> None:
        self.state.write_text(json.dumps({"projects": list(projects), "faults": faults or []}))

    def edit(self, change: Any) -> None:
        """Apply ``change`` to the first project in the state file."""
        data = json.loads(self.state.read_text())
        change(data["projects"][0])
        self.state.write_text(json.dumps(data))


@pytest.fixture
@brings("subprocess")
def stand(tmp_path: Path) -> Iterator[Stand]:
    with running(
        Stand,
        "gitlab_server",
        tmp_path,
        {"projects": []},
        token=TOKEN,
        kind="gitlab",
        url_key="url",
        defaults={"project": "team/app", "token_env": "GITLAB_TOKEN"},
    ) as started:
        yield started


@pytest.fixture
def sleeps() -> list[float]:
    return []


# --- listing ------------------------------------------------------------------------------------------
def test_scan_pages_through_every_issue_merge_request_and_wiki_page(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project(issues=150))
    refs = list(stand.source(sleeps).scan())
    keys = [r.key for r in refs]
    assert keys == [f"issues/{i}" for i in range(1, 151)] + [
        "merge_requests/1",
        "merge_requests/2",
        "wiki/home",
        "wiki/guides/deploy",
    ]
    first = refs[0]
    assert first.version == at(1.5)
    assert first.url == f"{stand.url}/team/app/-/issues/1"
    assert refs[150].url == f"{stand.url}/team/app/-/merge_requests/1"
    assert refs[-1].url == f"{stand.url}/team/app/-/wikis/guides/deploy"
    assert len(refs[-1].version) == 64 and refs[-1].version != refs[-2].version
    listings = stand.requests("/projects/7/issues")
    assert [r["query"].get("page") for r in listings] == [None, "2"]  # the second from the Link header
    assert {
        (r["query"]["per_page"], r["query"]["state"], r["query"]["order_by"], r["query"]["sort"]) for r in listings
    } == {("100", "all", "created_at", "asc")}
    assert stand.requests("/wikis")[0]["query"]["with_content"] == "1"
    assert {r["private_token"] for r in stand.requests()} == {TOKEN}
    assert sleeps == []


def test_scan_by_numeric_id_and_skips_a_feature_the_project_turned_off(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project(wiki_access_level="disabled"))
    keys = [r.key for r in stand.source(sleeps, project=7, include=["wiki", "issues"]).scan()]
    assert keys == ["issues/1", "issues/2", "issues/3"]
    assert stand.requests("/wikis") == [] and stand.requests("/merge_requests") == []


# --- reading ------------------------------------------------------------------------------------------
def test_fetch_reads_an_issue_with_its_comments_and_leaves_system_notes_out(stand: Stand, sleeps: list[float]) -> None:
    notes = [
        {"id": 31, "body": "Seen on staging too.", "author": BO, "created_at": at(10), "updated_at": at(10)},
        {"id": 32, "body": "added ~bug label", "system": True, "author": ANN, "created_at": at(11)},
        {"id": 33, "body": "Fixed by !1.", "author": ANN, "created_at": at(12), "updated_at": at(14)},
    ]
    first = issue(1, labels=["bug", "ui"], assignees=[BO], description="The login page loops.", state="closed")
    stand.write(project(issues=[first], notes={"issues/1": notes}))
    source = stand.source(sleeps)
    ref = next(r for r in source.scan() if r.key == "issues/1")
    doc = source.fetch(ref)
    assert doc.title == "#1 Issue 1"
    assert doc.ref.version == ref.version == at(14)  # the edited comment touched the issue
    assert [p.anchor for p in doc.parts] == ["description", "note-31", "note-33"]
    head = doc.parts[0]
    assert head.text.startswith("Issue 1\n\nThe login page loops.")
    assert "state: closed" in head.text and "labels: bug, ui" in head.text and "assignees: Bo Park" in head.text
    assert head.valid_at == START + timedelta(hours=1)
    assert head.speaker == "Ann Lee"
    assert {p.thread for p in doc.parts} == {"issue #1"}
    assert doc.parts[1].text == "Seen on staging too." and doc.parts[1].speaker == "Bo Park"
    assert doc.parts[2].valid_at == START + timedelta(hours=14)  # edited after it was written
    assert doc.metadata == {"state": "closed", "labels": ["bug", "ui"], "iid": 1, "project": "team/app"}
    assert doc.valid_at == START + timedelta(hours=14)
    assert stand.requests("/issues/1") == []  # the listing's issue served: only its notes were read
    assert stand.requests("/issues/1/notes")[0]["query"]["sort"] == "asc"


def test_fetch_reads_a_merge_request_with_its_branches(stand: Stand, sleeps: list[float]) -> None:
    note = {"id": 41, "body": "Looks good to me.", "author": ANN, "created_at": at(20)}
    stand.write(project(notes={"merge_requests/1": [note]}))
    source = stand.source(sleeps)
    ref = next(r for r in source.scan() if r.key == "merge_requests/1")
    doc = source.fetch(ref)
    assert doc.title == "!1 Fix the login redirect"
    assert "merges fix-login -> main" in doc.parts[0].text and "assignees: Bo Park" in doc.parts[0].text
    assert [p.anchor for p in doc.parts] == ["description", "note-41"]
    assert {p.thread for p in doc.parts} == {"!1"}
    assert doc.metadata["state"] == "opened" and doc.metadata["iid"] == 1


def test_fetch_without_the_listings_hint_reads_the_item(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project())
    doc = stand.source(sleeps).fetch(ItemRef("issues/2", "", ""))
    assert doc.title == "#2 Issue 2"
    assert doc.ref == ItemRef("issues/2", at(2.5), f"{stand.url}/team/app/-/issues/2")
    assert len(stand.requests("/projects/7/issues/2")) == 1


def test_fetch_splits_a_wiki_page_into_its_sections(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project())
    source = stand.source(sleeps)
    ref = next(r for r in source.scan() if r.key == "wiki/guides/deploy")
    doc = source.fetch(ref)
    assert doc.title == "Deploy"
    assert doc.ref == ref  # the same content: the same version
    assert len(doc.parts) >= 2
    assert len({p.anchor for p in doc.parts}) == len(doc.parts)
    text = "\n".join(p.text for p in doc.parts)
    assert "pushes it to the registry" in text and "page the on-call engineer" in text
    assert doc.metadata == {"project": "team/app", "slug": "guides/deploy", "format": "markdown"}
    assert len(stand.requests("/wikis/guides/deploy")) == 1


def test_versions_move_when_an_issue_is_edited_or_commented_and_a_page_rewritten(
    stand: Stand, sleeps: list[float]
) -> None:
    stand.write(project())
    source = stand.source(sleeps)

    def versions() -> dict[str, str]:
        return {r.key: r.version for r in source.scan()}

    before = versions()
    stand.edit(lambda p: p["notes"].update({"issues/2": [{"id": 5, "body": "Me too.", "created_at": at(50)}]}))
    commented = versions()
    assert commented["issues/2"] != before["issues/2"]
    assert {k: v for k, v in commented.items() if k != "issues/2"} == {
        k: v for k, v in before.items() if k != "issues/2"
    }
    stand.edit(lambda p: p["notes"]["issues/2"][0].update({"body": "Me too, on 17.5.", "updated_at": at(60)}))
    assert versions()["issues/2"] == at(60)
    stand.edit(lambda p: p["issues"][2].update({"description": "Rewritten.", "updated_at": at(70)}))
    assert versions()["issues/3"] == at(70)
    stand.edit(lambda p: p["wiki"][0].update({"content": "Welcome, and read the deploy guide."}))
    rewritten = versions()
    assert rewritten["wiki/home"] != before["wiki/home"]
    assert rewritten["wiki/guides/deploy"] == before["wiki/guides/deploy"]


def test_an_item_deleted_since_the_scan_is_a_404(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project())
    source = stand.source(sleeps)
    refs = {r.key: r for r in source.scan()}
    stand.edit(lambda p: (p["issues"].pop(1), p["wiki"].pop(0)))
    for key in ("issues/2", "wiki/home"):
        with pytest.raises(SourceError) as caught:
            source.fetch(refs[key])
        assert caught.value.status_code == 404 and "is gone from team/app" in caught.value.message
    assert sleeps == []


# --- failures -----------------------------------------------------------------------------------------
def test_a_refused_token_stops_at_once_and_names_its_variable(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project())
    with pytest.raises(SourceAuthError) as caught:
        list(stand.source(sleeps, token="wrong").scan())
    assert stand.url in caught.value.message and "401" in caught.value.message
    assert "check the token in $GITLAB_TOKEN" in caught.value.message
    assert sleeps == [] and len(stand.requests()) == 1


def test_no_token_for_a_private_project_says_to_set_one(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project())
    with pytest.raises(SourceAuthError) as caught:
        list(stand.source(sleeps, token="", token_env=None).scan())
    assert "without a token" in caught.value.message and "set token_env" in (caught.value.hint or "")
    assert stand.requests()[0]["private_token"] is None


def test_a_forbidden_listing_asks_for_the_read_api_scope(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project(), faults=[{"status": 403, "times": 1, "match": "/wikis"}])
    with pytest.raises(SourceAuthError) as caught:
        list(stand.source(sleeps).scan())
    assert "403" in caught.value.message and "read_api" in caught.value.message
    assert sleeps == []


def test_a_rate_limit_is_waited_out_as_long_as_it_asks(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project(), faults=[{"status": 429, "times": 2, "retry_after": 3, "match": "/issues?"}])
    keys = [r.key for r in stand.source(sleeps).scan()]
    assert keys[:3] == ["issues/1", "issues/2", "issues/3"] and len(keys) == 7
    assert len(sleeps) == 2 and all(s >= 3 for s in sleeps)
    assert [r["status"] for r in stand.requests("/issues")] == [429, 429, 200]


def test_server_errors_retry_the_failing_page_alone(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project(issues=150), faults=[{"status": 500, "times": 2, "match": "page=2"}])
    keys = [r.key for r in stand.source(sleeps).scan()]
    assert keys[:150] == [f"issues/{i}" for i in range(1, 151)]
    assert len(sleeps) == 2
    pages = [(r["query"].get("page"), r["status"]) for r in stand.requests("/issues")]
    assert pages == [(None, 200), ("2", 500), ("2", 500), ("2", 200)]


def test_a_persistent_bad_gateway_gives_up_after_every_attempt(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project(), faults=[{"status": 502, "times": 100}])
    with pytest.raises(SourceError) as caught:
        list(stand.source(sleeps).scan())
    assert caught.value.status_code == 502 and "gave up after 5 tries" in caught.value.message
    assert len(sleeps) == 4 and len(stand.requests()) == 5


def test_a_page_that_is_not_json_fails_at_once_rather_than_skip_it(stand: Stand, sleeps: list[float]) -> None:
    maintenance = {"status": 200, "times": 1, "match": "page=2", "body": "<html>Down for maintenance</html>"}
    stand.write(project(issues=150), faults=[maintenance])
    with pytest.raises(UnreadableAnswer) as caught:
        list(stand.source(sleeps).scan())
    assert not caught.value.transient and "not GitLab's JSON" in caught.value.message
    assert sleeps == [] and [r["query"].get("page") for r in stand.requests("/issues")] == [None, "2"]


def test_an_unknown_project_is_a_404_not_retried(stand: Stand, sleeps: list[float]) -> None:
    stand.write(project())
    with pytest.raises(SourceError) as caught:
        list(stand.source(sleeps, project="team/nope").scan())
    assert not isinstance(caught.value, SourceAuthError)
    assert caught.value.status_code == 404
    assert caught.value.message == f"no project 'team/nope' at {stand.url}"
    assert "group/name" in (caught.value.hint or "")
    assert sleeps == []


def test_a_server_that_does_not_answer_is_retried_then_reported(stand: Stand, sleeps: list[float]) -> None:
    with pytest.raises(SourceError) as caught:
        list(stand.source(sleeps, url=f"http://127.0.0.1:{free_port()}").scan())
    assert caught.value.status_code is None
    assert "could not reach GitLab" in caught.value.message and "gave up after 5 tries" in caught.value.message
    assert len(sleeps) == 4


# --- config -------------------------------------------------------------------------------------------
def test_configure_fills_in_the_defaults_and_normalises() -> None:
    config = configure("gitlab", {"url": "https://gitlab.example.com/", "project": "42"})
    assert config == {
        "url": "https://gitlab.example.com",
        "project": 42,
        "token_env": None,
        "include": ["issues", "merge_requests", "wiki"],
        "ssl_verify": True,
    }
    again = configure("gitlab", {"url": "http://git.lan", "project": "/team/app/", "include": ["wiki", "issues"]})
    assert again["project"] == "team/app" and again["include"] == ["issues", "wiki"]
    assert config["include"] is not configure("gitlab", {"url": "http://git.lan", "project": 1})["include"]


@pytest.mark.parametrize(
    ("config", "complaint"),
    [
        ({"url": "https://g.example", "project": 1, "token": "glpat-x"}, "unknown config key(s) token"),
        ({"url": "gitlab.example.com", "project": 1}, "url must be an http:// or https:// URL"),
        ({"url": "https://g.example", "project": 1, "token_env": "CABRAIN_DATABASE_URL"}, "may not name a CaBrain"),
        ({"url": "https://g.example", "project": 1, "include": ["issues", "pipelines"]}, "include must list"),
        ({"url": "https://g.example", "project": 1, "include": []}, "include must list"),
        ({"url": "https://g.example", "project": "app"}, "path like group/name"),
        ({"url": "https://g.example", "project": 0}, "positive id"),
        ({"url": "https://g.example"}, "project is required"),
        ({"url": "https://g.example", "project": 1, "ssl_verify": "no"}, "ssl_verify must be true or false"),
    ],
)
def test_configure_rejects_what_it_cannot_use(config: dict[str, Any], complaint: str) -> None:
    with pytest.raises(InputError) as caught:
        configure("gitlab", config)
    assert complaint in caught.value.message


@pytest.mark.subprocess
def test_the_kind_imports_python_gitlab_only_when_a_source_is_built() -> None:
    code = "import sys, cabrain.connectors.sources.gitlab as g; print(g.KIND, g.LOCAL, 'gitlab' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["gitlab", "False", "False"]
