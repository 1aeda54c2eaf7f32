"""The GitLab connector end to end: python-gitlab against the GitLab stand-in on loopback
(tests/fakes/gitlab_server.py), into real PostgreSQL. Issues with their comments, merge requests
and wiki pages: first sync, a no-op resync, an edited description, a new comment, a deleted issue,
a rate limit and server errors retried, a sync killed midway and resumed, a refused token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cabrain.connectors.facade import Connectors
from cabrain.errors import SourceAuthError, SourceError
from tests.conftest import brings, cli_env, crashed_sessions_gone, run_cli_process, start_fake
from tests.integration.connector_kit import edit_state, memories, recorded_hub
from tests.unit.test_gitlab_source import ANN, BO, TOKEN, at, issue, project


@pytest.fixture
@brings("subprocess")
def gitlab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"projects": [project(4)], "faults": []}))
    proc, port = start_fake("gitlab_server", "--state", str(state), "--token", TOKEN)
    yield f"http://127.0.0.1:{port}", state
    proc.terminate()
    proc.wait(10)


@pytest.fixture
async def hub(brain) -> Connectors:
    made, waits = await recorded_hub(brain, "app", {"GITLAB_TOKEN": TOKEN, "OLD_TOKEN": "expired"})
    made.waits = waits  # type: ignore[attr-defined]
    return made


def _config(url: str, env: str = "GITLAB_TOKEN") -> dict:
    return {"url": url, "project": "team/app", "token_env": env}


async def test_issues_comments_and_wiki_sync_incrementally(hub: Connectors, gitlab, db_dsn: str, brain) -> None:
    url, state = gitlab
    edit_state(
        state,
        lambda d: d["projects"][0]["notes"].update(
            {
                "issues/2": [
                    {"id": 21, "body": "Seen on Safari 17 only.", "system": False, "author": BO, "created_at": at(3)},
                    {"id": 22, "body": "changed the description", "system": True, "author": ANN, "created_at": at(3.1)},
                ]
            }
        ),
    )
    await hub.add("root", "app-gitlab", "gitlab", "app", _config(url))
    first = await hub.sync("root", "app-gitlab")
    assert first.status == "done", first.error
    assert first.counts["listed"] == 4 + 2 + 2  # issues, merge requests, wiki pages
    rows = await memories(db_dsn, "app")
    comment = next(r for r in rows if "Safari 17" in r["content"])
    meta = json.loads(comment["metadata"])
    assert meta["speaker"] == "Bo Park" and meta["thread"] == "issue #2" and meta["anchor"] == "note-21"
    assert comment["source_ref"].startswith(f"{url}/team/app/-/issues/2@")
    assert not any("changed the description" in r["content"] for r in rows)  # system notes stay out
    assert any("fix-login" in r["content"] for r in rows)  # a merge request's branches
    assert any("Rollback" in r["content"] for r in rows)  # a wiki page's section

    again = await hub.sync("root", "app-gitlab")
    assert again.counts["unchanged"] == 8 and again.counts["fetched"] == 0 and again.counts["added"] == 0
    assert len(await memories(db_dsn, "app")) == len(rows)

    # a description edited and a comment added: one revision, one new memory, the old comment kept
    def change(d: dict) -> None:
        p = d["projects"][0]
        p["issues"][1] |= {"description": "The login page loops on Safari 17 and 18.", "updated_at": at(9)}
        p["notes"]["issues/2"].append(
            {"id": 23, "body": "Fixed by !1, please verify.", "system": False, "author": ANN, "created_at": at(10)}
        )

    edit_state(state, change)
    edited = await hub.sync("root", "app-gitlab")
    assert edited.counts["fetched"] == 1
    assert edited.counts["revised"] == 1 and edited.counts["added"] == 1 and edited.counts["kept"] == 1
    current = [r for r in await memories(db_dsn, "app") if r["invalid_at"] is None]
    assert any("Safari 17 and 18" in r["content"] for r in current)
    assert any("please verify" in r["content"] for r in current)

    # an issue deleted at the source: its description and comments are forgotten
    edit_state(
        state, lambda d: d["projects"][0].update(issues=[i for i in d["projects"][0]["issues"] if i["iid"] != 2])
    )
    deleted = await hub.sync("root", "app-gitlab")
    assert deleted.counts["deleted"] == 1 and deleted.counts["forgotten"] == 3
    current = [r for r in await memories(db_dsn, "app") if r["invalid_at"] is None]
    assert not any("Safari" in r["content"] for r in current)


async def test_rate_limits_and_server_errors_are_waited_out(hub: Connectors, gitlab, db_dsn: str) -> None:
    url, state = gitlab
    edit_state(
        state,
        lambda d: d.update(
            faults=[
                {"status": 429, "times": 1, "retry_after": 2, "match": "/issues"},
                {"status": 503, "times": 2, "match": "/wikis"},
            ]
        ),
    )
    await hub.add("root", "app-gitlab", "gitlab", "app", _config(url))
    report = await hub.sync("root", "app-gitlab")
    assert report.status == "done" and report.counts["listed"] == 8
    assert len(hub.waits) == 3 and max(hub.waits) >= 2  # type: ignore[attr-defined]


async def test_a_refused_token_stops_the_connector(hub: Connectors, gitlab) -> None:
    url, _ = gitlab
    # a token revoked after the connector was added (one refused then is refused then)
    await hub.add("root", "app-gitlab", "gitlab", "app", _config(url, "OLD_TOKEN"), check=False)
    with pytest.raises(SourceAuthError, match="OLD_TOKEN"):
        await hub.sync("root", "app-gitlab")
    connector = await hub.get("root", "app-gitlab")
    assert connector.status == "stopped" and "OLD_TOKEN" in (connector.last_error or "")


async def test_a_killed_gitlab_sync_resumes_without_duplicates(
    hub: Connectors, gitlab, db_dsn: str, home: Path
) -> None:
    url, state = gitlab
    edit_state(state, lambda d: d["projects"][0].update(issues=[issue(i) for i in range(1, 10)]))
    await hub.add("root", "app-gitlab", "gitlab", "app", _config(url))
    env = cli_env(database_url=db_dsn, home=str(home), connector_batch="4")
    crashed = run_cli_process(
        "connectors",
        "sync",
        "app-gitlab",
        env={**env, "GITLAB_TOKEN": TOKEN, "CABRAIN_FAILPOINTS": "connector.after_write"},
    )
    assert crashed.returncode == 137, crashed.stderr
    await crashed_sessions_gone(db_dsn)  # its sync lock, let go when the server sees it gone
    assert 0 < len(await memories(db_dsn, "app"))
    report = await hub.sync("root", "app-gitlab")
    assert report.status == "done"
    current = [r["content"] for r in await memories(db_dsn, "app") if r["invalid_at"] is None]
    assert len(current) == len(set(current))
    # nine issues, and the two merge requests the stand-in's project makes from the same template
    assert sum(f"What issue {i} is about." in c for c in current for i in range(1, 10)) == 9 + 2


async def test_a_gitlab_project_is_checked_when_added(hub: Connectors, gitlab) -> None:
    url, _ = gitlab
    with pytest.raises(SourceAuthError, match=r"not added: .*refused the token .*OLD_TOKEN") as refused:
        await hub.add("root", "app-gitlab", "gitlab", "app", _config(url, "OLD_TOKEN"))
    assert "read_api" in (refused.value.hint or "") and "--no-check" in (refused.value.hint or "")
    with pytest.raises(SourceError, match="no project 'team/nope'") as missing:
        await hub.add("root", "app-gitlab", "gitlab", "app", {**_config(url), "project": "team/nope"})
    assert missing.value.status_code == 404 and "group/name" in (missing.value.hint or "")
    with pytest.raises(SourceAuthError, match="without a token"):
        await hub.add("root", "app-gitlab", "gitlab", "app", {"url": url, "project": "team/app"})
    assert await hub.listing("root") == []
    assert (await hub.add("root", "app-gitlab", "gitlab", "app", _config(url))).status == "new"
