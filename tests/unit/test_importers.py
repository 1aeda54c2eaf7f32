"""The importers read other memory tools' exports as they really are: the files below follow the shapes
of mem0 (``Memory.get_all``, the platform API, OpenMemory's backup), claude-mem (its export script and
its SQLite schema), Letta agent files (both schema versions) and Markdown memory files."""

from __future__ import annotations

import gzip
import io
import json
import os
import sqlite3
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cabrain import importers
from cabrain.errors import InputError
from cabrain.importers import claude_mem, letta, markdown, mem0
from cabrain.importers.records import ImportRecord, Parsed, utc
from cabrain.types import MemoryType, Network


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def by_key(parsed: Parsed) -> dict[str, ImportRecord]:
    return {r.key: r for r in parsed.records}


def assert_valid(parsed: Parsed) -> None:
    """Every record holds CaBrain's vocabulary and aware UTC times."""
    for r in parsed.records:
        assert r.content.strip()
        assert Network(r.network) and MemoryType(r.memory_type)
        assert r.valid_at is None or r.valid_at.tzinfo == UTC


# --- the registry ------------------------------------------------------------------------------------


def test_an_unknown_format_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(InputError) as err:
        importers.parse("chatgpt", tmp_path)
    assert "chatgpt" in err.value.message
    assert err.value.hint is not None and "claude-mem" in err.value.hint and "mem0" in err.value.hint


def test_a_missing_path_is_refused_naming_it(tmp_path):
    with pytest.raises(InputError, match=r"nope\.json"):
        importers.parse("mem0", tmp_path / "nope.json")


def test_every_format_module_names_its_format():
    assert set(importers.FORMATS) == {"mem0", "claude-mem", "letta", "markdown"}
    assert (mem0.FORMAT, claude_mem.FORMAT, letta.FORMAT) == ("mem0", "claude-mem", "letta")


def test_times_are_normalised_to_aware_utc():
    assert utc("2024-07-25T23:57:00.108367-07:00") == datetime(2024, 7, 26, 6, 57, 0, 108367, tzinfo=UTC)
    assert utc("2024-07-25T23:57:00") == datetime(2024, 7, 25, 23, 57, tzinfo=UTC)  # naive: read as UTC
    assert utc("2025-11-04T18:22:31.123Z") == datetime(2025, 11, 4, 18, 22, 31, 123000, tzinfo=UTC)
    assert utc(1730744551123) == utc(1730744551.123) == datetime(2024, 11, 4, 18, 22, 31, 123000, tzinfo=UTC)
    assert utc("") is None and utc("yesterday") is None and utc(None) is None


# --- mem0 --------------------------------------------------------------------------------------------

MEM0_V11 = {
    "results": [
        {
            "id": "f38b689d-6b24-45b7-bced-17fbb4d8bac7",
            "memory": "Is a vegetarian and allergic to nuts",
            "hash": "62bc074f56d1f909f1b4c2b639f56f6a",
            "metadata": {"source": "onboarding"},
            "created_at": "2024-07-25T23:57:00.108347-07:00",
            "updated_at": "2024-07-26T08:10:12.000001-07:00",
            "user_id": "alex",
        },
        {
            "id": "0b1f5a0e-5c64-4d2e-9a38-2d9f1f2c7a11",
            "memory": "يفضّل أليكس الاجتماعات الصباحية والتواصل غير المتزامن",
            "hash": "9f1b4c2b639f56f6a62bc074f56d1f90",
            "metadata": None,
            "created_at": "2024-08-01T09:30:00.000000-07:00",
            "updated_at": None,
            "user_id": "alex",
            "agent_id": "travel-agent",
            "run_id": "trip-planning-42",
        },
        {
            "id": "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f601",
            "memory": "## Summary of the agent's execution history\n1. Searched flights LHR to CDG\n2. Booked the 08:15",
            "hash": "aa",
            "metadata": {"memory_type": "procedural_memory"},
            "created_at": "2024-08-01T10:00:00-07:00",
            "updated_at": "2024-08-01T10:00:00-07:00",
            "agent_id": "travel-agent",
        },
        {"id": "d0000000-0000-4000-8000-000000000000", "memory": "   ", "user_id": "alex"},
    ],
    "relations": [{"source": "alex", "relationship": "allergic_to", "target": "nuts"}],
}


