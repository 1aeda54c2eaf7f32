"""Export and import on real PostgreSQL: a brain exported and imported into an empty one gives
back the same memories (every version, forgotten ones too), entities, links, grants and judgments;
a second import adds nothing; an export cut short or changed is refused whole, and an import that
fails midway (killed, or a row the database refuses) leaves the database as it was; other tools'
files (mem0, Markdown) import once, through the CLI."""

from __future__ import annotations

import io
import itertools
import json
import re
import uuid
from pathlib import Path

import pytest

from cabrain.errors import AccessDenied, InputError
from cabrain.portable.facade import Portable
from cabrain.progress import Lines
from cabrain.store.backup import row_counts
from cabrain.types import MemoryInput, RecallQuery, Visibility
from tests.conftest import _create_database, _drop_database, cli_env, run_cli, run_cli_process

# What may differ between two exports of the same memories: when each was made (and so the digest
# of the lines, the header's among them).
VOLATILE = {"exported_at", "sha256"}


@pytest.fixture
async def second_dsn(pg_server, template_db):
    name = await _create_database(pg_server, template_db)
    yield pg_server.dsn(name)
    await _drop_database(pg_server, name)


async def _fill(brain) -> dict:
    """A namespace with versions, a forget, a revert, a conversation, entities and a grant."""
    await brain.share("alice", "proj", "bob", can_write=False)
    await brain.accept_grant("bob", "proj")
    rows = [
        ("Ahmed leads the payments team in Riyadh.", {}),
        ("The staging database listens on port 5433.", {}),
        ("فاطمة مسؤولة عن فريق التصميم في جدة.", {}),
        ("Can you check the invoice totals for Acme?", {"thread": "chat-1", "speaker": "Mona"}),
        ("Acme's March invoice totals 900 USD.", {"thread": "chat-1", "speaker": "Omar"}),
        ("The deploy freeze starts on Friday.", {}),
    ]
    results = await brain.retain(
        "alice", [MemoryInput(text, "proj", visibility=Visibility.TEAM, metadata=meta) for text, meta in rows]
    )
    ids = [r.memory_id for r in results]
    fixed = await brain.reconsolidate("alice", ids[1], "The staging database listens on port 5434.", reason="moved")
    await brain.forget("alice", ids[5], reason="the freeze was cancelled")
    revision = await brain.retain("alice", MemoryInput("Ahmed now leads the payments team in Dubai.", "proj"))
    return {"ids": ids, "fixed": fixed.memory_id, "revision": revision[0]}


def _records(text: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for line in text.splitlines():
        record = json.loads(line)
        for key in VOLATILE:
            record.pop(key, None)
        out.setdefault(record["type"], []).append(record)
    for kind in out:
        out[kind].sort(key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))
    return out


async def test_an_export_imported_into_an_empty_brain_is_the_same_brain(
    brain, open_brain, settings_for, second_dsn, embedder
) -> None:
    from cabrain.brain import Brain

    await _fill(brain)
    first = io.StringIO()
    report = await Portable(brain.engine).export("alice", ["proj"], first)
    assert report.counts["memory"] >= 8 and report.counts["grant"] == 1 and report.counts["judgment"] >= 1
    assert report.counts["entity"] >= 2 and report.counts["mention"] >= 2
    exported = _records(first.getvalue())
    assert all("embedding" not in m for m in exported["memory"])  # without vectors unless asked

    other = await Brain.open(settings_for(second_dsn), dsn=second_dsn, embedder=embedder)
    try:
        restored = await Portable(other.engine).restore(None, io.StringIO(first.getvalue()))
        assert restored.added["memory"] == report.counts["memory"]
        again = io.StringIO()
        await Portable(other.engine).export(None, ["proj"], again)
        assert _records(again.getvalue()) == exported  # every record, field by field

        # the restored brain works: recall (vectors and keywords were rebuilt), grants, history
        found = await other.recall("bob", RecallQuery("which port does staging use", "proj", k=3))
        assert "5434" in found.hits[0].memory.content
        assert not any("freeze" in h.memory.content for h in found.hits)
        arabic = await other.recall("alice", RecallQuery("من مسؤول عن التصميم", "proj", k=2))
        assert "فاطمة" in arabic.hits[0].memory.content

        # importing it again adds nothing
        twice = await Portable(other.engine).restore(None, io.StringIO(first.getvalue()))
        assert twice.added == {} and twice.skipped["memory"] == report.counts["memory"]
    finally:
        await other.close()


