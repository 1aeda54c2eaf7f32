"""Chat exports as people's exports really are, synced on real PostgreSQL (issue 35): a Slack
export's integration posts are kept with their attachments' words; WhatsApp's notices (attachments,
media, calls, deleted messages, system lines) in English and Arabic are no memories; whatever a
source skips is counted by reason in the sync's report, its run record, its output and
``cabrain connectors show``; and messages saying the same words (two people's "ok", one person's
"see you tomorrow" on two days) are each their own memory, which a second sync leaves alone."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cabrain.brain import Brain
from cabrain.connectors.facade import Connectors
from cabrain.types import Decision, MemoryInput
from tests.conftest import cli_env, run_cli
from tests.integration.connector_kit import memories
from tests.unit.test_chat_notices import INTEGRATION, NOTICES, SAMPLES, slack_zip


@pytest.fixture
async def hub(brain: Brain) -> Connectors:
    await brain.create_namespace("root", "chats")
    return Connectors(brain.engine, environ={}, local_roots=None)


def current(rows: list) -> list:
    return [r for r in rows if r["invalid_at"] is None]


async def test_slack_integration_posts_are_kept_and_every_skip_is_counted_and_shown(
    hub: Connectors, tmp_path: Path, db_dsn: str, home: Path
) -> None:
    talk = [{"type": "message", "user": "U01", "text": "Who is on call tonight?", "ts": "1705312700.000050"}]
    export = slack_zip(tmp_path / "acme.zip", {"ops/2024-01-15.json": talk + INTEGRATION})
    await hub.add("root", "acme-slack", "slack-export", "chats", {"path": str(export)})
    said: list[str] = []
    report = await hub.sync("root", "acme-slack", say=said.append)
    assert report.status == "done" and report.counts["listed"] == 6 and report.counts["added"] == 6
    assert report.counts["skipped"] == {"file": 1, "system": 1, "deleted": 1}
    rows = {r["content"]: json.loads(r["metadata"]) for r in current(await memories(db_dsn, "chats"))}
    alert = next(c for c in rows if c.startswith("New alert from Grafana"))
    assert "Disk almost full" in alert and "Severity: high" in alert and rows[alert]["speaker"] == "Grafana"
    assert rows["Build #412 passed on main"]["speaker"] == "CI"
    assert any("acme-slack: skipped 3: 1 deleted, 1 file, 1 system" in line for line in said)

    # the run record keeps it; `connectors show` says it
    [run] = await hub.runs("root", "acme-slack")
    assert run["counts"]["skipped"] == {"file": 1, "system": 1, "deleted": 1}
    shown = run_cli(
        "connectors", "show", "acme-slack", "--as", "root", env=cli_env(database_url=db_dsn, home=str(home))
    )
    assert shown.returncode == 0, shown.stderr
    assert "skipped 3: 1 deleted, 1 file, 1 system" in shown.stdout
    assert "{" not in shown.stdout.split("last sync:")[1]  # counts in words, not a dict's repr

    # a second sync lists the same export: nothing written, the same skips counted again
    again = await hub.sync("root", "acme-slack")
    assert again.counts["unchanged"] == 6 and again.counts["added"] == 0
    assert again.counts["skipped"] == {"file": 1, "system": 1, "deleted": 1}


async def test_whatsapp_notices_in_english_and_arabic_are_no_memories(
    hub: Connectors, tmp_path: Path, db_dsn: str
) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    for name in NOTICES:
        shutil.copy(SAMPLES / name, folder / name)
    await hub.add("root", "phones", "whatsapp", "chats", {"path": str(folder), "timezone": "Asia/Riyadh"})
    report = await hub.sync("root", "phones")
    kept = sorted(text for messages, _ in NOTICES.values() for _, text in messages)
    assert report.status == "done" and report.counts["listed"] == len(kept) == 11
    assert sorted(r["content"] for r in current(await memories(db_dsn, "chats"))) == kept
    total: dict[str, int] = {}
    for _, skipped in NOTICES.values():
        for why, n in skipped.items():
            total[why] = total.get(why, 0) + n
    assert report.counts["skipped"] == total
    assert total == {"system": 5, "attachment": 5, "media": 5, "call": 10, "deleted": 7}
    contents = " ".join(r["content"] for r in await memories(db_dsn, "chats"))
    for notice in ("المُرفق", "attached", "omitted", "مكالمة", "call,", "deleted", "حذف", "(file attached)"):
        assert notice not in contents


async def test_the_same_words_from_different_people_or_times_are_each_a_memory(hub: Connectors, db_dsn: str) -> None:
    await hub.add("root", "repeats", "whatsapp", "chats", {"path": str(SAMPLES / "ios-en-repeats.txt")})
    first = await hub.sync("root", "repeats")
    assert first.counts["listed"] == 6 and first.counts["added"] == 6 and first.counts["duplicates"] == 0
    rows = current(await memories(db_dsn, "chats"))
    said = sorted((json.loads(r["metadata"])["speaker"], r["content"], r["valid_at"]) for r in rows)
    assert [(who, text) for who, text, _ in said] == [
        ("Dana", "ok"),
        ("Dana", "ok"),
        ("Dana", "see you tomorrow"),
        ("Omar", "ok"),
        ("Omar", "see you tomorrow"),
        ("Omar", "see you tomorrow"),
    ]
    again = await hub.sync("root", "repeats")
    assert again.counts["unchanged"] == 6 and again.counts["added"] == 0
    assert len(await memories(db_dsn, "chats")) == 6


async def test_turns_sharing_a_source_are_distinct_moments_and_the_same_turn_again_is_the_same_memory(
    brain: Brain, db_dsn: str
) -> None:
    """A chat retained turn by turn under its file's name: identical words from two speakers, or
    from one speaker at two times, are two memories; the same turn written again (the same speaker,
    time and thread) is the memory it was; a note without a speaker is still stored once."""
    start = datetime(2024, 2, 3, 9, tzinfo=UTC)
    chat = [
        ("Dana", "ok", 0),
        ("Omar", "ok", 4),
        ("Dana", "ok", 930),
        ("Omar", "see you tomorrow", 31500),
        ("Dana", "see you tomorrow", 31509),
        ("Omar", "see you tomorrow", 118200),
    ]

    def turns() -> list[MemoryInput]:
        return [
            MemoryInput(
                text,
                "proj",
                source_kind="chat",
                source_ref="WhatsApp Chat with Ops.txt",
                valid_at=start + timedelta(seconds=s),
                metadata={"speaker": who, "thread": "Ops"},
            )
            for who, text, s in chat
        ]

    for decide in (True, False):  # the write decisions, and a bulk import's write without them
        namespace = "chat-decided" if decide else "chat-bulk"
        await brain.create_namespace("alice", namespace)
        batch = [dataclasses.replace(t, namespace=namespace) for t in turns()]
        first = await brain.retain("alice", batch, decide=decide)
        assert [r.decision for r in first] == [Decision.ADD] * 6
        assert len({r.memory_id for r in first}) == 6
        again = await brain.retain("alice", batch, decide=decide)
        assert [r.decision for r in again] == [Decision.NOOP] * 6
        assert [r.memory_id for r in again] == [r.memory_id for r in first]

    note = MemoryInput("The API listens on port 8000.", "proj", source_ref="notes.md")
    [a] = await brain.retain("alice", [note])
    [b] = await brain.retain("alice", [note])
    assert (a.decision, b.decision, b.memory_id) == (Decision.ADD, Decision.NOOP, a.memory_id)