def test_mem0_get_all_v1_1_results(tmp_path):
    parsed = mem0.parse(write(tmp_path / "mem0.json", MEM0_V11))
    records = by_key(parsed)
    assert list(records) == [
        "f38b689d-6b24-45b7-bced-17fbb4d8bac7",
        "0b1f5a0e-5c64-4d2e-9a38-2d9f1f2c7a11",
        "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f601",
    ]
    first = records["f38b689d-6b24-45b7-bced-17fbb4d8bac7"]
    assert first.content == "Is a vegetarian and allergic to nuts"
    assert first.valid_at == datetime(2024, 7, 26, 15, 10, 12, 1, tzinfo=UTC)  # updated_at, -07:00 to UTC
    assert (first.author, first.thread, first.network, first.memory_type) == ("alex", None, "fact", "semantic")
    assert first.metadata["metadata"] == {"source": "onboarding"}
    assert first.ref == "mem0:f38b689d-6b24-45b7-bced-17fbb4d8bac7"
    arabic = records["0b1f5a0e-5c64-4d2e-9a38-2d9f1f2c7a11"]
    assert arabic.content.startswith("يفضّل أليكس")
    assert (arabic.author, arabic.thread) == ("travel-agent", "trip-planning-42")  # the agent, the run
    assert arabic.valid_at == datetime(2024, 8, 1, 16, 30, tzinfo=UTC)  # no updated_at: created_at
    procedural = records["c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f601"]
    assert (procedural.network, procedural.memory_type) == ("experience", "procedural")
    assert parsed.skipped == {"empty": 1, "graph relations (not memories)": 1}
    assert_valid(parsed)


def test_parse_dispatches_by_format(tmp_path):
    path = write(tmp_path / "mem0.json", MEM0_V11)
    assert importers.parse("mem0", path) == mem0.parse(path)


def test_mem0_keys_are_the_same_on_a_second_parse(tmp_path):
    path = write(tmp_path / "mem0.json", MEM0_V11)
    assert [r.key for r in mem0.parse(path).records] == [r.key for r in mem0.parse(path).records]


def test_mem0_a_bare_list_and_the_platform_v2_page(tmp_path):
    memory = {
        "id": "ea925981-272f-40dd-b576-be64e4871429",
        "memory": "Works at TechCorp as a senior engineer",
        "user_id": "dev",
        "metadata": {"type": "professional"},
        "categories": ["professional_details"],
        "immutable": True,
        "expiration_date": None,
        "created_at": "2025-03-01T12:00:00",  # naive: read as UTC
        "updated_at": "2025-03-01T12:00:00",
    }
    for data in ([memory], {"count": 1, "next": None, "previous": None, "results": [memory]}):
        parsed = mem0.parse(write(tmp_path / "page.json", data))
        [record] = parsed.records
        assert record.metadata["categories"] == ["professional_details"]
        assert record.metadata["immutable"] is True and "expiration_date" not in record.metadata
        assert record.valid_at == datetime(2025, 3, 1, 12, tzinfo=UTC)
        assert parsed.skipped == {}


def test_mem0_a_single_memory_as_memory_get_returns_it(tmp_path):
    memory = {"id": "m9", "memory": "Speaks Portuguese and English", "user_id": "ana", "created_at": 1735689600}
    [record] = mem0.parse(write(tmp_path / "one.json", memory)).records
    assert (record.key, record.valid_at) == ("m9", datetime(2025, 1, 1, tzinfo=UTC))


def test_mem0_a_duplicate_id_is_kept_once(tmp_path):
    memory = {"id": "m1", "memory": "Lives in Lisbon", "user_id": "ana"}
    parsed = mem0.parse(write(tmp_path / "dup.json", [memory, {**memory, "memory": "Lives in Porto"}]))
    assert [r.content for r in parsed.records] == ["Lives in Lisbon"]
    assert parsed.skipped == {"duplicate key": 1}


def openmemory_export() -> dict:
    return {
        "user": {"id": "6c1d0b3e-user", "user_id": "sara", "name": "Sara", "email": None, "metadata": {}},
        "apps": [{"id": "app-1", "owner_id": "6c1d0b3e-user", "name": "cursor", "is_active": True}],
        "categories": [{"id": "cat-1", "name": "work"}, {"id": "cat-2", "name": "preferences"}],
        "memories": [
            {
                "id": "9a7c2d10-0000-4000-8000-000000000001",
                "user_id": "6c1d0b3e-user",
                "app_id": "app-1",
                "content": "Prefers Ruff over Black for formatting",
                "metadata": {},
                "state": "active",
                "created_at": "2025-05-02T08:00:00+00:00",
                "updated_at": "2025-05-03T09:00:00+00:00",
                "archived_at": None,
                "deleted_at": None,
                "category_ids": ["cat-2", "cat-1"],
            },
            {
                "id": "9a7c2d10-0000-4000-8000-000000000002",
                "user_id": "6c1d0b3e-user",
                "app_id": "app-1",
                "content": "Used to work at Initech",
                "metadata": {},
                "state": "deleted",
                "created_at": "2025-01-02T08:00:00+00:00",
                "updated_at": "2025-02-03T09:00:00+00:00",
                "category_ids": [],
            },
        ],
        "memory_categories": [],
        "status_history": [],
        "access_controls": [],
        "export_meta": {"version": "1", "generated_at": "2025-06-01T00:00:00+00:00"},
    }