async def test_who_may_export_and_import(brain, tmp_path: Path) -> None:
    await _fill(brain)
    hub = Portable(brain.engine)
    with pytest.raises(AccessDenied):  # bob may read proj, but only its owner exports it
        await hub.export("bob", ["proj"], io.StringIO())
    assert (await hub.export("root", ["proj"], io.StringIO())).counts["memory"] > 0  # an admin may
    with pytest.raises(AccessDenied):
        await hub.restore("alice", io.StringIO('{"type": "cabrain-export", "format": 1}\n'))
    cut = io.StringIO()
    await hub.export("alice", ["proj"], cut)
    lines = cut.getvalue().splitlines()
    with pytest.raises(InputError, match="cut short"):
        await hub.restore("root", lines[:-1])
    with pytest.raises(InputError, match="not a CaBrain export"):
        await hub.restore("root", ['{"type": "memory"}'])


async def test_roles_caps_and_held_actions_travel_and_an_import_never_widens_power(
    brain, settings_for, pg_server, template_db, embedder
) -> None:
    """Finding 20 of issue 31: export then import turned a live agent into a member, with its accepted
    read+write grant: the role, caps and held actions did not travel."""
    from cabrain.brain import Brain
    from cabrain.errors import ConfirmationRequired, PolicyDenied, QuotaExceeded

    await _fill(brain)
    await brain.create_agent("scout")
    await brain.share("alice", "proj", "scout", can_write=True)
    await brain.accept_grant("scout", "proj")
    await brain.set_role("scout", "live")
    await brain.set_cap("root", "scout", "recall", 2)
    [memory] = (await brain.recall("alice", RecallQuery("staging database port", "proj", k=1))).hits
    with pytest.raises(ConfirmationRequired) as held:
        await brain.forget("scout", memory.memory.id)
    exported = io.StringIO()
    await Portable(brain.engine).export("alice", ["proj"], exported)
    [scout] = [r for r in _records(exported.getvalue())["agent"] if r["id"] == "scout"]
    assert (scout["role"], scout["caps"]) == ("live", {"recall": 2})

    for importer in (None, "root"):  # the operator on the database; an admin, as over the API
        name = await _create_database(pg_server, template_db)
        dsn = pg_server.dsn(name)
        other = await Brain.open(settings_for(dsn), dsn=dsn, embedder=embedder)
        try:
            if importer is not None:
                await other.create_agent("root", is_admin=True)
            await Portable(other.engine).restore(importer, io.StringIO(exported.getvalue()))
            with pytest.raises(PolicyDenied, match="role live: retain"):
                await other.retain("scout", MemoryInput("I am a member now.", "proj"))
            [pending] = await other.pending_actions("alice" if importer is None else "root")
            assert str(pending["id"]) == held.value.fix.params["action"] and pending["status"] == "pending"
            await other.recall("scout", RecallQuery("staging", "proj"))
            await other.recall("scout", RecallQuery("staging", "proj"))
            with pytest.raises(QuotaExceeded):
                await other.recall("scout", RecallQuery("staging", "proj"))
        finally:
            await other.close()
            await _drop_database(pg_server, name)


def _lines(records: list[dict]) -> list[str]:
    """Records edited by hand, as lines: their end record without its digest (a file edited on
    purpose is imported so, as the digest's refusal says; the other checks still apply)."""
    return [json.dumps({k: v for k, v in r.items() if k != "sha256"}, ensure_ascii=False) for r in records]


