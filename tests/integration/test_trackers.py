"""Issue trackers against the GitLab and Vikunja stand-ins (tests/fakes/gitlab_server.py,
vikunja_server.py) on loopback: python-gitlab and httpx over real HTTP, the shared Retry with its
sleeps recorded instead of slept. Filing an issue, the merge request that closes it, a create whose
answer was lost filed once, a read-only token, a rate limit; a Vikunja task, which has no links."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cabrain.connectors.retry import Retry
from cabrain.connectors.trackers import FiledIssue, FilingUnconfirmed, Link, Tracker, tracker
from cabrain.errors import InputError, SourceAuthError, SourceError
from tests.conftest import brings, loopback_egress
from tests.standins import RunningStand, running
from tests.unit import test_gitlab_source as gl
from tests.unit import test_vikunja_source as vk

Stand = RunningStand


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def opened() -> Iterator[list[Tracker]]:
    made: list[Tracker] = []
    yield made
    for each in made:
        each.close()


@pytest.fixture
@brings("subprocess")
def gitlab(
    tmp_path: Path, sleeps: list[float], opened: list[Tracker]
) -> Iterator[tuple[Stand, Callable[..., Tracker]]]:
    """The GitLab stand-in holding team/app (issues 1 to 3, merge requests 1 and 2), and a way to
    build a tracker on it."""
    with running(
        Stand, "gitlab_server", tmp_path, {"projects": [gl.project()], "faults": []}, **_kind("gitlab")
    ) as stand:

        def make(token: str = gl.TOKEN, **config: Any) -> Tracker:
            settings = {"url": stand.url, "project": "team/app", "token_env": "GITLAB_TOKEN"} | config
            made = tracker("gitlab", settings, token, Retry(sleep=sleeps.append), egress=loopback_egress())
            opened.append(made)
            return made

        yield stand, make


@pytest.fixture
@brings("subprocess")
def vikunja(tmp_path: Path, sleeps: list[float], opened: list[Tracker]) -> Iterator[tuple[Stand, Tracker]]:
    """The Vikunja stand-in holding its source tests' instance, and a tracker filing into Ops (1)."""
    with running(Stand, "vikunja_server", tmp_path, vk.instance(), **_kind("vikunja")) as stand:
        config = {"url": stand.url, "token_env": "VIKUNJA_TOKEN", "projects": [1]}
        made = tracker("vikunja", config, vk.TOKEN, Retry(sleep=sleeps.append), egress=loopback_egress())
        opened.append(made)
        yield stand, made


def _kind(kind: str) -> dict[str, Any]:
    token = gl.TOKEN if kind == "gitlab" else vk.TOKEN
    return {"token": token, "kind": kind, "url_key": "url", "defaults": {}}


def _issues(stand: Stand) -> list[dict[str, Any]]:
    issues: list[dict[str, Any]] = stand.read()["projects"][0]["issues"]
    return issues


# --- GitLab --------------------------------------------------------------------------------------------
def test_an_issue_is_filed_with_its_labels_and_its_key(gitlab, sleeps: list[float]) -> None:
    stand, make = gitlab
    filed = make().file(
        "  Login loops\non Safari  ", "Two users in #support saw it.", labels=["bug", "ui"], key="thread-42"
    )
    assert filed == FiledIssue("gitlab", "team/app", "4", f"{stand.url}/team/app/-/issues/4", "Login loops on Safari")
    held = _issues(stand)[-1]
    assert held["iid"] == 4 and held["title"] == "Login loops on Safari" and held["state"] == "opened"
    assert held["labels"] == ["bug", "ui"] and held["author"]["username"] == "connector"
    assert held["description"] == "Two users in #support saw it.\n\n<!-- cabrain:thread-42 -->"
    # the same key again: the issue already filed, not a second one
    assert make().file("Login loops on Safari", "Again.", key="thread-42") == filed
    assert len(_issues(stand)) == 4 and len(stand.requests("/issues")) == 3  # 2 searches, 1 create
    assert sleeps == []


def test_a_title_is_cut_to_what_gitlab_takes(gitlab) -> None:
    stand, make = gitlab
    filed = make().file("word " * 100, "")
    assert len(filed.title) == 255 and filed.title.endswith("…")
    assert _issues(stand)[-1]["description"] == ""


def test_the_merge_request_that_closes_an_issue_is_its_link(gitlab) -> None:
    stand, make = gitlab
    filing = make()
    filed = filing.file("Login loops on Safari", "Seen twice.", key="thread-42")
    assert filing.links(filed.ref) == []

    def opened(d: dict[str, Any]) -> None:  # what opening these merge requests in GitLab leaves behind
        d["projects"][0]["merge_requests"] += [
            gl.issue(3, title="Fix the Safari redirect loop", description="Closes #4", source_branch="fix-loop"),
            gl.issue(4, title="Refactor login", description="Prepares #4.", state="merged"),
            gl.issue(5, title="Unrelated", description="Fixes #40 and #14"),
        ]

    stand.edit(opened)
    base = f"{stand.url}/team/app/-/merge_requests"
    assert filing.links(filed.ref) == [
        Link("merge_request", "3", f"{base}/3", "Fix the Safari redirect loop", "opened"),
        Link("merge_request", "4", f"{base}/4", "Refactor login", "merged"),
    ]
    assert len(stand.requests("/issues/4/related_merge_requests")) == 2
    assert len(stand.requests("/issues/4/closed_by")) == 2


def test_links_of_an_unknown_issue_is_a_404(gitlab, sleeps: list[float]) -> None:
    _, make = gitlab
    with pytest.raises(SourceError) as caught:
        make().links("99")
    assert caught.value.status_code == 404 and "no issue #99 in team/app" in caught.value.message
    with pytest.raises(InputError):
        make().links("#99")
    assert sleeps == []