def test_mem0_openmemory_backup_zip_and_its_memories_json(tmp_path):
    export = openmemory_export()
    lines = b"".join(json.dumps({"id": m["id"], "content": m["content"]}).encode() + b"\n" for m in export["memories"])
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("memories.json", json.dumps(export))
        zf.writestr("memories.jsonl.gz", gzip.compress(lines))
    zipped = tmp_path / "memories_export_sara.zip"
    zipped.write_bytes(archive.getvalue())
    for path in (zipped, write(tmp_path / "memories.json", export)):
        parsed = mem0.parse(path)
        [record] = parsed.records
        assert record.content == "Prefers Ruff over Black for formatting"
        assert record.author == record.metadata["user_id"] == "sara"  # the export's user, not its row id
        assert record.metadata["categories"] == ["preferences", "work"]
        assert record.metadata["app"] == "cursor"
        assert record.valid_at == datetime(2025, 5, 3, 9, tzinfo=UTC)
        assert parsed.skipped == {"deleted": 1}


def test_mem0_openmemory_memories_jsonl_gz(tmp_path):
    lines = [
        {"id": "a1", "content": "Deploys on Fridays are forbidden", "categories": ["work"], "state": "active"},
        {"id": "a2", "content": "Has a cat named Miso", "categories": [], "state": "paused", "app": "claude"},
    ]
    path = tmp_path / "memories.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(json.dumps(x) for x in lines).encode()))
    parsed = mem0.parse(path)
    assert [r.key for r in parsed.records] == ["a1"]  # a paused memory is not served by OpenMemory: not current
    assert parsed.skipped == {"paused in OpenMemory (not current)": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"results": [{"id": "1", "memory": "x"}', "not valid JSON (line 1"),
        ('{"memorys": []}', "not a mem0 export"),
        ('[{"id": "1", "text": "no memory field"}]', "no item has a 'memory'"),
        ('"just a string"', "found str"),
    ],
)
def test_mem0_bad_input_names_the_file(tmp_path, text, message):
    path = tmp_path / "broken-export.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        mem0.parse(path)
    assert "broken-export.json" in err.value.message and message in err.value.message


# --- claude-mem ----------------------------------------------------------------------------------------

OBSERVATION = {
    "id": 1842,
    "sdk_session_id": "sdk-7f3e2a",
    "project": "billing-service",
    "text": None,
    "type": "decision",
    "title": "Use idempotency keys for payment retries",
    "subtitle": "Retries reuse the client's key so Stripe never charges twice",
    "facts": json.dumps(
        [
            "PaymentClient.charge() sends Idempotency-Key from the order id",
            "Retries back off 1s, 4s, 16s then give up",
        ]
    ),
    "narrative": "Double charges came from retrying after a timeout. Keys derived from the order id make "
    "every retry of one order the same request.",
    "concepts": json.dumps(["why-it-exists", "trade-off"]),
    "files_read": json.dumps(["src/payments/client.py"]),
    "files_modified": json.dumps(["src/payments/client.py", "tests/test_client.py"]),
    "prompt_number": 3,
    "discovery_tokens": 5120,
    "created_at": "2025-11-04T18:22:31.123Z",
    "created_at_epoch": 1762280551123,
}


def claude_mem_export() -> dict:
    discovery = {
        **OBSERVATION,
        "id": 1843,
        "type": "discovery",
        "title": "اختبارات الفوترة تعتمد على قاعدة بيانات حقيقية",
        "subtitle": None,
        "narrative": "تشغّل الاختبارات خادم PostgreSQL مؤقتًا قبل كل جلسة.",
        "facts": json.dumps(["conftest.py starts postgres on a free port"]),
        "concepts": json.dumps(["how-it-works"]),
        "files_read": "[]",
        "files_modified": "[]",
        "created_at_epoch": 1762280600000,
    }
    bugfix = {**OBSERVATION, "id": 1844, "type": "bugfix", "title": "Fixed rounding of VAT", "narrative": None}
    empty = {**OBSERVATION, "id": 1845, "title": None, "subtitle": None, "narrative": None, "facts": "[]", "text": ""}
    summary = {
        "id": 311,
        "sdk_session_id": "sdk-7f3e2a",
        "project": "billing-service",
        "request": "Stop double charges on payment retries",
        "investigated": "The retry loop in PaymentClient and Stripe's idempotency docs",
        "learned": "Stripe deduplicates requests that carry the same Idempotency-Key for 24 hours",
        "completed": "Retries now reuse the order's key; tests cover a timeout then a retry",
        "next_steps": "Backfill keys for pending orders",
        "files_read": json.dumps(["src/payments/client.py"]),
        "files_edited": json.dumps(["src/payments/client.py"]),
        "notes": None,
        "prompt_number": 3,
        "created_at": "2025-11-04T18:40:00.000Z",
        "created_at_epoch": 1762281600000,
    }
    return {
        "exportedAt": "2025-11-05T10:00:00.000Z",
        "exportedAtEpoch": 1762336800000,
        "query": "payments",
        "project": "billing-service",
        "totalObservations": 4,
        "totalSessions": 1,
        "totalSummaries": 1,
        "totalPrompts": 2,
        "observations": [OBSERVATION, discovery, bugfix, empty],
        "sessions": [
            {
                "id": 77,
                "claude_session_id": "3c1f-claude",
                "sdk_session_id": "sdk-7f3e2a",
                "project": "billing-service",
                "user_prompt": "Stop double charges",
                "started_at": "2025-11-04T18:00:00.000Z",
                "started_at_epoch": 1762279200000,
                "status": "completed",
            }
        ],
        "summaries": [summary],
        "prompts": [
            {"id": 1, "claude_session_id": "3c1f-claude", "prompt_number": 1, "prompt_text": "Stop double charges"},
            {"id": 2, "claude_session_id": "3c1f-claude", "prompt_number": 3, "prompt_text": "add a test"},
        ],
    }


