"""Other tools' files imported as people's files really are (issue 35), on real PostgreSQL: keys
scoped to their source (a second agent file, a second project's CLAUDE.md are stored), a re-import
that revises what changed (revertibly), a mirror that forgets what is gone, a dry run that writes
nothing, and every skip counted by its reason.

Built from the real public samples in tests/data/samples (README.md names each one's source and
licence): Letta's memgpt_agent.af, OpenClaw's workspace templates, openai/codex's AGENTS.md."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from cabrain.portable.facade import Portable
from cabrain.types import RecallQuery
from tests.conftest import cli_env, run_cli

SAMPLES = Path(__file__).parent.parent / "data" / "samples"


async def _current(brain, fmt: str) -> list[dict]:
    async with brain.engine.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, content, source_ref, metadata FROM memories WHERE namespace = 'proj' AND source_kind = $1 "
            "AND invalid_at IS NULL ORDER BY source_ref",
            f"import:{fmt}",
        )
    return [dict(r) for r in rows]


async def _counts(brain) -> tuple[int, int, int]:
    async with brain.engine.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT count(*) AS all_, count(*) FILTER (WHERE invalid_at IS NULL) AS current, "
            "(SELECT count(*) FROM judgments) AS judged FROM memories"
        )
    return row["all_"], row["current"], row["judged"]


def _letta(tmp_path: Path, name: str, human: str | None = None) -> Path:
    """The real memgpt_agent.af, as another agent's export (Letta renumbers ids agent-0, block-0 in
    every file: only the name tells agents apart)."""
    data = json.loads((SAMPLES / "letta" / "memgpt_agent.af").read_text(encoding="utf-8"))
    data["agents"][0]["name"] = name
    for block in data["blocks"]:
        block["value"] = f"{block['value']}\n(kept by {name})"
        if human is not None and block["label"] == "human":
            block["value"] = human
    path = tmp_path / f"{name}.af"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


async def test_a_second_agent_file_and_a_second_projects_claude_md_are_stored(brain, tmp_path: Path) -> None:
    hub = Portable(brain.engine)
    first = await hub.import_file("alice", "letta", _letta(tmp_path, "memgpt_agent"), "proj")
    second = await hub.import_file("alice", "letta", _letta(tmp_path, "support_agent"), "proj")
    assert first.added == second.added == 2 and second.already == 0, second
    assert {m["source_ref"] for m in await _current(brain, "letta")} == {
        "letta agent memgpt_agent#block:human",
        "letta agent memgpt_agent#block:persona",
        "letta agent support_agent#block:human",
        "letta agent support_agent#block:persona",
    }
    # the same agent's newer export (another file) is the same source: nothing new
    again = await hub.import_file("alice", "letta", _letta(tmp_path / "..", "memgpt_agent"), "proj")
    assert again.added == 0 and again.already == 2

    projects = []
    for project, overview in (("billing", "Billing computes invoices nightly."), ("search", "Search ranks by BM25.")):
        folder = tmp_path / project
        folder.mkdir()
        (folder / "CLAUDE.md").write_text(f"# Project Overview\n\n{overview}\n\n## Testing\n\nRun scripts/test.\n")
        projects.append(await hub.import_file("alice", "markdown", folder / "CLAUDE.md", "proj"))
    assert projects[1].added + projects[1].duplicates == 2 and projects[1].already == 0, projects[1]
    overviews = [m["content"] for m in await _current(brain, "markdown") if "Testing" not in m["content"]]
    assert sorted(overviews) == [
        "Project Overview\n\nBilling computes invoices nightly.",
        "Project Overview\n\nSearch ranks by BM25.",
    ]


async def test_a_newer_version_of_a_record_revises_its_memory_and_the_revision_reverts(brain, tmp_path: Path) -> None:
    hub = Portable(brain.engine)
    export = {
        "results": [
            {
                "id": "9a1e2c1e-5c7e-4a39-9a6e-2f3b1d1f0001",
                "memory": "Lives in Boston",
                "created_at": "2025-03-01T09:00:00-07:00",
                "updated_at": None,
                "user_id": "sara",
            },
            {
                "id": "9a1e2c1e-5c7e-4a39-9a6e-2f3b1d1f0002",
                "memory": "Prefers tea over coffee in the afternoon",
                "created_at": "2025-03-01T09:00:00-07:00",
                "user_id": "sara",
            },
        ]
    }
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(export))
    await hub.import_file("alice", "mem0", path, "proj")
    newer = copy.deepcopy(export)
    newer["results"][0].update(memory="Moved to Lisbon in May", updated_at="2025-06-01T10:00:00-07:00")
    path.write_text(json.dumps(newer))
    report = await hub.import_file("alice", "mem0", path, "proj")
    assert (report.revised, report.already, report.added) == (1, 1, 0), report
    current = await _current(brain, "mem0")
    assert sorted(m["content"] for m in current) == [
        "Moved to Lisbon in May",
        "Prefers tea over coffee in the afternoon",
    ]
    lisbon = next(m for m in current if "Lisbon" in m["content"])
    assert lisbon["source_ref"] == "mem0 user sara#9a1e2c1e-5c7e-4a39-9a6e-2f3b1d1f0001"
    [old_id] = report.taken_out
    judgments = await brain.judgments("alice", lisbon["id"])
    assert any("re-imported mem0 source" in (j.get("reason") or "") for j in judgments), judgments
    # the revision is a judgment: reverted by the id the report lists, Boston is current again
    await brain.revert("alice", memory_id=old_id)
    assert "Lives in Boston" in [m["content"] for m in await _current(brain, "mem0")]
    assert str(old_id) in {str(m["id"]) for m in await _current(brain, "mem0")}


async def test_an_edited_section_and_an_edited_bullet_revise_and_only_the_new_one_is_current(
    brain, tmp_path: Path
) -> None:
    hub = Portable(brain.engine)
    workspace = tmp_path / "workspace"
    shutil.copytree(SAMPLES / "agent-workspace", workspace)
    identity = workspace / "IDENTITY.md"
    filled = identity.read_text().replace("- **Name:**\n", "- **Name:** Clawd\n")
    identity.write_text(filled)
    memory = workspace / "MEMORY.md"
    bullets = ["Timezone: America/New_York", "Editor: Helix", "Shell: fish", "Coffee: black", "Standup: 9:30"]
    memory.write_text("# About Sara\n\n" + "".join(f"- {b}\n" for b in bullets) + "- **Pets:**\n")
    first = await hub.import_file("alice", "markdown", workspace, "proj")
    assert first.skipped["empty template field"] == 5 + 4 + 1, first.skipped  # USER.md, IDENTITY.md, MEMORY.md

    identity.write_text(filled.replace("Clawd", "Molty"))
    memory.write_text(memory.read_text().replace("America/New_York", "Europe/Berlin"))
    again = await hub.import_file("alice", "markdown", workspace, "proj")
    assert again.revised == 2 and again.added == 0, again
    current = [m["content"] for m in await _current(brain, "markdown")]
    assert sum("Timezone" in c for c in current) == 1 and any("Europe/Berlin" in c for c in current)
    assert any("Molty" in c for c in current) and not any("Clawd" in c for c in current)
    assert not any(c.rstrip().endswith("**Pets:**") for c in current)
    hits = await brain.recall("alice", RecallQuery("which timezone is Sara in", "proj", k=3))
    assert "Europe/Berlin" in hits.hits[0].memory.content


async def test_a_linked_claude_md_is_the_file_it_names(brain, tmp_path: Path) -> None:
    hub = Portable(brain.engine)
    agents = tmp_path / "AGENTS.md"
    shutil.copy(SAMPLES / "agents-md" / "AGENTS.md", agents)
    (tmp_path / "CLAUDE.md").symlink_to("AGENTS.md")
    first = await hub.import_file("alice", "markdown", agents, "proj")
    linked = await hub.import_file("alice", "markdown", tmp_path / "CLAUDE.md", "proj")
    assert first.added > 0 and linked.added == 0 and linked.already == first.read, linked
    folder = await hub.import_file("alice", "markdown", tmp_path, "proj", source="the repo")
    assert folder.skipped == {"a link (not followed: its target is read where it is)": 1}, folder.skipped


async def test_mirror_forgets_what_the_source_no_longer_holds_and_a_dry_run_writes_nothing(
    brain, tmp_path: Path
) -> None:
    hub = Portable(brain.engine)
    memories = [
        {"id": f"9a7c2d10-0000-4000-8000-00000000000{i}", "user_id": "u1", "content": text, "state": state}
        for i, (text, state) in enumerate(
            [
                ("Prefers Ruff over Black for formatting", "active"),
                ("Deploys on Tuesdays", "active"),
                ("Used to work at Initech", "deleted"),
                ("Was on the Atlas project", "archived"),
                ("Drafting the Q3 plan", "paused"),
            ]
        )
    ]
    export = {"user": {"id": "u1", "user_id": "sara"}, "memories": memories}
    path = tmp_path / "memories.json"
    path.write_text(json.dumps(export))

    before = await _counts(brain)
    dry = await hub.import_file("alice", "mem0", path, "proj", dry_run=True)
    assert (
        dry.dry_run
        and dry.added == 2
        and dry.skipped
        == {
            "deleted": 1,
            "archived in OpenMemory (not current)": 1,
            "paused in OpenMemory (not current)": 1,
        }
    )
    assert await _counts(brain) == before

    await hub.import_file("alice", "mem0", path, "proj")
    export["memories"] = [memories[0] | {"content": "Prefers Ruff for formatting and linting"}]
    path.write_text(json.dumps(export))
    before = await _counts(brain)
    plan = await hub.import_file("alice", "mem0", path, "proj", mirror=True, dry_run=True)
    assert (plan.revised, plan.forgotten, plan.added) == (1, 1, 0), plan
    assert await _counts(brain) == before
    done = await hub.import_file("alice", "mem0", path, "proj", mirror=True)
    assert (done.revised, done.forgotten) == (1, 1) and len(done.forgotten_ids) == 1
    assert [m["content"] for m in await _current(brain, "mem0")] == ["Prefers Ruff for formatting and linting"]
    gone = await brain.get("alice", done.forgotten_ids[0])
    assert gone.memory.content == "Deploys on Tuesdays" and gone.memory.invalid_at is not None


async def test_the_command_line_shows_a_dry_run_and_a_revision_once(brain, db_dsn: str, home: Path, tmp_path) -> None:
    env = cli_env(database_url=db_dsn, home=str(home))
    soul = tmp_path / "SOUL.md"
    shutil.copy(SAMPLES / "agent-workspace" / "SOUL.md", soul)
    dry = run_cli("import", "markdown", str(soul), "-n", "proj", "--as", "alice", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "(dry run: nothing written)" in dry.stdout and "would be added" in dry.stdout
    assert await _current(brain, "markdown") == []
    first = run_cli("import", "markdown", str(soul), "-n", "proj", "--as", "alice", env=env)
    assert first.stdout.count("records read") == 1 and first.stderr.count("records read") == 0, first
    soul.write_text(soul.read_text().replace("Concise when needed", "Brief when needed"))
    again = run_cli("import", "markdown", str(soul), "-n", "proj", "--as", "alice", env=env)
    assert "0 added, 1 revised" in again.stdout and "cabrain revert" in again.stdout, again.stdout


@pytest.mark.parametrize("fmt", ["letta", "mem0"])
async def test_an_import_named_by_source_keeps_its_own_keys(brain, tmp_path: Path, fmt: str) -> None:
    hub = Portable(brain.engine)
    path = _letta(tmp_path, "memgpt_agent") if fmt == "letta" else tmp_path / "m.json"
    if fmt == "mem0":
        path.write_text(
            json.dumps(
                [
                    {"id": "m-1", "memory": "Likes jazz", "user_id": "sara"},
                    {"id": "m-2", "memory": "Owns a cat", "user_id": "sara"},
                ]
            )
        )
    await hub.import_file("alice", fmt, path, "proj")
    named = await hub.import_file("alice", fmt, path, "proj", source="sandbox copy")
    assert named.already == 0 and all(
        m["source_ref"].startswith(("sandbox copy#", "letta", "mem0")) for m in await _current(brain, fmt)
    )
    assert named.added + named.duplicates == named.read


async def test_a_groups_bullets_pair_within_their_own_source_and_across_batches(brain, tmp_path: Path) -> None:
    from cabrain import importers
    from cabrain.portable.imports import import_parsed

    files = []
    for project in ("billing", "search"):
        (tmp_path / project).mkdir()
        path = tmp_path / project / "CLAUDE.md"
        rules = [f"Rule {n}: keep {project} module {n} under 500 lines" for n in range(7)]
        path.write_text("# Rules\n\n" + "".join(f"- {r}\n" for r in rules))
        files.append(path)

    async def run(path: Path):
        parsed = importers.parse("markdown", path)
        return await import_parsed(brain.engine, "alice", "proj", "markdown", parsed, source=str(path), batch=2)

    for path in files:
        assert (await run(path)).added == 7
    files[0].write_text(files[0].read_text().replace("billing module 5 under 500", "billing module 5 under 400"))
    again = await run(files[0])
    assert (again.revised, again.added, again.already) == (1, 0, 6), again  # its rules came in batches of two
    current = [m["content"] for m in await _current(brain, "markdown")]
    assert sorted(c for c in current if "module 5 under" in c) == [
        "Rules\n\nRule 5: keep billing module 5 under 400 lines",
        "Rules\n\nRule 5: keep search module 5 under 500 lines",  # the other project's rule, untouched
    ]
    assert (await run(files[1])).already == 7


async def test_bad_import_options_are_refused_and_write_nothing(brain, tmp_path: Path) -> None:
    from cabrain.errors import InputError

    hub = Portable(brain.engine)
    path = tmp_path / "m.json"
    path.write_text(json.dumps([{"id": "m-1", "memory": "Likes jazz", "user_id": "sara"}]))
    before = await _counts(brain)
    with pytest.raises(InputError, match="--source names the source"):
        await hub.import_file("alice", "mem0", path, "proj", source="  ")
    with pytest.raises(InputError, match="not a CaBrain export"):
        await hub.import_file("alice", "cabrain", path, None, mirror=True)
    assert await _counts(brain) == before
