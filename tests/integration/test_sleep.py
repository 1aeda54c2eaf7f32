"""The sleep cycle on a real database and a real Iceberg cold tier (the SPEC's Gate 2)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cabrain.errors import InputError, NotFound
from cabrain.sleep.cycle import LOCK_CLASS, run_cycle
from cabrain.store.cold import ColdTier
from cabrain.store.sleep import TRY_LOCK
from cabrain.types import (
    ArchiveQuery,
    MemoryInput,
    MemoryType,
    Network,
    RecallQuery,
    Visibility,
)

SESSIONS = [
    [
        "The staging database runs PostgreSQL 16 on host db-stg-1.",
        "Deploys to staging go through the GitHub Actions workflow deploy.yml.",
        "We picked Redis Streams for the job queue because it has consumer groups.",
    ],
    [
        "Staging's database is PostgreSQL 16 on the host db-stg-1.",
        "The deploy.yml GitHub Actions workflow deploys staging.",
        "Lunch order: falafel for everyone.",
    ],
    [
        "The staging DB is PostgreSQL 16, hosted on db-stg-1.",
        "Staging deploys run through the deploy.yml workflow in GitHub Actions.",
        "Redis Streams was chosen for the job queue: consumer groups.",
    ],
    [
        "Our staging database: PostgreSQL 16 running on db-stg-1.",
        "We use Redis Streams for the job queue since it supports consumer groups.",
    ],
]


async def _age(dsn: str, days: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:  # time passes: everything stored so far happened `days` ago
        await conn.execute("UPDATE memories SET created_at = created_at - make_interval(days => $1)", days)
    finally:
        await conn.close()


async def test_gate_2_a_sleep_run_distills_supersedes_and_demotes(brain, db_dsn, settings_for) -> None:
    now = datetime.now(UTC)
    for n, session in enumerate(SESSIONS):
        await brain.retain(
            "alice",
            [
                MemoryInput(
                    text,
                    "proj",
                    source_kind="claude_code",
                    source_ref=f"session-{n}",
                    visibility=Visibility.TEAM,
                    valid_at=now - timedelta(days=60 - n),
                )
                for text in session
            ],
            decide=False,
        )
    old_event = (await brain.list_memories("alice", "proj"))[0]
    await _age(db_dsn, 60)  # they were stored back then, too
    await brain.retain(
        "alice",
        [
            MemoryInput(
                "The public API rate limit is 100 requests per minute.",
                "proj",
                network=Network.FACT,
                memory_type=MemoryType.SEMANTIC,
                valid_at=now - timedelta(days=2),
            )
        ],
        decide=False,
    )
    await brain.retain(
        "alice",
        [
            MemoryInput(
                "The public API rate limit is 250 requests per minute now.",
                "proj",
                network=Network.FACT,
                memory_type=MemoryType.SEMANTIC,
                valid_at=now - timedelta(days=1),
            )
        ],
        decide=False,
    )
    conn = await asyncpg.connect(db_dsn)
    try:
        hot_before = await conn.fetchval("SELECT count(*) FROM memories WHERE namespace = 'proj'")
    finally:
        await conn.close()
    settings = settings_for(
        db_dsn, sleep_demote_after_days=30, sleep_consolidate_window_days=90, sleep_demote_invalid_after_days=0
    )
    report = await run_cycle(settings, db_dsn, use_ray=False)
    assert report.status == "done", report.tasks
    assert report.sleep_role == "cabrain_sleep"  # the steps ran as the offline plane's own role
    conn = await asyncpg.connect(db_dsn)
    try:
        facts = await conn.fetch(
            "SELECT id, content, metadata FROM memories WHERE namespace = 'proj' AND source_kind = 'sleep' "
            "AND memory_type = 'semantic' AND network = 'fact'"
        )
        assert any("db-stg-1" in f["content"] for f in facts), [f["content"] for f in facts]
        for fact in facts:  # provenance: every distilled fact links to the episodes it came from
            sources = await conn.fetch("SELECT source_id FROM memory_sources WHERE memory_id = $1", fact["id"])
            assert len(sources) >= 3
        summaries = await conn.fetch(
            "SELECT name, summary FROM entities WHERE namespace = 'proj' AND summary IS NOT NULL"
        )
        rate = await conn.fetch(
            "SELECT content, invalid_at FROM memories WHERE namespace = 'proj' "
            "AND content LIKE 'The public API rate limit%' ORDER BY valid_at"
        )
        hot_after = await conn.fetchval("SELECT count(*) FROM memories WHERE namespace = 'proj'")
        cold_ids = await conn.fetchval("SELECT count(*) FROM memory_ids WHERE namespace = 'proj' AND tier = 'cold'")
        run = await conn.fetchrow("SELECT status, report FROM sleep_runs WHERE id = $1", report.run_id)
    finally:
        await conn.close()
    assert summaries, "entity summaries were written"
    # the contradicted fact was superseded (not duplicated), then went cold with its reason
    assert [(r["content"], r["invalid_at"]) for r in rate] == [
        ("The public API rate limit is 250 requests per minute now.", None)
    ]
    assert hot_after < hot_before and cold_ids >= 10
    assert run["status"] == "done"
    archived = {r["id"]: r for r in ColdTier(settings).scan("proj").to_pylist()}
    assert str(old_event.id) in archived  # the old raw event is kept in the cold tier
    [old_rate] = [r for r in archived.values() if r["content"].startswith("The public API rate limit is 100")]
    assert old_rate["invalid_at"] is not None and old_rate["superseded_by"] is not None
    assert "contradicted by newer evidence" in json.loads(old_rate["metadata"])["superseded_reason"]
    # the archive recall still returns the old raw event on request, with its provenance
    found = await brain.recall_archive("alice", ArchiveQuery(old_event.content, "proj", k=5))
    assert found.hits[0].memory.id == old_event.id and found.hits[0].memory.tier == "cold"
    top = found.hits[0]
    assert top.memory.source_kind == "claude_code" and top.memory.source_ref == "session-0"
    assert str(top.batch) == archived[str(old_event.id)]["demote_batch"]
    assert found.scanned == len(archived) and found.files >= 1
    facts_of_event = {link.memory_id for link in top.derived if link.relation == "distilled_from"}
    assert facts_of_event and facts_of_event <= {f["id"] for f in facts}  # the facts it became
    superseded = await brain.recall_archive("alice", ArchiveQuery("public API rate limit", "proj", k=3))
    assert superseded.hits[0].memory.content.startswith("The public API rate limit is 100")
    current = await brain.recall_archive(
        "alice", ArchiveQuery("public API rate limit", "proj", k=3, include_invalid=False)
    )
    assert all(h.memory.invalid_at is None for h in current.hits)
    # the hot recall never sees the cold tier
    hot = await brain.recall("alice", RecallQuery(old_event.content, "proj", k=20))
    assert old_event.id not in {h.memory.id for h in hot.hits}
    # get answers a demoted id from the cold tier; correcting it is refused with a clear error (forgetting
    # it works: tests/integration/test_retention.py)
    got = await brain.get("alice", old_event.id)
    assert got.memory.tier == "cold" and got.memory.content == old_event.content
    with pytest.raises(InputError, match="cold tier"):
        await brain.reconsolidate("alice", old_event.id, "A corrected version of an archived event.")
    # the same scoping as hot recall: bob sees these team memories only with a grant
    assert (await brain.recall_archive("bob", ArchiveQuery(old_event.content, "proj"))).hits == []
    with pytest.raises(NotFound):
        await brain.get("bob", old_event.id)
    await brain.share("alice", "proj", "bob")
    assert (await brain.recall_archive("bob", ArchiveQuery(old_event.content, "proj", k=1))).hits[
        0
    ].memory.id == old_event.id
    # time ranges: the event happened 60 days ago
    window = ArchiveQuery(old_event.content, "proj", valid_from=now - timedelta(days=30))
    assert old_event.id not in {h.memory.id for h in (await brain.recall_archive("alice", window)).hits}
    window = ArchiveQuery(
        old_event.content, "proj", valid_from=now - timedelta(days=61), valid_to=now - timedelta(days=59)
    )
    assert old_event.id in {h.memory.id for h in (await brain.recall_archive("alice", window)).hits}
    again = await run_cycle(settings, db_dsn, use_ray=False)  # idempotent: nothing left to do
    assert again.steps.get("consolidate", {}).get("facts_created", 0) == 0
    assert again.steps.get("demote", {}).get("demoted", 0) == 0


async def test_bad_sleep_arguments_are_named_and_change_nothing(db_dsn: str, home) -> None:
    from tests.conftest import cli_env, run_cli

    env = cli_env(database_url=db_dsn, home=str(home))
    bad_step = run_cli("sleep", "--inline", "--steps", "consolidate,dream", env=env)
    assert bad_step.returncode != 0 and "unknown sleep step(s): dream" in bad_step.stderr
    bad_namespace = run_cli("sleep", "--inline", "--namespace", "nowhere", env=env)
    assert bad_namespace.returncode != 0 and "unknown namespace(s): nowhere" in bad_namespace.stderr
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM sleep_runs") == 0
    finally:
        await conn.close()
    # --json: the report alone on stdout (progress goes to stderr), so it parses
    report = run_cli("sleep", "--inline", "--steps", "decay", "--json", env=env)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["status"] == "done"


async def test_two_cycles_never_work_on_one_namespace_at_once(brain, db_dsn, settings_for) -> None:
    now = datetime.now(UTC)
    for n, session in enumerate(SESSIONS):
        await brain.retain(
            "alice",
            [
                MemoryInput(text, "proj", visibility=Visibility.TEAM, valid_at=now - timedelta(days=5, hours=n))
                for text in session
            ],
            decide=False,
        )
    settings = settings_for(db_dsn)
    # a cycle that holds the namespace (its driver's advisory lock) makes another skip it
    holder = await asyncpg.connect(db_dsn)
    try:
        assert await holder.fetchval(TRY_LOCK, LOCK_CLASS, "proj")
        skipped = await run_cycle(settings, db_dsn, use_ray=False)
        assert skipped.skipped == {"proj": "another sleep cycle is working on it"} and skipped.namespaces == []
    finally:
        await holder.close()  # a driver that dies releases its locks with its connection
    # two cycles started together: each namespace is worked by exactly one of them
    one, two = await asyncio.gather(
        run_cycle(settings, db_dsn, use_ray=False), run_cycle(settings, db_dsn, use_ray=False)
    )
    assert sorted([one.namespaces, two.namespaces]) == [[], ["proj"]]
    assert (one.skipped or two.skipped) == {"proj": "another sleep cycle is working on it"}
    conn = await asyncpg.connect(db_dsn)
    try:
        facts = await conn.fetch(
            "SELECT content FROM memories WHERE source_kind = 'sleep' AND memory_type = 'semantic'"
        )
        steps = await conn.fetchval(
            "SELECT count(*) FROM sleep_steps WHERE namespace = 'proj' AND step = 'consolidate'"
        )
    finally:
        await conn.close()
    assert len(facts) == len({f["content"] for f in facts}) > 0  # distilled once, not twice
    assert steps == 1


async def test_the_scheduler_runs_cycles_until_told_to_stop(db_dsn: str, home) -> None:
    from tests.conftest import cli_env, run_cli

    env = cli_env(database_url=db_dsn, home=str(home))
    ran = run_cli("sleep", "--inline", "--schedule", "--every", "0.5", "--max-runs", "2", "--steps", "decay", env=env)
    assert ran.returncode == 0, ran.stderr
    finished = [line for line in ran.stdout.splitlines() if line.startswith("run ") and ": done in " in line]
    assert len(finished) == 2 and "sleep scheduler: every 0.5 s" in ran.stdout
    conn = await asyncpg.connect(db_dsn)
    try:
        runs = await conn.fetch("SELECT status, started_at, finished_at FROM sleep_runs ORDER BY started_at")
    finally:
        await conn.close()
    assert [r["status"] for r in runs] == ["done", "done"]
    # one after the other; the spacing itself is next_run's (tests/unit/test_sleep_schedule.py, on a
    # fake clock): the rows' times are taken inside each run, so their gap moves with the machine's load
    assert runs[1]["started_at"] >= runs[0]["finished_at"]
    bad_time = run_cli("sleep", "--schedule", "--at", "25:00", env=env)
    assert bad_time.returncode == 2 and "HH:MM" in bad_time.stderr
    loose = run_cli("sleep", "--inline", "--every", "5", env=env)
    assert loose.returncode != 0 and "go with --schedule" in loose.stderr


async def test_sleep_connects_as_its_own_role_which_cannot_touch_keys_or_grants(
    db_dsn, settings_for, pg_server
) -> None:
    from cabrain.sleep.cycle import sleep_dsn

    dsn, role = await sleep_dsn(settings_for(db_dsn), db_dsn)
    assert role == "cabrain_sleep"
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT current_user") == "cabrain_sleep"
        assert await conn.fetchval("SELECT count(*) FROM memories") == 0  # it reads memories
        for statement in (
            "SELECT count(*) FROM agent_keys",
            "SELECT count(*) FROM console_sessions",
            "DELETE FROM namespace_grants",
            "UPDATE agents SET is_admin = true",
            "SELECT count(*) FROM capture_inbox",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
    finally:
        await conn.close()
    # an explicit URL wins (a password-protected role on a remote server, say)
    explicit = settings_for(db_dsn, sleep_database_url=db_dsn)
    assert await sleep_dsn(explicit, db_dsn) == (db_dsn, "CABRAIN_SLEEP_DATABASE_URL")


async def test_dedup_merges_near_duplicates_but_leaves_contradictions_to_reconsolidate(
    brain, db_dsn, settings_for
) -> None:
    now = datetime.now(UTC)
    fact = {"visibility": Visibility.TEAM, "network": Network.FACT, "memory_type": MemoryType.SEMANTIC}
    texts = [  # (text, days ago): two wordings of one fact, then a fact and its newer contradiction
        ("The staging database runs PostgreSQL 16 on host db-stg-1.", 5),
        ("Staging's database is PostgreSQL 16 on the host db-stg-1.", 4),
        ("The public API rate limit is 100 requests per minute.", 3),
        ("The public API rate limit is 250 requests per minute.", 2),
    ]
    ids = []
    for text, days in texts:
        [r] = await brain.retain(
            "alice", [MemoryInput(text, "proj", valid_at=now - timedelta(days=days), **fact)], decide=False
        )
        ids.append(r.memory_id)
        await asyncio.sleep(0.01)  # distinct created_at: the earliest survives
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET importance = 0.9 WHERE id = $1", ids[1])
    finally:
        await conn.close()
    settings = settings_for(db_dsn, sleep_dedup_similarity=0.9)  # low enough to reach the rate pair
    report = await run_cycle(settings, db_dsn, steps=["dedup", "reconsolidate"], use_ray=False)
    assert report.steps["dedup"]["merged"] == 1 and report.steps["reconsolidate"]["superseded"] == 1
    got = [await brain.get("alice", i) for i in ids]
    survivor, merged, old_rate, new_rate = (g.memory for g in got)
    assert survivor.invalid_at is None and merged.superseded_by == survivor.id
    assert "dedup: near-duplicate" in merged.metadata["superseded_reason"]
    assert survivor.importance > 0.89  # the survivor absorbed what it merged (real: 0.9 as float32)
    assert old_rate.superseded_by == new_rate.id and new_rate.invalid_at is None  # the newer value won
    conn = await asyncpg.connect(db_dsn)
    try:
        sources = await conn.fetch("SELECT source_id, relation FROM memory_sources WHERE memory_id = $1", ids[0])
    finally:
        await conn.close()
    assert [(r["source_id"], r["relation"]) for r in sources] == [(ids[1], "merged")]


async def test_decay_fades_salient_memories_slowest_and_rewrites_only_what_moved(brain, db_dsn, settings_for) -> None:
    now = datetime.now(UTC)
    ids = []
    for text, importance in (
        ("Weekly sync notes, nothing decided.", 0.2),
        ("The production database password rotates on the 1st.", 0.9),
        ("Someone mentioned the coffee machine.", 0.06),
    ):
        [r] = await brain.retain(
            "alice", [MemoryInput(text, "proj", importance=importance, valid_at=now - timedelta(days=60))], decide=False
        )
        ids.append(r.memory_id)
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '60 days'")
        settings = settings_for(db_dsn)
        first = await run_cycle(settings, db_dsn, steps=["decay"], use_ray=False)
        after = {r["id"]: r["importance"] for r in await conn.fetch("SELECT id, importance FROM memories")}
        # importance * 2 ** (-60 / (30 * (1 + 4 * importance))), never under the 0.05 floor
        assert after[ids[0]] == pytest.approx(0.2 * 2 ** (-60 / 54), rel=1e-3)
        assert after[ids[1]] == pytest.approx(0.9 * 2 ** (-60 / 138), rel=1e-3)
        assert after[ids[2]] == pytest.approx(0.05)
        assert after[ids[1]] / 0.9 > after[ids[0]] / 0.2  # the salient one kept more of itself
        assert first.steps["decay"]["decayed"] == 3
        again = await run_cycle(settings, db_dsn, steps=["decay"], use_ray=False)
        assert again.steps["decay"].get("decayed", 0) == 0  # nothing moved by 0.01 since: no row rewritten
        # the rewrites were HOT updates (no new index entries): no index covers importance any more
        hot_updates = 0
        for _ in range(50):
            hot_updates = await conn.fetchval(
                "SELECT coalesce(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables "
                "WHERE relname LIKE 'memories_p%' OR relname = 'memories_default'"  # 60 days back may predate the partitions
            )
            if hot_updates >= 3:
                break
            await asyncio.sleep(0.1)
        assert hot_updates >= 3
    finally:
        await conn.close()