def test_claude_mem_export_observations_and_summaries(tmp_path):
    parsed = claude_mem.parse(write(tmp_path / "payments.json", claude_mem_export()))
    records = by_key(parsed)
    assert list(records) == ["observation:1842", "observation:1843", "observation:1844", "summary:311"]
    decision = records["observation:1842"]
    assert decision.content == (
        "Use idempotency keys for payment retries\n"
        "Retries reuse the client's key so Stripe never charges twice\n\n"
        "Double charges came from retrying after a timeout. Keys derived from the order id make every retry "
        "of one order the same request.\n\n"
        "Facts:\n"
        "- PaymentClient.charge() sends Idempotency-Key from the order id\n"
        "- Retries back off 1s, 4s, 16s then give up\n\n"
        "Files read: src/payments/client.py\n"
        "Files modified: src/payments/client.py, tests/test_client.py"
    )
    assert (decision.network, decision.memory_type) == ("belief", "semantic")
    assert decision.thread == "sdk-7f3e2a"
    assert decision.valid_at == datetime(2025, 11, 4, 18, 22, 31, 123000, tzinfo=UTC)
    assert decision.metadata["concepts"] == ["why-it-exists", "trade-off"]
    assert decision.metadata["project"] == "billing-service" and decision.metadata["type"] == "decision"
    assert decision.ref == "claude-mem:observation:1842"
    discovery = records["observation:1843"]
    assert discovery.content.startswith("اختبارات الفوترة") and "Files" not in discovery.content
    assert (discovery.network, discovery.memory_type) == ("fact", "semantic")
    assert (records["observation:1844"].network, records["observation:1844"].memory_type) == ("experience", "episodic")
    summary = records["summary:311"]
    assert summary.content.splitlines()[0] == "Request: Stop double charges on payment retries"
    assert "Next steps: Backfill keys for pending orders" in summary.content and "Notes" not in summary.content
    assert (summary.network, summary.memory_type, summary.thread) == ("experience", "episodic", "sdk-7f3e2a")
    assert parsed.skipped == {"empty": 1, "prompts (not memories)": 2}
    assert_valid(parsed)


def test_claude_mem_keys_are_the_same_on_a_second_parse(tmp_path):
    path = write(tmp_path / "payments.json", claude_mem_export())
    assert [r.key for r in claude_mem.parse(path).records] == [r.key for r in claude_mem.parse(path).records]


def test_claude_mem_a_search_answer_keeps_its_summaries_under_sessions(tmp_path):
    export = claude_mem_export()
    answer = {"observations": export["observations"][:1], "sessions": export["summaries"], "prompts": []}
    parsed = claude_mem.parse(write(tmp_path / "search.json", answer))
    assert [r.key for r in parsed.records] == ["observation:1842", "summary:311"]


CURRENT_SCHEMA = """
CREATE TABLE sdk_sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT, content_session_id TEXT UNIQUE NOT NULL, memory_session_id TEXT UNIQUE,
  project TEXT NOT NULL, platform_source TEXT NOT NULL DEFAULT 'claude', user_prompt TEXT, started_at TEXT NOT NULL,
  started_at_epoch INTEGER NOT NULL, completed_at TEXT, completed_at_epoch INTEGER, status TEXT NOT NULL DEFAULT 'active',
  worker_port INTEGER, prompt_counter INTEGER DEFAULT 0, custom_title TEXT);
CREATE TABLE observations (
  id INTEGER PRIMARY KEY AUTOINCREMENT, memory_session_id TEXT NOT NULL, project TEXT NOT NULL, text TEXT,
  type TEXT NOT NULL, title TEXT, subtitle TEXT, facts TEXT, narrative TEXT, concepts TEXT, files_read TEXT,
  files_modified TEXT, prompt_number INTEGER, discovery_tokens INTEGER DEFAULT 0, content_hash TEXT, agent_type TEXT,
  agent_id TEXT, merged_into_project TEXT, generated_by_model TEXT, metadata TEXT, created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL);
CREATE TABLE session_summaries (
  id INTEGER PRIMARY KEY AUTOINCREMENT, memory_session_id TEXT NOT NULL, project TEXT NOT NULL, request TEXT,
  investigated TEXT, learned TEXT, completed TEXT, next_steps TEXT, files_read TEXT, files_edited TEXT, notes TEXT,
  prompt_number INTEGER, discovery_tokens INTEGER DEFAULT 0, merged_into_project TEXT, created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL);
CREATE TABLE user_prompts (
  id INTEGER PRIMARY KEY AUTOINCREMENT, content_session_id TEXT NOT NULL, prompt_number INTEGER NOT NULL,
  prompt_text TEXT NOT NULL, created_at TEXT NOT NULL, created_at_epoch INTEGER NOT NULL);
CREATE TABLE directives (
  id INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL DEFAULT 'global', project TEXT, content TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active', source TEXT NOT NULL DEFAULT 'manual', created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL, updated_at_epoch INTEGER NOT NULL);
"""


