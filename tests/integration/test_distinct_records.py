"""Records of a structured source are distinct: real public files imported and synced with the write
decisions on hide nothing (issue 32). Before, similarity superseded rules of one SOUL.md by each
other, "Do NOT" rules of an AGENTS.md, a Letta agent's human block by its persona, a claude-mem
observation by its session summary, and a licence's definitions by its grant.

The samples are real files (tests/data/samples/README.md says where each comes from)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from cabrain.connectors.facade import Connectors
from cabrain.portable.facade import Portable
from cabrain.write.tally import REVERT_HINT
from tests.unit.test_importers import CURRENT_SCHEMA

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
HIDDEN = """
SELECT m.content, m.superseded_by, m.metadata ->> 'superseded_reason' AS why FROM memories m
WHERE m.namespace = $1 AND m.invalid_at IS NOT NULL
"""
CURRENT = "SELECT count(*) FROM memories WHERE namespace = $1 AND invalid_at IS NULL"


async def _hidden(brain, namespace: str) -> list[str]:
    async with brain.engine.pool.acquire() as conn:
        return [f"{r['content'][:80]!r} ({r['why']})" for r in await conn.fetch(HIDDEN, namespace)]


async def _current(brain, namespace: str) -> int:
    async with brain.engine.pool.acquire() as conn:
        return int(await conn.fetchval(CURRENT, namespace))


def _claude_mem_database(path: Path) -> Path:
    """A claude-mem database (its own schema) with one session's observation and its summary, which
    say much the same in other words: two records, both kept."""
    db = sqlite3.connect(path)
    db.executescript(CURRENT_SCHEMA)
    db.execute(
        "INSERT INTO observations (memory_session_id, project, type, title, narrative, facts, concepts, files_read,"
        " files_modified, agent_type, merged_into_project, created_at, created_at_epoch)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "mem-7",
            "shop",
            "discovery",
            "Shipping quotes bill the larger of actual and dimensional weight",
            "Shipping quotes bill the larger of actual and dimensional weight, rounded up to the half pound.",
            '["Quotes list only the lines they bill"]',
            '["how-it-works"]',
            '["src/shipping/rate-calculator.ts"]',
            "[]",
            "general-purpose",
            "shop",
            "2025-12-01T08:00:00.000Z",
            1764576000000,
        ),
    )
    db.execute(
        "INSERT INTO session_summaries (memory_session_id, project, request, learned, created_at, created_at_epoch)"
        " VALUES ('mem-7', 'shop', 'Explain how shipping quotes are billed', ?, ?, ?)",
        (
            "Shipping quotes now bill the larger of actual and dimensional weight, rounded up to the whole pound.",
            "2025-12-01T08:30:00.000Z",
            1764577800000,
        ),
    )
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize(
    ("fmt", "sample"),
    [
        ("markdown", "agent-workspace"),  # SOUL.md, AGENTS.md, USER.md ... of an agent's workspace
        ("markdown", "agents-md/AGENTS.md"),  # a project's rules, many of them "Never ..." / "Do not ..."
        ("letta", "letta/memgpt_agent.af"),  # a Letta agent file: persona and human blocks
        ("claude-mem", None),  # a claude-mem database: an observation and its session summary
    ],
)
async def test_an_import_with_decisions_hides_no_distinct_record(brain, tmp_path: Path, fmt, sample) -> None:
    path = SAMPLES / sample if sample else _claude_mem_database(tmp_path / "claude-mem.db")
    namespace = f"rec-{fmt}"
    await brain.create_namespace("alice", namespace)
    report = await Portable(brain.engine).import_file("alice", fmt, path, namespace, decide=True)
    assert report.read >= 2, report
    assert await _hidden(brain, namespace) == []
    assert (report.superseded, report.retracted) == (0, 0), report.reasons
    # a record absorbed only another that says the same: the kept ones are every distinct record
    assert all(why.startswith("merged: says the same") for why in report.reasons), report.reasons
    assert await _current(brain, namespace) == report.added
    assert report.to_json()["revert"] == REVERT_HINT


async def test_a_folder_sync_with_decisions_hides_no_part(brain, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    shutil.copytree(SAMPLES / "docs-folder", folder)  # a project's docs and the Apache License 2.0
    shutil.copytree(SAMPLES / "agent-workspace", folder / "workspace")
    await brain.create_namespace("root", "docs")
    hub = Connectors(brain.engine, environ={}, local_roots=None)
    await hub.add("root", "handbook", "folder", "docs", {"path": str(folder)})
    run = await hub.sync("root", "handbook")
    assert run.status == "done", run
    counts = run.counts
    assert counts["added"] >= 20, counts  # the licence alone is many sections
    assert await _hidden(brain, "docs") == []
    assert (counts["superseded"], counts["retracted"], counts["revised"]) == (0, 0, 0), counts["reasons"]
    assert counts["taken_out"] == []
    assert await _current(brain, "docs") == counts["added"]
