"""The vikunja connector kind against a Vikunja API stand-in (tests/fakes/vikunja_server.py) on
loopback: httpx over real HTTP, the shared Retry with its sleeps recorded instead of slept."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cabrain.connectors.base import ItemRef, SourceSpec
from cabrain.connectors.retry import Retry
from cabrain.connectors.sources import build, configure
from cabrain.errors import InputError, SourceAuthError, SourceError
from tests.conftest import REPO, brings, free_port
from tests.standins import RunningStand, running

TOKEN = "tok"
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
ANN = {"id": 1, "username": "ann", "name": "Ann Lee"}
BO = {"id": 2, "username": "bo", "name": ""}


def at(hours: float) -> str:
    """Vikunja's time format, ``hours`` after START."""
    return (START + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def project(ident: int, title: str, **fields: Any) -> dict[str, Any]:
    return {"id": ident, "title": title, "description": "", "owner": ANN, "updated": at(0)} | fields


def task(ident: int, project_id: int = 1, **fields: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "project_id": project_id,
        "title": f"Task {ident}",
        "description": f"<p>What task {ident} is about.</p>",
        "created_by": ANN,
        "created": at(ident),
        "updated": at(ident + 0.5),
    } | fields


def comment(ident: int, text: str, author: dict[str, Any] = BO, hours: float = 100) -> dict[str, Any]:
    return {"id": ident, "comment": f"<p>{text}</p>", "author": author, "created": at(hours), "updated": at(hours)}


def instance(tasks: int = 3, **extra: Any) -> dict[str, Any]:
    """Projects Ops (1) with Ops › Infra (2) under it, Home (3), an archived one and Favorites;
    ``tasks`` tasks in Ops, one in Infra, one in Home, one in the archived project."""
    return {
        "projects": [
            project(1, "Ops", description="<p>Keeping the <b>lights</b> on.</p>", identifier="OPS"),
            project(2, "Infra", parent_project_id=1),
            project(3, "Home"),
            project(4, "Old", is_archived=True),
            project(-1, "Favorites"),
        ],
        "tasks": [
            *(task(i) for i in range(1, tasks + 1)),
            task(900, 2, title="Renew certificates"),
            task(901, 3, title="Water the plants"),
            task(902, 4, title="Archived work"),
        ],
        "comments": {},
    } | extra


class Stand(RunningStand):
    """The stand-in, and how this kind's tests write its state."""

    def write(self, state: dict[str, Any]) -> None:
        self.state.write_text(json.dumps(state))


@pytest.fixture
@brings("subprocess")
def stand(tmp_path: Path) -> Iterator[Stand]:
    with running(
        Stand,
        "vikunja_server",
        tmp_path,
        {"projects": []},
        token=TOKEN,
        kind="vikunja",
        url_key="url",
        defaults={"token_env": "VIKUNJA_TOKEN"},
    ) as started:
        yield started


@pytest.fixture
def sleeps() -> list[float]:
    return []


def by_key(refs: list[ItemRef]) -> dict[str, ItemRef]:
    return {r.key: r for r in refs}


# --- listing ------------------------------------------------------------------------------------------
def test_scan_pages_through_every_project_and_task(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance(tasks=23, comments={"5": [comment(7, "Seen.")]}) | {"max_per_page": 10})
    refs = list(stand.source(sleeps).scan())
    tasks = [*range(1, 24), 900, 901]
    assert [r.key for r in refs] == ["projects/1", "projects/2", "projects/3"] + [f"tasks/{i}" for i in tasks]
    assert refs[0].url == f"{stand.url}/projects/1" and refs[3].url == f"{stand.url}/tasks/1"
    assert refs[3].version.startswith(at(1.5) + "#")
    listing = [r["query"] for r in stand.requests("/api/v1/tasks") if r["query"].get("sort_by")]
    assert [q["page"] for q in listing] == ["1", "2", "3"]  # 26 unarchived tasks, 10 a page
    assert all(q["expand"] == "comments" and q["per_page"] == "50" for q in listing)
    assert stand.requests("/comments") == []  # the expansion is honoured: no task's comments asked apart
    assert sleeps == []


def test_without_a_comment_in_sight_each_tasks_comments_are_asked(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance())  # no task carries "comments": the expansion may have been ignored
    refs = list(stand.source(sleeps).scan())
    asked = [r["path"] for r in stand.requests("/comments")]
    assert asked == [f"/api/v1/tasks/{i}/comments" for i in (1, 2, 3, 900, 901)] and len(refs) == 8


def test_projects_config_keeps_those_projects_and_the_ones_under_them(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance())
    keys = [r.key for r in stand.source(sleeps, projects=[1]).scan()]
    assert keys == ["projects/1", "projects/2", "tasks/1", "tasks/2", "tasks/3", "tasks/900"]
    assert [r.key for r in stand.source(sleeps, projects=[3, 4]).scan()] == ["projects/3", "tasks/901"]


def test_versions_move_on_edits_comments_labels_and_assignees(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance(comments={"2": [comment(7, "First look.")]}))
    source = stand.source(sleeps)
    before = by_key(list(source.scan()))

    def edit(data: dict[str, Any]) -> None:
        tasks = {t["id"]: t for t in data["tasks"]}
        tasks[1]["title"], tasks[1]["updated"] = "Task 1, renamed", at(50)
        data["comments"]["3"] = [comment(8, "New comment; the task's updated stays.")]
        data["comments"]["2"][0] |= {"comment": "<p>Edited.</p>", "updated": at(120)}
        tasks[900]["labels"] = [{"id": 4, "title": "urgent"}]  # Vikunja leaves updated as it was
        tasks[901]["assignees"] = [BO]
        data["projects"][0]["description"] = "<p>Rewritten.</p>"

    stand.edit(edit)
    after = by_key(list(source.scan()))
    for key in ("tasks/1", "tasks/2", "tasks/3", "tasks/900", "tasks/901", "projects/1"):
        assert after[key].version != before[key].version, key
    assert after["projects/2"].version == before["projects/2"].version
    assert after["tasks/3"].version.split("#")[0] == before["tasks/3"].version.split("#")[0]


def test_a_deleted_task_leaves_the_listing_and_is_a_404_when_fetched(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance())
    source = stand.source(sleeps)
    refs = by_key(list(source.scan()))
    stand.edit(lambda data: data.update(tasks=[t for t in data["tasks"] if t["id"] != 2]))
    assert "tasks/2" not in by_key(list(source.scan()))
    with pytest.raises(SourceError) as caught:
        source.fetch(refs["tasks/2"])
    assert caught.value.status_code == 404 and "The task does not exist" in caught.value.message
    with pytest.raises(SourceError) as caught:
        source.fetch(ItemRef("labels/1", "x", "u"))
    assert caught.value.status_code == 404
    assert sleeps == []


@pytest.mark.parametrize("api", ["0.24", "0.22"])
def test_older_servers_list_every_task_and_each_tasks_comments(stand: Stand, sleeps: list[float], api: str) -> None:
    many = [comment(100 + i, f"Note {i}.", hours=100 + i) for i in range(60)]
    state = instance(comments={"1": [comment(7, "First look.")], "2": many})
    stand.write(state)
    current = [(r.key, r.version) for r in stand.source(sleeps).scan()]
    stand.write(state | {"api": api})
    older = stand.source(sleeps)
    assert [(r.key, r.version) for r in older.scan()] == current
    listed = {r["path"] for r in stand.requests() if r["query"].get("sort_by")}
    assert listed == {"/api/v1/tasks", "/api/v1/tasks/all"}
    asked = {r["path"] for r in stand.requests("/comments")}
    assert {f"/api/v1/tasks/{i}/comments" for i in (1, 2, 3, 900, 901)} <= asked
    doc = older.fetch(ItemRef("tasks/2", "v", "u"))
    assert [p.anchor for p in doc.parts[1:]] == [f"comment-{100 + i}" for i in range(60)]  # each once
    assert {r["query"]["page"] for r in stand.requests("/tasks/2/comments")} == {"1", "2"}


def test_a_task_with_fifty_comments_or_more_has_them_listed_apart(stand: Stand, sleeps: list[float]) -> None:
    many = [comment(100 + i, f"Note {i}.", hours=100 + i) for i in range(55)]
    stand.write(instance(comments={"1": [comment(7, "First look.")], "2": many}) | {"max_per_page": 20})
    source = stand.source(sleeps)
    before = by_key(list(source.scan()))
    assert [r["path"] for r in stand.requests("/comments")] == ["/api/v1/tasks/2/comments"] * 3
    stand.edit(lambda data: data["comments"]["2"][54].update(comment="<p>Changed late.</p>", updated=at(999)))
    assert by_key(list(source.scan()))["tasks/2"].version != before["tasks/2"].version


# --- fetching -----------------------------------------------------------------------------------------
def test_fetch_reads_a_task_with_its_fields_and_each_comment(stand: Stand, sleeps: list[float]) -> None:
    rich = task(
        1,
        title="Migrate the database",
        description="<h2>Steps</h2><p>Dump, <strong>restore</strong>, switch.</p>",
        done=True,
        done_at=at(30),
        due_date=at(48),
        labels=[{"id": 1, "title": "ops"}, {"id": 2, "title": "db"}],
        assignees=[ANN, BO],
    )
    said = [comment(8, "Done on staging.", ANN, hours=20), comment(7, "Which <em>version</em>?", BO, hours=10)]
    stand.write(instance() | {"tasks": [rich], "comments": {"1": said}})
    source = stand.source(sleeps)
    doc = source.fetch(by_key(list(source.scan()))["tasks/1"])
    assert doc.title == "Migrate the database" and doc.valid_at == START + timedelta(hours=1.5)
    body, steps, *comments = doc.parts
    assert body.anchor == "task" and body.speaker == "Ann Lee" and body.thread == "tasks/1"
    assert body.text.splitlines()[:5] == [
        "Migrate the database",
        "Done: yes (2024-03-02T15:00+00:00)",
        "Due: 2024-03-03T09:00+00:00",
        "Labels: ops, db",
        "Assignees: Ann Lee, bo",
    ]
    assert steps.anchor == "task/Steps" and steps.text == "Steps\n\nDump, restore, switch."
    assert [(c.anchor, c.text, c.speaker) for c in comments] == [
        ("comment-7", "Which version?", "bo"),
        ("comment-8", "Done on staging.", "Ann Lee"),
    ]
    assert comments[0].valid_at == START + timedelta(hours=10) and comments[0].thread == "tasks/1"
    assert doc.metadata == {
        "project_id": 1,
        "identifier": "OPS-1",
        "done": True,
        "labels": ["ops", "db"],
        "assignees": ["Ann Lee", "bo"],
    }


def test_fetch_reads_a_project_and_a_markdown_description_of_older_servers(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance(tasks=1) | {"tasks": [task(1, description="Line one\nline two\n\n- a point")]})
    source = stand.source(sleeps)
    refs = by_key(list(source.scan()))
    ops = source.fetch(refs["projects/1"])
    assert ops.title == "Ops" and [p.text for p in ops.parts] == ["Ops\n\nKeeping the lights on."]
    assert ops.parts[0].anchor == "project" and ops.parts[0].speaker == "Ann Lee"
    assert ops.metadata == {"project_id": 1, "identifier": "OPS"}
    body = source.fetch(refs["tasks/1"]).parts[0].text
    assert body.endswith("Line one\nline two\n\n- a point")


def test_a_long_description_is_split_and_comments_turned_off_are_none(stand: Stand, sleeps: list[float]) -> None:
    long = "".join(f"<h2>Part {i}</h2><p>{'Words that go on and on. ' * 12}</p>" for i in range(3))
    stand.write(instance() | {"tasks": [task(1, description=long)], "comments_disabled": True})
    source = stand.source(sleeps)
    (ref,) = [r for r in source.scan() if r.key == "tasks/1"]
    doc = source.fetch(ref)
    assert [p.anchor for p in doc.parts] == ["task", "task/Part 0", "task/Part 1", "task/Part 2"]
    assert all(p.thread == "tasks/1" for p in doc.parts)


# --- failures -----------------------------------------------------------------------------------------
def test_a_refused_token_stops_at_once_and_names_its_variable(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance())
    with pytest.raises(SourceAuthError) as caught:
        list(stand.source(sleeps, token="wrong").scan())
    assert "the token in $VIKUNJA_TOKEN was refused" in caught.value.message
    assert "API Tokens" in (caught.value.hint or "")
    assert sleeps == [] and len(stand.requests()) == 1


def test_a_forbidden_task_says_the_token_lacks_permission(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance() | {"faults": [{"status": 403, "match": "/tasks/2", "message": "Forbidden"}]})
    source = stand.source(sleeps)
    with pytest.raises(SourceAuthError) as caught:
        source.fetch(ItemRef("tasks/2", "v", "u"))
    assert "lacks permission (Forbidden)" in caught.value.message and sleeps == []


def test_a_rate_limit_is_waited_out_as_long_as_it_asks(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance() | {"faults": [{"status": 429, "retry_after": 9, "match": "/projects"}]})
    assert len(list(stand.source(sleeps).scan())) == 8
    assert sleeps == [9.0]


def test_server_errors_retry_the_failing_request_alone(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance(tasks=12) | {"max_per_page": 5, "faults": [{"status": 500, "times": 2, "match": "page=2"}]})
    assert len(list(stand.source(sleeps).scan())) == 17
    assert len(sleeps) == 2
    pages = [r["query"]["page"] for r in stand.requests("/api/v1/tasks") if r["query"].get("sort_by")]
    assert pages == ["1", "2", "2", "2", "3"]  # 15 unarchived tasks, 5 a page: the second page retried alone
    stand.write(instance() | {"faults": [{"status": 503, "times": 2, "match": "/tasks/1/comments"}]})
    assert stand.source(sleeps).fetch(ItemRef("tasks/1", "v", "u")).title == "Task 1"
    assert len(sleeps) == 4


def test_a_persistent_server_error_gives_up_after_every_attempt(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance() | {"faults": [{"status": 502, "times": 99}]})
    with pytest.raises(SourceError) as caught:
        list(stand.source(sleeps).scan())
    assert caught.value.status_code == 502 and "gave up after 5 tries" in caught.value.message
    assert len(sleeps) == 4


def test_a_url_that_is_not_vikunja_says_so(stand: Stand, sleeps: list[float]) -> None:
    stand.write(instance())
    source = stand.source(sleeps, url=f"{stand.url}/elsewhere")
    with pytest.raises(SourceError) as caught:
        list(source.scan())
    assert caught.value.status_code == 404 and sleeps == []
    unanswered = stand.source(sleeps, url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(SourceError) as caught:
        list(unanswered.scan())
    assert caught.value.status_code is None and "Vikunja did not answer" in caught.value.message
    assert len(sleeps) == 4


# --- config -------------------------------------------------------------------------------------------
def test_configure_fills_in_the_defaults_and_normalises() -> None:
    assert configure("vikunja", {"url": "https://tasks.example.com/api/v1/", "token_env": "VIKUNJA_TOKEN"}) == {
        "url": "https://tasks.example.com",
        "token_env": "VIKUNJA_TOKEN",
        "projects": None,
    }
    again = configure("vikunja", {"url": "http://vk.lan", "token_env": "T", "projects": [7, 3, 7]})
    assert again["projects"] == [3, 7]


@pytest.mark.parametrize(
    ("config", "complaint"),
    [
        ({"url": "https://vk.example", "token_env": "T", "token": "tk_x"}, "unknown config key(s) token"),
        ({"url": "https://vk.example"}, "token_env is required"),
        ({"token_env": "T"}, "url is required"),
        ({"url": "vk.example", "token_env": "T"}, "url must be an http:// or https:// URL"),
        ({"url": "https://vk.example", "token_env": "CABRAIN_DATABASE_URL"}, "may not name a CaBrain setting"),
        ({"url": "https://vk.example", "token_env": "T", "projects": [1, "two"]}, "projects must be a list"),
        ({"url": "https://vk.example", "token_env": "T", "projects": [0]}, "positive integers"),
        ({"url": "https://vk.example", "token_env": "T", "projects": [True]}, "positive integers"),
        ({"url": "https://vk.example", "token_env": "T", "projects": []}, "positive integers"),
        ({"url": "https://vk.example", "token_env": "T", "projects": 3}, "projects must be a list"),
    ],
)
def test_configure_rejects_what_it_cannot_use(config: dict[str, Any], complaint: str) -> None:
    with pytest.raises(InputError) as caught:
        configure("vikunja", config)
    assert complaint in caught.value.message


def test_building_without_a_token_says_which_variable_to_set() -> None:
    with pytest.raises(SourceAuthError) as caught:
        build(SourceSpec("vikunja", {"url": "https://vk.example", "token_env": "VIKUNJA_TOKEN"}), Retry())
    assert "$VIKUNJA_TOKEN" in caught.value.message


@pytest.mark.subprocess
def test_the_kind_imports_httpx_only_when_a_source_is_built() -> None:
    code = "import sys, cabrain.connectors.sources.vikunja as v; print(v.KIND, v.LOCAL, 'httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["vikunja", "False", "False"]