def test_claude_mem_reads_its_sqlite_database(tmp_path):
    path = tmp_path / "claude-mem.db"
    db = sqlite3.connect(path)
    db.executescript(CURRENT_SCHEMA)
    db.execute(
        "INSERT INTO observations (memory_session_id, project, type, title, narrative, facts, concepts, files_read,"
        " files_modified, agent_type, merged_into_project, created_at, created_at_epoch)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "mem-91",
            "api",
            "feature",
            "Added rate limiting to the public API",
            "A token bucket per API key, 100 requests a minute.",
            '["Limits live in settings.RATE_LIMIT"]',
            '["what-changed"]',
            "[]",
            '["api/limits.py"]',
            "general-purpose",
            "platform",
            "2025-12-01T08:00:00.000Z",
            1764576000000,
        ),
    )
    db.execute(
        "INSERT INTO session_summaries (memory_session_id, project, request, learned, created_at, created_at_epoch)"
        " VALUES ('mem-91', 'api', 'Add rate limiting', 'Redis INCR with EXPIRE is enough', ?, ?)",
        ("2025-12-01T08:30:00.000Z", 1764577800000),
    )
    db.execute(
        "INSERT INTO user_prompts (content_session_id, prompt_number, prompt_text, created_at, created_at_epoch)"
        " VALUES ('c-1', 1, 'add rate limiting', '2025-12-01T07:59:00.000Z', 1764575940000)"
    )
    db.executemany(
        "INSERT INTO directives (content, status, created_at, created_at_epoch, updated_at_epoch) VALUES (?, ?, ?, ?, ?)",
        [
            ("Never push to main directly", "active", "2025-10-01T00:00:00Z", 1759276800000, 1759363200000),
            ("Always ask before running migrations", "archived", "2025-10-01T00:00:00Z", 1759276800000, 1759276800000),
        ],
    )
    db.commit()
    db.close()
    parsed = claude_mem.parse(path)
    records = by_key(parsed)
    assert list(records) == ["observation:1", "summary:1", "directive:1"]
    feature = records["observation:1"]
    assert feature.thread == "mem-91" and feature.metadata["project"] == "platform"  # merged into
    assert feature.metadata["files_modified"] == ["api/limits.py"] and "files_read" not in feature.metadata
    assert feature.valid_at == datetime(2025, 12, 1, 8, tzinfo=UTC)
    assert records["summary:1"].content == "Request: Add rate limiting\nLearned: Redis INCR with EXPIRE is enough"
    directive = records["directive:1"]
    assert (directive.network, directive.memory_type) == ("fact", "procedural")
    assert directive.valid_at == datetime(2025, 10, 2, tzinfo=UTC)
    assert parsed.skipped == {"inactive directive": 1, "prompts (not memories)": 1}
    assert_valid(parsed)


def test_claude_mem_reads_a_database_of_the_first_schema(tmp_path):
    path = tmp_path / "claude-mem.db"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE observations (id INTEGER PRIMARY KEY, sdk_session_id TEXT, project TEXT, text TEXT,"
        " type TEXT, title TEXT, subtitle TEXT, facts TEXT, narrative TEXT, concepts TEXT, files_read TEXT,"
        " files_modified TEXT, prompt_number INTEGER, created_at TEXT, created_at_epoch INTEGER)"
    )
    db.execute(
        "INSERT INTO observations (sdk_session_id, project, text, type, created_at, created_at_epoch)"
        " VALUES ('sdk-1', 'site', 'Moved the blog to Astro', 'change', '2025-09-09T09:10:00Z', 1757409000000)"
    )
    db.commit()
    db.close()
    [record] = claude_mem.parse(path).records
    assert (record.key, record.content, record.thread) == ("observation:1", "Moved the blog to Astro", "sdk-1")


