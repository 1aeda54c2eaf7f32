"""The Vikunja connector end to end: httpx against the Vikunja stand-in on loopback
(tests/fakes/vikunja_server.py), into real PostgreSQL. Projects, tasks and their comments: first
sync, a no-op resync, an edited description and a new comment, a deleted task, a rate limit and
server errors retried, a sync killed midway and resumed, a refused token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from cabrain.connectors.facade import Connectors
from cabrain.errors import SourceAuthError, SourceError
from cabrain.types import RecallQuery
from tests.conftest import brings, cli_env, crashed_sessions_gone, run_cli_process, start_fake
from tests.integration.connector_kit import edit_state, memories, recorded_hub
from tests.unit.test_vikunja_source import ANN, BO, TOKEN, at, comment, project, task


def instance() -> dict[str, Any]:
    """Projects Ops (1) and Office (2), an archived one; a database migration with a comment and a
    certificate renewal in Ops, an Arabic task in Office, a task in the archived project."""
    return {
        "projects": [
            project(1, "Ops", description="<p>Keeping the production <b>servers</b> healthy.</p>", identifier="OPS"),
            project(2, "Office"),
            project(3, "Old", is_archived=True),
        ],
        "tasks": [
            task(
                1,
                title="Migrate the billing database",
                description="<p>Move billing from PostgreSQL 13 to 16 with a logical replica.</p>",
                labels=[{"id": 1, "title": "db"}],
                assignees=[ANN, BO],
            ),
            task(2, title="Renew certificates", description="<p>The wildcard certificate expires in April.</p>"),
            task(3, 2, title="تجديد عقد المكتب", description="<p>يجب تجديد عقد إيجار المكتب قبل نهاية شهر مارس.</p>"),
            task(4, 3, title="Archived work"),
        ],
        "comments": {"1": [comment(7, "Which replica lag is acceptable during the switch?", BO, hours=10)]},
        "faults": [],
    }


@pytest.fixture
@brings("subprocess")
def vikunja(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    state = tmp_path / "state.json"
    state.write_text(json.dumps(instance()))
    proc, port = start_fake("vikunja_server", "--state", str(state), "--token", TOKEN)
    yield f"http://127.0.0.1:{port}", state
    proc.terminate()
    proc.wait(10)


@pytest.fixture
async def hub(brain) -> Connectors:
    made, waits = await recorded_hub(brain, "tasks", {"VIKUNJA_TOKEN": TOKEN, "OLD_TOKEN": "expired"})
    made.waits = waits  # type: ignore[attr-defined]
    return made


def _config(url: str, env: str = "VIKUNJA_TOKEN") -> dict:
    return {"url": url, "token_env": env}


async def test_projects_tasks_and_comments_sync_incrementally(hub: Connectors, vikunja, db_dsn: str, brain) -> None:
    url, state = vikunja
    await hub.add("root", "team-tasks", "vikunja", "tasks", _config(url))
    first = await hub.sync("root", "team-tasks")
    assert first.status == "done", first.error
    assert first.counts["listed"] == 2 + 3  # projects Ops and Office, their tasks: not the archived ones
    rows = await memories(db_dsn, "tasks")
    assert len(rows) == first.counts["added"] == 2 + 3 + 1  # a part for each project and task, one comment
    assert {r["source_kind"] for r in rows} == {"vikunja"}
    assert not any("Archived work" in r["content"] for r in rows)

    said = next(r for r in rows if "replica lag" in r["content"])
    meta = json.loads(said["metadata"])
    assert meta["connector"] == "team-tasks" and meta["anchor"] == "comment-7"
    assert meta["speaker"] == "bo" and meta["thread"] == "tasks/1" and meta["title"] == "Migrate the billing database"
    assert said["source_ref"].startswith(f"{url}/tasks/1@{at(1.5)}#")
    assert said["valid_at"] == datetime.fromisoformat(at(10))
    body = next(r for r in rows if r["content"].startswith("Migrate the billing database"))
    body_meta = json.loads(body["metadata"])
    assert body_meta["anchor"] == "task" and body_meta["speaker"] == "Ann Lee" and body_meta["thread"] == "tasks/1"
    assert body_meta["labels"] == ["db"] and body_meta["assignees"] == ["Ann Lee", "bo"]
    assert "Labels: db" in body["content"] and "PostgreSQL 13 to 16" in body["content"]
    assert body["source_ref"] == said["source_ref"]
    ops = next(r for r in rows if r["source_ref"].startswith(f"{url}/projects/1@"))
    assert "production servers healthy" in ops["content"] and json.loads(ops["metadata"])["anchor"] == "project"

    found = await brain.recall("root", RecallQuery("when does the wildcard certificate expire", "tasks", k=3))
    assert "wildcard certificate" in found.hits[0].memory.content
    arabic = await brain.recall("root", RecallQuery("عقد إيجار المكتب", "tasks", k=3))
    assert "عقد إيجار المكتب" in arabic.hits[0].memory.content

    again = await hub.sync("root", "team-tasks")
    assert again.counts["unchanged"] == again.counts["listed"] == 5
    assert again.counts["fetched"] == 0 and again.counts["added"] == 0
    assert len(await memories(db_dsn, "tasks")) == len(rows)

    # the description edited and a comment added: one revision, one new memory, the old comment kept
    def change(d: dict) -> None:
        d["tasks"][0] |= {"description": "<p>Move billing to PostgreSQL 17 instead.</p>", "updated": at(20)}
        d["comments"]["1"].append(comment(8, "Under five seconds, agreed with finance.", ANN, hours=30))

    edit_state(state, change)
    edited = await hub.sync("root", "team-tasks")
    assert edited.counts["unchanged"] == 4 and edited.counts["fetched"] == 1
    assert edited.counts["revised"] == 1 and edited.counts["added"] == 1 and edited.counts["kept"] == 1
    after = {r["id"]: r for r in await memories(db_dsn, "tasks")}
    old = after[body["id"]]
    assert old["invalid_at"] is not None and old["superseded_by"] is not None
    new = after[old["superseded_by"]]
    assert "PostgreSQL 17 instead" in new["content"] and new["invalid_at"] is None
    assert new["source_ref"].startswith(f"{url}/tasks/1@{at(20)}#")
    assert after[said["id"]]["invalid_at"] is None  # the unchanged comment stays as it was
    current = [r for r in after.values() if r["invalid_at"] is None]
    reply = next(r for r in current if "Under five seconds" in r["content"])
    reply_meta = json.loads(reply["metadata"])
    assert (
        reply_meta["speaker"] == "Ann Lee" and reply_meta["thread"] == "tasks/1" and reply_meta["anchor"] == "comment-8"
    )
    assert not any("PostgreSQL 13" in r["content"] for r in current)

    # the task deleted at the source: its description and both comments are forgotten, the rows kept
    edit_state(state, lambda d: d.update(tasks=[t for t in d["tasks"] if t["id"] != 1]))
    deleted = await hub.sync("root", "team-tasks")
    assert deleted.counts["listed"] == 4 and deleted.counts["deleted"] == 1 and deleted.counts["forgotten"] == 3
    rows = await memories(db_dsn, "tasks")
    assert len(rows) == len(after)
    forgotten = [r for r in rows if r["id"] in (new["id"], said["id"], reply["id"])]  # the kept comment too
    assert len(forgotten) == 3 and all(r["invalid_at"] is not None for r in forgotten)
    assert all("deleted at the source" in json.loads(r["metadata"])["forget_reason"] for r in forgotten)
    assert not any("billing" in r["content"] for r in rows if r["invalid_at"] is None)
    runs = await hub.runs("root", "team-tasks")
    assert [r["status"] for r in runs] == ["done"] * 4
    assert (await hub.get("root", "team-tasks")).status == "ok"


async def test_rate_limits_and_server_errors_are_waited_out(hub: Connectors, vikunja, db_dsn: str) -> None:
    url, state = vikunja
    await hub.add("root", "team-tasks", "vikunja", "tasks", _config(url))
    edit_state(
        state,
        lambda d: d.update(
            faults=[
                {"status": 429, "times": 1, "retry_after": 2, "match": "/projects"},
                {"status": 503, "times": 2, "match": "/comments"},
            ]
        ),
    )
    report = await hub.sync("root", "team-tasks")
    assert report.status == "done" and report.counts["listed"] == 5 and report.counts["fetched"] == 5
    assert len(hub.waits) == 3 and max(hub.waits) >= 2  # type: ignore[attr-defined]
    assert len(await memories(db_dsn, "tasks")) == 6


async def test_a_refused_token_stops_the_connector(hub: Connectors, vikunja) -> None:
    url, _ = vikunja
    # a token revoked after the connector was added (one refused then is refused then)
    await hub.add("root", "team-tasks", "vikunja", "tasks", _config(url, "OLD_TOKEN"), check=False)
    with pytest.raises(SourceAuthError, match="OLD_TOKEN"):
        await hub.sync("root", "team-tasks")
    connector = await hub.get("root", "team-tasks")
    assert connector.status == "stopped" and "OLD_TOKEN" in (connector.last_error or "")
    assert hub.waits == []  # type: ignore[attr-defined]


async def test_a_killed_vikunja_sync_resumes_without_duplicates(
    hub: Connectors, vikunja, db_dsn: str, home: Path
) -> None:
    url, state = vikunja
    many = [task(i, description=f"<p>Step {i} of the rollout: migrate shard {i}.</p>") for i in range(1, 10)]
    edit_state(state, lambda d: d.update(projects=[project(1, "Ops")], tasks=many, comments={}))
    await hub.add("root", "team-tasks", "vikunja", "tasks", _config(url))
    env = cli_env(database_url=db_dsn, home=str(home), connector_batch="2")
    crashed = run_cli_process(
        "connectors",
        "sync",
        "team-tasks",
        env={**env, "VIKUNJA_TOKEN": TOKEN, "CABRAIN_FAILPOINTS": "connector.after_write"},
    )
    assert crashed.returncode == 137, crashed.stderr
    await crashed_sessions_gone(db_dsn)  # its sync lock, let go when the server sees it gone
    assert 0 < len(await memories(db_dsn, "tasks")) < 10
    report = await hub.sync("root", "team-tasks")
    assert report.status == "done" and report.counts["listed"] == 10
    current = [r["content"] for r in await memories(db_dsn, "tasks") if r["invalid_at"] is None]
    assert len(current) == len(set(current)) == 10  # the project and its nine tasks, each once
    assert all(any(f"migrate shard {i}." in c for c in current) for i in range(1, 10))
    runs = await hub.runs("root", "team-tasks")
    assert [r["status"] for r in runs] == ["done", "interrupted"]  # the killed run, found by the next


async def test_a_vikunja_instance_is_checked_when_added(hub: Connectors, vikunja) -> None:
    url, _ = vikunja
    with pytest.raises(SourceAuthError, match=r"not added: .*OLD_TOKEN was refused") as refused:
        await hub.add("root", "team-tasks", "vikunja", "tasks", _config(url, "OLD_TOKEN"))
    assert "--no-check" in (refused.value.hint or "")
    with pytest.raises(SourceError, match="project 42 is not visible") as hidden:
        await hub.add("root", "team-tasks", "vikunja", "tasks", {**_config(url), "projects": [1, 42]})
    assert "share the project" in (hidden.value.hint or "")
    with pytest.raises(SourceError, match="has no Vikunja API") as elsewhere:
        await hub.add("root", "team-tasks", "vikunja", "tasks", _config(f"{url}/vikunja"))
    assert "instance's address" in (elsewhere.value.hint or "")
    assert await hub.listing("root") == []
    made = await hub.add("root", "team-tasks", "vikunja", "tasks", {**_config(url), "projects": [1]})
    assert made.status == "new"