@pytest.mark.parametrize("lost", [{"drop": True}, {"status": 502}], ids=["dropped", "bad-gateway"])
def test_a_create_whose_answer_was_lost_files_one_issue(gitlab, sleeps: list[float], lost: dict[str, Any]) -> None:
    stand, make = gitlab
    stand.edit(lambda d: d.update(faults=[{"match": "POST /api/v4/", "after": True, "times": 1} | lost]))
    filed = make().file("Login loops on Safari", "Seen twice.", key="thread-42")
    assert filed.ref == "4" and len(_issues(stand)) == 4
    assert [(r["method"], r.get("done")) for r in stand.requests("/issues")] == [
        ("GET", None),  # no issue with the key yet
        ("POST", 201),  # filed, its answer lost
        ("GET", None),  # before the retry: found, so no second create
    ]
    assert len(sleeps) == 1


def test_without_a_key_a_lost_answer_is_not_retried(gitlab, sleeps: list[float]) -> None:
    stand, make = gitlab
    stand.edit(lambda d: d.update(faults=[{"match": "POST", "after": True, "drop": True}]))
    with pytest.raises(FilingUnconfirmed) as caught:
        make().file("Login loops on Safari", "Seen twice.")
    assert "may have been filed" in caught.value.message and "key" in (caught.value.hint or "")
    assert len(_issues(stand)) == 4 and sleeps == []  # filed once, never twice


def test_a_read_only_token_is_told_to_get_the_api_scope(gitlab, sleeps: list[float]) -> None:
    stand, make = gitlab
    stand.edit(lambda d: d.update(token_scopes=["read_api"]))
    with pytest.raises(SourceAuthError) as caught:
        make().file("Login loops on Safari", "Seen twice.", key="thread-42")
    assert "403" in caught.value.message and "$GITLAB_TOKEN" in caught.value.message
    assert "the api scope" in caught.value.message and "the api scope" in (caught.value.hint or "")
    assert len(_issues(stand)) == 3 and sleeps == []
    assert stand.requests("/issues")[-1]["status"] == 403


def test_a_refused_token_names_its_variable(gitlab) -> None:
    _, make = gitlab
    with pytest.raises(SourceAuthError) as caught:
        make(token="expired").file("Login loops on Safari", "Seen twice.")
    assert "401" in caught.value.message and "$GITLAB_TOKEN" in caught.value.message
    assert "api scope" in (caught.value.hint or "")


def test_a_rate_limited_create_is_retried_after_the_wait_asked(gitlab, sleeps: list[float]) -> None:
    stand, make = gitlab
    stand.edit(lambda d: d.update(faults=[{"status": 429, "retry_after": 3, "match": "POST"}]))
    filed = make().file("Login loops on Safari", "Seen twice.")
    assert filed.ref == "4" and len(_issues(stand)) == 4
    assert len(sleeps) == 1 and sleeps[0] >= 3
    assert [r["status"] for r in stand.requests("/issues")] == [429, 201]


def test_a_key_that_could_break_out_of_its_marker_is_refused(gitlab) -> None:
    _, make = gitlab
    with pytest.raises(InputError):
        make().file("Title", "Body", key="x --> <script>")


# --- Vikunja -------------------------------------------------------------------------------------------
def test_a_vikunja_task_is_created_and_has_no_links(vikunja, sleeps: list[float]) -> None:
    stand, filing = vikunja
    filed = filing.file("Renew the wildcard certificate", "It expires in April.\n\nAsk <ops>.", key="thread-7")
    assert filed == FiledIssue("vikunja", "1", "903", f"{stand.url}/tasks/903", "Renew the wildcard certificate")
    held = stand.read()["tasks"][-1]
    assert held["project_id"] == 1 and held["title"] == "Renew the wildcard certificate"
    assert held["description"] == "<p>It expires in April.</p><p>Ask &lt;ops&gt;.</p>\n<!-- cabrain:thread-7 -->"
    assert filing.links(filed.ref) == []
    assert [r["method"] for r in stand.requests()] == ["GET", "PUT"]
    assert sleeps == []


@pytest.mark.parametrize(("api", "tasks"), [("current", "/tasks"), ("0.24", "/tasks/all")])
def test_a_vikunja_create_whose_answer_was_lost_makes_one_task(
    vikunja, sleeps: list[float], api: str, tasks: str
) -> None:
    stand, filing = vikunja
    stand.edit(lambda d: d.update(api=api, faults=[{"match": "PUT", "after": True, "drop": True}]))
    filed = filing.file("Renew the wildcard certificate", "It expires in April.", key="thread-7")
    assert filed.ref == "903" and len(stand.read()["tasks"]) == 7
    asked = [(r["method"], r["path"].removeprefix("/api/v1"), r["status"]) for r in stand.requests()]
    older = [("GET", "/tasks", 404)] if api != "current" else []  # then the older release's route, kept
    assert asked == [*older, ("GET", tasks, 200), ("PUT", "/projects/1/tasks", None), ("GET", tasks, 200)]
    assert len(sleeps) == 1


def test_a_vikunja_tracker_needs_one_project(tmp_path: Path) -> None:
    config = {"url": "https://tasks.example.com", "token_env": "VIKUNJA_TOKEN", "projects": [1, 2]}
    with pytest.raises(InputError, match="name the project"):
        tracker("vikunja", config, "tok", Retry())
    with pytest.raises(SourceAuthError, match="VIKUNJA_TOKEN"):
        tracker("vikunja", config | {"project": 2}, None, Retry())
    with pytest.raises(InputError, match="no issue tracker"):
        tracker("webdav", {}, None, Retry())