def test_claude_mem_bad_input_names_the_file(tmp_path):
    wrong = write(tmp_path / "notes.json", {"memories": []})
    with pytest.raises(InputError, match=r"notes\.json: not a claude-mem export"):
        claude_mem.parse(wrong)
    other = tmp_path / "other.db"
    sqlite3.connect(other).executescript("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
    with pytest.raises(InputError, match=r"other\.db: not a claude-mem database"):
        claude_mem.parse(other)
    broken = tmp_path / "cut.json"
    broken.write_text('{"observations": [', encoding="utf-8")
    with pytest.raises(InputError, match=r"cut\.json: not valid JSON"):
        claude_mem.parse(broken)


# --- Letta ---------------------------------------------------------------------------------------------

HUMAN = "\nThis is what I know so far about the user.\n\nFirst name: Chad\nOccupation: PhD student at UC Berkeley\n"
PERSONA = "\nI am Sam.\nI'm curious, empathetic, and extraordinarily perceptive.\n"


def letta_agent_file() -> dict:
    """The current schema, as Letta's export writes it (ids renumbered block-0, agent-0 ...)."""

    def block(i: int, label: str, value: str, description: str) -> dict:
        return {
            "value": value,
            "limit": 20000,
            "project_id": None,
            "template_name": None,
            "is_template": False,
            "preserve_on_migration": False,
            "label": label,
            "read_only": False,
            "description": description,
            "metadata": {},
            "hidden": None,
            "id": f"block-{i}",
        }

    message = {
        "type": "message",
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "id": "message-1",
        "agent_id": "agent-0",
        "created_at": "2025-11-21T03:05:34.027937+00:00",
    }
    return {
        "agents": [
            {
                "name": "memgpt_agent",
                "memory_blocks": [],
                "tool_ids": ["tool-0"],
                "block_ids": ["block-0", "block-1", "block-2"],
                "system": "<base_instructions>...</base_instructions>",
                "agent_type": "letta_v1_agent",
                "id": "agent-0",
                "in_context_message_ids": ["message-0"],
                "messages": [{**message, "id": "message-0", "role": "system"}, message],
                "files_agents": [],
                "group_ids": [],
            }
        ],
        "groups": [],
        "blocks": [
            block(0, "human", HUMAN, "The human block: key details about the person you are conversing with."),
            block(1, "persona", PERSONA, "The persona block: details about your current persona."),
            block(2, "scratchpad", "  ", ""),
        ],
        "files": [],
        "sources": [],
        "tools": [{"id": "tool-0", "name": "conversation_search", "tool_type": "letta_core"}],
        "mcp_servers": [],
        "metadata": {"revision_id": "567e9fe06270"},
        "created_at": "2025-11-21T03:05:40.123456+00:00",
    }


def test_letta_agent_file_blocks(tmp_path):
    parsed = letta.parse(write(tmp_path / "memgpt_agent.af", letta_agent_file()))
    records = by_key(parsed)
    assert list(records) == ["block:human", "block:persona"]
    human = records["block:human"]
    assert human.content.startswith("This is what I know so far about the user.") and human.content.endswith("Berkeley")
    assert human.metadata["block"] == "human" and human.metadata["limit"] == 20000
    assert (human.network, human.memory_type, human.author) == ("fact", "semantic", "memgpt_agent")
    assert human.valid_at == datetime(2025, 11, 21, 3, 5, 40, 123456, tzinfo=UTC)  # the export's time
    assert human.ref == "letta:memgpt_agent/human"
    assert records["block:persona"].network == "belief"
    assert parsed.skipped == {"empty block": 1, "messages (not memories)": 2}
    assert_valid(parsed)


def test_letta_keys_stay_when_the_file_is_exported_again_with_another_block(tmp_path):
    first = letta.parse(write(tmp_path / "a.af", letta_agent_file()))
    again = letta_agent_file()
    again["blocks"].insert(0, {**again["blocks"][0], "label": "project", "value": "Thesis on RL", "id": "block-0"})
    for i, b in enumerate(again["blocks"]):
        b["id"] = f"block-{i}"
    again["agents"][0]["block_ids"] = [b["id"] for b in again["blocks"]]
    second = letta.parse(write(tmp_path / "b.af", again))
    assert {r.key for r in first.records} < {r.key for r in second.records}
    assert by_key(second)["block:human"].content == by_key(first)["block:human"].content


def test_letta_blocks_of_several_agents_that_share_a_label_keep_apart(tmp_path):
    data = letta_agent_file()
    other = {**data["agents"][0], "name": "support_bot", "id": "agent-1", "block_ids": ["block-3"], "messages": []}
    data["agents"].append(other)
    data["blocks"].append({**data["blocks"][0], "id": "block-3", "value": "Customer: ACME Corp, plan Pro"})
    records = by_key(letta.parse(write(tmp_path / "team.af", data)))
    assert records["block:human:block-0"].author == "memgpt_agent"
    assert records["block:human:block-3"].author == "support_bot"


def test_letta_first_schema_and_a_twice_encoded_file(tmp_path):
    first_schema = {
        "agent_type": "memgpt_agent",
        "name": "helper",
        "created_at": "2025-03-01T10:00:00",
        "updated_at": "2025-03-02T10:00:00",
        "core_memory": [
            {
                "label": "human",
                "value": "الاسم: ليلى\nتعمل مهندسة في دبي",
                "limit": 5000,
                "description": None,
                "is_template": False,
                "template_name": None,
                "metadata_": {},
                "created_at": "2025-03-01T10:00:00",
                "updated_at": "2025-03-01T12:30:00",
            }
        ],
        "messages": [{"created_at": "2025-03-01T10:00:00", "role": "user", "content": [], "tool_calls": []}],
        "in_context_message_indices": [0],
        "tools": [],
        "version": "0.6.37",
    }
    path = tmp_path / "helper.af"
    path.write_text(json.dumps(json.dumps(first_schema, ensure_ascii=False)), encoding="utf-8")
    parsed = letta.parse(path)
    [record] = parsed.records
    assert (record.key, record.author, record.content) == ("block:human", "helper", "الاسم: ليلى\nتعمل مهندسة في دبي")
    assert record.valid_at == datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
    assert parsed.skipped == {"messages (not memories)": 1}


def test_letta_blocks_written_inline_in_an_agent(tmp_path):
    data = letta_agent_file()
    data["agents"][0]["memory_blocks"] = [{"label": "project", "value": "Thesis on offline RL, due in May"}]
    records = by_key(letta.parse(write(tmp_path / "inline.af", data)))
    assert records["block:project"].content == "Thesis on offline RL, due in May"
    assert records["block:project"].author == "memgpt_agent"


def test_letta_passages_where_a_file_carries_them(tmp_path):
    data = letta_agent_file()
    data["agents"][0]["passages"] = [
        {"id": "passage-0", "text": "Chad's advisor is Prof. Abbeel", "created_at": "2025-11-20T10:00:00Z"},
        {"id": "passage-1", "text": ""},
    ]
    parsed = letta.parse(write(tmp_path / "with-passages.af", data))
    passage = by_key(parsed)["passage:passage-0"]
    assert passage.metadata == {"archival": True} and passage.author == "memgpt_agent"
    assert parsed.skipped["empty passage"] == 1


def test_letta_bad_input_names_the_file(tmp_path):
    with pytest.raises(InputError, match=r"agent\.af: not a Letta agent file"):
        letta.parse(write(tmp_path / "agent.af", {"name": "x", "tools": []}))
    cut = tmp_path / "cut.af"
    cut.write_text('{"agents": [', encoding="utf-8")
    with pytest.raises(InputError, match=r"cut\.af: not valid JSON \(line 1"):
        letta.parse(cut)


# --- Markdown ------------------------------------------------------------------------------------------

RULES = [
    "Never commit directly to main; open a merge request and wait for one approval from the team.",
    "Run `make lint test` before pushing: CI runs the same targets and a red pipeline blocks the merge.",
    "Keep functions under 50 lines; split anything longer into helpers with names that say what they do.",
    "Database migrations are forward-only: never edit an applied file, add a new numbered one instead.",
    "Secrets come from the environment only: never read `.env` files in library code, only in entry points.",
    "Log with structlog and pass context as keyword arguments, never interpolate values into the message.",
]

CLAUDE_MD = f"""# Billing service

The billing service charges customers and issues invoices. It is a FastAPI app on PostgreSQL 16.

## Commands

```bash
make dev      # run the API with reload on :8000
make test     # pytest, needs Docker for the database
```

## Code style

- Type hints everywhere
- Ruff formats, line length 120

## Rules

{chr(10).join(f"- {rule}" for rule in RULES)}

## Setup

### Database

Start PostgreSQL with `docker compose up db`; the schema is applied by `make migrate`.
"""


def md_keys(parsed: Parsed) -> list[str]:
    return [r.key for r in parsed.records]


def test_markdown_claude_md_sections_and_bullets(tmp_path):
    path = tmp_path / "CLAUDE.md"
    path.write_text(CLAUDE_MD, encoding="utf-8")
    os.utime(path, (1_750_000_000, 1_750_000_000))
    parsed = markdown.parse(path)
    records = by_key(parsed)
    keys = md_keys(parsed)
    assert keys[:3] == [
        "CLAUDE.md#Billing service",
        "CLAUDE.md#Billing service / Commands",
        "CLAUDE.md#Billing service / Code style",
    ]
    assert keys[-1] == "CLAUDE.md#Billing service / Setup / Database"
    bullets = [k for k in keys if k.startswith("CLAUDE.md#Billing service / Rules~")]
    assert len(bullets) == len(RULES)  # a list of 5 or more standalone rules: one record each
    first_rule = records[bullets[0]]
    assert first_rule.content == f"Billing service › Rules\n\n{RULES[0]}"
    assert first_rule.ref == "CLAUDE.md#Billing service / Rules"
    style = records["CLAUDE.md#Billing service / Code style"]
    assert style.content == "Billing service › Code style\n\n- Type hints everywhere\n- Ruff formats, line length 120"
    database = records["CLAUDE.md#Billing service / Setup / Database"]
    assert database.content.startswith("Billing service › Setup › Database\n\nStart PostgreSQL")
    assert database.metadata == {"file": "CLAUDE.md", "section": "Billing service / Setup / Database"}
    assert all((r.network, r.memory_type) == ("fact", "procedural") for r in parsed.records)
    assert all(r.valid_at == datetime.fromtimestamp(1_750_000_000, UTC) for r in parsed.records)  # the mtime
    assert parsed.skipped == {}
    assert_valid(parsed)


def test_markdown_keys_survive_an_edit_of_another_section(tmp_path):
    path = tmp_path / "CLAUDE.md"
    path.write_text(CLAUDE_MD, encoding="utf-8")
    before = by_key(markdown.parse(path))
    assert md_keys(markdown.parse(path)) == list(before)  # a second parse: the same keys
    edited = CLAUDE_MD.replace("make test     # pytest", "make test     # pytest -x").replace(
        RULES[2], "Keep functions short."
    )
    path.write_text(edited, encoding="utf-8")
    after = by_key(markdown.parse(path))
    changed = {k for k in before if k not in after or before[k].content != after[k].content}
    rule_key = next(k for k in before if "~" in k and before[k].content.endswith(RULES[2]))
    assert changed == {"CLAUDE.md#Billing service / Commands", rule_key}


def test_markdown_numbered_steps_and_lists_with_prose_stay_one_section(tmp_path):
    steps = "\n".join(f"{i}. {rule}" for i, rule in enumerate(RULES, start=1))
    mixed = "Follow these rules when you touch the billing code:\n\n" + "\n".join(f"- {rule}" for rule in RULES)
    path = tmp_path / "AGENTS.md"
    path.write_text(f"## Release\n\n{steps}\n\n## Rules\n\n{mixed}\n", encoding="utf-8")
    assert md_keys(markdown.parse(path)) == ["AGENTS.md#Release", "AGENTS.md#Rules"]


def test_markdown_a_long_section_is_cut_into_pieces(tmp_path):
    paragraph = "The invoice job runs nightly and retries failed charges with exponential backoff. " * 12
    path = tmp_path / "MEMORY.md"
    path.write_text(f"## Jobs\n\n{paragraph}\n\n{paragraph}\n\n{paragraph}\n", encoding="utf-8")
    parsed = markdown.parse(path)
    assert md_keys(parsed) == ["MEMORY.md#Jobs", "MEMORY.md#Jobs~2"]
    assert all(len(r.content) <= markdown.PART_CHARS for r in parsed.records)
    assert all((r.network, r.memory_type) == ("fact", "semantic") for r in parsed.records)


def test_markdown_a_folder_finds_the_memory_files_of_each_tool(tmp_path):
    files = {
        "CLAUDE.md": "# Project\n\nUse uv, never pip.\n",
        "README.md": "# Not a memory file\n\nRead me.\n",
        "docs/AGENTS.md": "## Testing\n\nRun `uv run pytest -q` from the repository root.\n",
        ".cursorrules": "Always answer in British English.\n",
        ".cursor/rules/python.mdc": "---\ndescription: Python conventions\nglobs: **/*.py\nalwaysApply: false\n---\n"
        "- Prefer pathlib over os.path\n",
        "SOUL.md": "## القيم\n\nكن صادقًا ومباشرًا، واعترف بالخطأ عندما تخطئ.\n",
        "memory/2025-03-18.md": "## Done\n\nMigrated the invoices table to UUID keys.\n",
        "memory/debugging.md": "The flaky test is test_refund: it depends on the wall clock.\n",
        "USER.md": "",
        "node_modules/some-pkg/CLAUDE.md": "# vendored\n\nnot ours\n",
        ".git/CLAUDE.md": "# git internals\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    parsed = importers.parse("markdown", tmp_path)
    records = by_key(parsed)
    assert sorted({r.metadata["file"] for r in parsed.records}) == [
        ".cursor/rules/python.mdc",
        ".cursorrules",
        "CLAUDE.md",
        "SOUL.md",
        "docs/AGENTS.md",
        "memory/2025-03-18.md",
        "memory/debugging.md",
    ]
    assert parsed.skipped == {"empty file": 1}  # USER.md
    rule = records[".cursor/rules/python.mdc#"]
    assert rule.content == "- Prefer pathlib over os.path" and rule.memory_type == "procedural"
    assert rule.metadata["front_matter"] == {
        "description": "Python conventions",
        "globs": "**/*.py",
        "alwaysApply": "false",
    }
    assert records[".cursorrules#"].memory_type == "procedural"
    soul = records["SOUL.md#القيم"]
    assert soul.content == "القيم\n\nكن صادقًا ومباشرًا، واعترف بالخطأ عندما تخطئ." and soul.network == "belief"
    daily = records["memory/2025-03-18.md#Done"]
    assert (daily.network, daily.memory_type, daily.valid_at) == (
        "experience",
        "episodic",
        datetime(2025, 3, 18, tzinfo=UTC),
    )
    assert records["memory/debugging.md#"].memory_type == "semantic"
    assert_valid(parsed)


def test_markdown_bad_input_names_the_path(tmp_path):
    (tmp_path / "README.md").write_text("# nothing for us\n", encoding="utf-8")
    with pytest.raises(InputError, match="no memory files in this folder"):
        markdown.parse(tmp_path)
    latin = tmp_path / "CLAUDE.md"
    latin.write_bytes("Café au lait".encode("latin-1"))
    with pytest.raises(InputError, match=r"CLAUDE\.md: not UTF-8 text"):
        markdown.parse(latin)


def test_markdown_a_rule_written_twice_in_one_list_is_kept_once(tmp_path):
    path = tmp_path / ".cursorrules"
    path.write_text("\n".join(f"- {rule}" for rule in [*RULES, RULES[0]]) + "\n", encoding="utf-8")
    parsed = markdown.parse(path)
    assert len(parsed.records) == len(RULES) and parsed.skipped == {"duplicate key": 1}
    assert parsed.records[0].content == RULES[0]  # no heading: the rule alone