async def test_an_agents_import_is_checked_whole_and_creates_nothing_for_others(brain) -> None:
    """Finding 12 of issue 31, in process: an admin's import of a CaBrain export obeys the API's
    namespace and consent rules, and a file that fails a check writes nothing."""
    await _fill(brain)
    exported = io.StringIO()
    await Portable(brain.engine).export("alice", ["proj"], exported)
    records = [json.loads(line) for line in exported.getvalue().splitlines()]
    hub = Portable(brain.engine)
    with pytest.raises(AccessDenied, match="which agent 'alice' owns here"):  # root may not write into alice's
        await hub.restore("root", _lines(records))

    def renamed(to: str) -> list[dict]:
        """The export as if of namespace ``to``, with ids of its own (what is stored here is skipped)."""
        text = json.dumps(records, ensure_ascii=False).replace('"proj"', json.dumps(to))
        fresh: dict[str, str] = {}
        text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                      lambda m: fresh.setdefault(m.group(0), str(uuid.uuid4())), text)  # fmt: skip
        return json.loads(text)

    with pytest.raises(AccessDenied, match="personal namespace"):
        await hub.restore("root", _lines(renamed("@alice/proj")))
    moved = renamed("elsewhere")
    broken = [dict(r) for r in moved]
    last = max(i for i, r in enumerate(broken) if r["type"] == "memory")
    broken[last]["valid_at"] = "0001-01-01T00:00:00+05:00"  # before what PostgreSQL and Python hold, in UTC
    with pytest.raises(InputError, match="outside the times"):
        await hub.restore("root", _lines(broken))
    async with brain.engine.pool.acquire() as conn:
        assert not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM namespaces WHERE name = 'elsewhere')")
    report = await hub.restore("root", _lines(moved))  # a namespace new here: root's, as the API makes it
    assert report.added["memory"] == sum(1 for r in moved if r["type"] == "memory")
    async with brain.engine.pool.acquire() as conn:
        assert await conn.fetchval("SELECT owner_agent_id FROM namespaces WHERE name = 'elsewhere'") == "root"
        grants = await conn.fetch("SELECT agent_id, accepted_at FROM namespace_grants WHERE namespace = 'elsewhere'")
        assert [(g["agent_id"], g["accepted_at"]) for g in grants] == [("bob", None)]  # an offer again
        owners = await conn.fetch("SELECT DISTINCT owner_agent_id FROM memories WHERE namespace = 'elsewhere'")
        assert [o["owner_agent_id"] for o in owners] == ["root"]


MEM0 = {
    "results": [
        {
            "id": "9a1e2c1e-5c7e-4a39-9a6e-2f3b1d1f0001",
            "memory": "Prefers tea over coffee in the afternoon",
            "hash": "a1",
            "metadata": None,
            "categories": ["food"],
            "created_at": "2025-03-01T09:00:00-07:00",
            "updated_at": None,
            "user_id": "sara",
        },
        {
            "id": "9a1e2c1e-5c7e-4a39-9a6e-2f3b1d1f0002",
            "memory": "يعمل في فريق البنية التحتية منذ ٢٠٢١",
            "hash": "a2",
            "metadata": {"source": "chat"},
            "created_at": "2025-03-02T10:00:00+03:00",
            "updated_at": "2025-03-05T10:00:00+03:00",
            "user_id": "sara",
        },
    ]
}


async def test_other_tools_import_once_through_the_cli(brain, db_dsn: str, home: Path, tmp_path: Path) -> None:
    mem0 = tmp_path / "mem0.json"
    mem0.write_text(json.dumps(MEM0, ensure_ascii=False))
    memory_md = tmp_path / "CLAUDE.md"
    memory_md.write_text(
        "# Project rules\n\n## Testing\n\nRun the suite with scripts/test before every push.\n\n"
        "## Style\n\nKeep modules under 500 lines and name folders after what they do.\n"
    )
    env = cli_env(database_url=db_dsn, home=str(home))
    first = run_cli("import", "mem0", str(mem0), "-n", "proj", "--as", "alice", "--json", env=env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["read"] == 2 and report["added"] == 2 and report["already"] == 0
    again = run_cli("import", "mem0", str(mem0), "-n", "proj", "--as", "alice", "--json", env=env)
    assert json.loads(again.stdout)["added"] == 0 and json.loads(again.stdout)["already"] == 2

    md = run_cli("import", "markdown", str(memory_md), "-n", "proj", "--as", "alice", env=env)
    assert md.returncode == 0, md.stderr
    assert "2 added" in md.stdout

    tea = await brain.recall("alice", RecallQuery("what does sara drink", "proj", k=3))
    hit = next(h.memory for h in tea.hits if "tea" in h.memory.content)
    assert hit.source_kind == "import:mem0" and hit.source_ref == f"mem0 user sara#{MEM0['results'][0]['id']}"
    assert hit.metadata["author"] == "sara" and hit.valid_at.isoformat() == "2025-03-01T16:00:00+00:00"
    rules = await brain.recall("alice", RecallQuery("how do I run the tests", "proj", k=3))
    assert "scripts/test" in rules.hits[0].memory.content

    refused = run_cli("import", "mem0", str(mem0), "-n", "proj", "--as", "bob", env=env)
    assert refused.returncode == 1 and "may not write" in refused.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    broken = run_cli("import", "mem0", str(bad), "-n", "proj", "--as", "alice", env=env)
    assert broken.returncode == 1 and "bad.json" in broken.stderr


async def test_the_export_command_round_trips(brain, db_dsn: str, second_dsn: str, home: Path, tmp_path: Path) -> None:
    await _fill(brain)
    out = tmp_path / "brain.jsonl"
    made = run_cli("export", str(out), "-n", "proj", env=cli_env(database_url=db_dsn, home=str(home)))
    assert made.returncode == 0, made.stderr
    assert "exported proj" in made.stdout
    back = run_cli("import", "cabrain", str(out), env=cli_env(database_url=second_dsn, home=str(home)))
    assert back.returncode == 0, back.stderr
    assert " memories" in back.stdout and "0 records were already here" in back.stdout, back.stdout


async def test_archived_memories_are_exported_from_the_cold_tier(
    brain, settings_for, db_dsn: str, second_dsn: str, embedder
) -> None:
    from datetime import UTC, datetime

    import asyncpg

    from cabrain.brain import Brain
    from cabrain.sleep.cycle import run_cycle

    old = datetime(2024, 1, 15, tzinfo=UTC)
    [kept] = await brain.retain(
        "alice",
        MemoryInput("The 2023 audit found no issues in payroll.", "proj", visibility=Visibility.TEAM, valid_at=old),
    )
    await brain.retain("alice", MemoryInput("The office moves to the new building in June.", "proj"))
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '90 days' WHERE valid_at < '2025-01-01'")
    finally:
        await conn.close()
    settings = settings_for(db_dsn, sleep_demote_after_days=30, sleep_demote_keep_importance=1.0)
    report = await run_cycle(settings, db_dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 1

    out = io.StringIO()
    await Portable(brain.engine).export("alice", ["proj"], out)
    archived = [r for r in _records(out.getvalue())["memory"] if r["tier"] == "cold"]
    assert [r["id"] for r in archived] == [str(kept.memory_id)]
    assert archived[0]["content"] == "The 2023 audit found no issues in payroll."

    other = await Brain.open(settings_for(second_dsn), dsn=second_dsn, embedder=embedder)
    try:
        restored = await Portable(other.engine).restore(None, io.StringIO(out.getvalue()))
        assert restored.came_back_hot == 1 and restored.added["memory"] == 2
        back = await other.get("alice", kept.memory_id)
        assert back.memory.content == archived[0]["content"] and back.memory.valid_at == old
    finally:
        await other.close()


async def test_the_export_names_every_column_a_memory_has(conn) -> None:
    from cabrain.store.portable import MEMORY_COLUMNS

    columns = {
        r["column_name"]
        for r in await conn.fetch("SELECT column_name FROM information_schema.columns WHERE table_name = 'memories'")
    }
    # the vector goes only with --with-embeddings, the content hash is recomputed, the tier is said apart
    assert set(MEMORY_COLUMNS) == columns - {"embedding", "content_hash", "tier"}


async def test_claude_mem_and_letta_files_import_once(brain, tmp_path: Path) -> None:
    from tests.unit.test_importers import claude_mem_export, letta_agent_file

    hub = Portable(brain.engine)
    claude = tmp_path / "claude-mem-export.json"
    claude.write_text(json.dumps(claude_mem_export(), ensure_ascii=False))
    letta = tmp_path / "agent.af"
    letta.write_text(json.dumps(letta_agent_file(), ensure_ascii=False))
    for fmt, path in (("claude-mem", claude), ("letta", letta)):
        first = await hub.import_file("alice", fmt, path, "proj")
        assert first.read > 0 and first.added + first.duplicates == first.read, (fmt, first)
        again = await hub.import_file("alice", fmt, path, "proj")
        assert again.added == 0 and again.already == first.added, (fmt, again)
    chad = await brain.recall("alice", RecallQuery("what does the user study", "proj", k=5))
    hit = next(h.memory for h in chad.hits if "PhD student" in h.memory.content)
    assert hit.source_kind == "import:letta" and hit.metadata["block"] == "human"
    with pytest.raises(InputError, match="namespace"):
        await hub.import_file("alice", "letta", letta, None)


async def test_an_edited_export_cannot_plant_a_secret(brain, settings_for, second_dsn: str, embedder) -> None:
    from cabrain.brain import Brain

    await _fill(brain)
    out = io.StringIO()
    await Portable(brain.engine).export("alice", ["proj"], out)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    records = []
    for line in out.getvalue().splitlines():
        record = json.loads(line)
        if record["type"] == "memory" and "staging database" in record["content"]:
            record["content"] += f" The deploy token is {token}."
            record["metadata"] = {**record["metadata"], "note": f"token {token}"}
        records.append(record)
    lines = _lines(records)
    other = await Brain.open(settings_for(second_dsn), dsn=second_dsn, embedder=embedder)
    try:
        await Portable(other.engine).restore(None, lines)
        conn = await other.engine.pool.acquire()
        try:
            stored = "\n".join(r[0] for r in await conn.fetch("SELECT m::text FROM memories m"))
        finally:
            await other.engine.pool.release(conn)
    finally:
        await other.close()
    assert token not in stored and "[REDACTED]" in stored


async def _held(engine) -> dict[str, int]:
    """Rows of every table: what a refused or failed import leaves as it was."""
    async with engine.pool.acquire() as conn:
        return await row_counts(conn)


async def test_an_export_cut_short_or_changed_is_refused_whole_and_the_brain_is_left_as_it_was(
    brain, settings_for, second_dsn: str, embedder, home: Path, tmp_path: Path
) -> None:
    """Issue 35: an export cut short was refused only after 21 memories and 1,504 entities were
    written. Each cut or change below is refused with one error and the database holds what it
    held, to the row, in every table; the whole export then imports, and importing it again adds
    nothing."""
    from cabrain.brain import Brain

    await _fill(brain)
    early = io.StringIO()
    await Portable(brain.engine).export(None, ["proj"], early)
    news = ["Mona joined the payments team in Riyadh.", "The release train leaves every Tuesday."]
    await brain.retain("alice", [MemoryInput(text, "proj") for text in news], decide=False)
    later = tmp_path / "brain.jsonl"
    with later.open("w", encoding="utf-8") as f:
        await Portable(brain.engine).export(None, ["proj"], f)
    text = later.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    kinds = [json.loads(line)["type"] for line in lines]
    last = len(kinds) - 1 - kinds[::-1].index("memory")
    end = json.loads(lines[-1])
    more = json.dumps({**end, "counts": {**end["counts"], "memory": end["counts"]["memory"] + 1}}) + "\n"
    broken = {
        "mid-line": ("".join(lines[:last]) + lines[last][: len(lines[last]) // 2], "ends in the middle of line"),
        "after-a-line": ("".join(lines[: last + 1]), "ends before its end record"),
        "before-the-end": ("".join(lines[:-1]), "ends before its end record"),
        "end-counts": ("".join(lines[:-1]) + more, "but its end record says"),
        "a-line-changed": (text.replace("Riyadh", "Jeddah", 1), "a line was changed or lost"),
    }

    other = await Brain.open(settings_for(second_dsn), dsn=second_dsn, embedder=embedder)
    try:
        hub = Portable(other.engine)
        held = await hub.restore(None, io.StringIO(early.getvalue()))  # the brain holds part of it already
        before = await _held(other.engine)
        assert before["memories"] == held.added["memory"] and before["entities"] >= 2 and before["agents"] >= 2
        for why, (content, says) in broken.items():
            path = tmp_path / f"{why}.jsonl"
            path.write_text(content, encoding="utf-8")
            with pytest.raises(InputError, match=says) as refused:
                await hub.import_file(None, "cabrain", path, None)
            assert "nothing of it was written" in refused.value.message and refused.value.hint, why
            assert await _held(other.engine) == before, why

        cut = run_cli(
            "import", "cabrain", str(tmp_path / "mid-line.jsonl"), env=cli_env(database_url=second_dsn, home=str(home))
        )
        assert cut.returncode == 1 and "cut short (nothing of it was written)" in cut.stderr, cut.stderr
        assert "export it again" in cut.stderr
        assert await _held(other.engine) == before

        whole = await hub.import_file(None, "cabrain", later, None)
        assert whole.added["memory"] == 2 and whole.skipped["memory"] == held.added["memory"]
        after = await _held(other.engine)
        assert after["memories"] == before["memories"] + 2
        again = await hub.import_file(None, "cabrain", later, None)
        assert again.added == {} and await _held(other.engine) == after
    finally:
        await other.close()


async def test_an_import_the_database_refuses_midway_leaves_nothing(
    brain, settings_for, second_dsn: str, embedder
) -> None:
    """A file edited by hand (its digest taken out) whose last memory names an owner that is no
    agent, of the file's or of the brain's: the database refuses that row after the batches before
    it were written; the import says so, and none of it stays."""
    from cabrain.brain import Brain
    from cabrain.portable.restore import restore

    await _fill(brain)
    out = io.StringIO()
    await Portable(brain.engine).export(None, ["proj"], out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    last = max(i for i, r in enumerate(records) if r["type"] == "memory")
    records[last]["owner_agent_id"] = "ghost"
    other = await Brain.open(settings_for(second_dsn), dsn=second_dsn, embedder=embedder)
    try:
        before = await _held(other.engine)
        with pytest.raises(InputError, match="could not be written") as refused:
            await restore(other.engine, _lines(records), batch=2)
        assert "nothing of it was written" in refused.value.message
        assert await _held(other.engine) == before
        records[last]["owner_agent_id"] = "alice"
        report = await restore(other.engine, _lines(records), batch=2)  # without a digest, as exports before it
        assert report.added["memory"] == sum(1 for r in records if r["type"] == "memory")
    finally:
        await other.close()


@pytest.mark.subprocess
async def test_an_import_killed_midway_leaves_nothing_and_imports_whole_when_run_again(
    brain, second_dsn: str, home: Path, tmp_path: Path
) -> None:
    import asyncpg

    from cabrain.failpoints import EXIT_CODE

    await _fill(brain)
    path = tmp_path / "brain.jsonl"
    with path.open("w", encoding="utf-8") as f:
        report = await Portable(brain.engine).export(None, ["proj"], f)
    conn = await asyncpg.connect(second_dsn)
    try:
        before = await row_counts(conn)
        env = cli_env(database_url=second_dsn, home=str(home))
        killed = run_cli_process(
            "import", "cabrain", str(path), env={**env, "CABRAIN_FAILPOINTS": "import.after_batch"}
        )
        assert killed.returncode == EXIT_CODE and "failpoint import.after_batch" in killed.stderr, killed.stderr
        assert await row_counts(conn) == before
        again = run_cli("import", "cabrain", str(path), "--json", env=env)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["added"]["memory"] == report.counts["memory"]
        assert (await row_counts(conn))["memories"] == before["memories"] + report.counts["memory"]
    finally:
        await conn.close()


async def test_export_and_import_say_how_far_they_are_with_rate_and_time_left(
    brain, settings_for, second_dsn: str, embedder
) -> None:
    from cabrain.brain import Brain
    from cabrain.portable.restore import restore

    await _fill(brain)
    ticks = itertools.count()
    said: list[str] = []
    progress = Lines(said.append, every_s=1.0, clock=lambda: float(next(ticks)))  # a second passes at each look
    out = io.StringIO()
    report = await Portable(brain.engine).export(None, ["proj"], out, progress=progress)
    n = report.counts["memory"]
    assert any(line.startswith(f"exporting memories: {n}/{n} memories (") and "in all" in line for line in said)
    assert said[-1] == f"exported {n} memories of 1 namespace(s)"

    said.clear()
    other = await Brain.open(settings_for(second_dsn), dsn=second_dsn, embedder=embedder)
    try:
        await restore(other.engine, io.StringIO(out.getvalue()), progress=progress, batch=2)
    finally:
        await other.close()
    assert any(line.startswith("checking the export: ") for line in said)
    assert any(line.startswith(f"importing memories: 2/{n} memories (") and " left)" in line for line in said), said
    assert said[-1] == f"imported {n} memories (0 records already here)"
