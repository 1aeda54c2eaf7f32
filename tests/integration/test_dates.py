"""What the brain decides by the date, run as of fixed dates through the injected clock
(:mod:`cabrain.clock`): the first and the last day of a month, 29 February 2028 and the turn of a
year. Everything else the decisions look at (``valid_at``, ``created_at``, ``invalid_at``,
``processed_at``) is set explicitly, so these tests pass whatever day they run on."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import asyncpg
import pytest

from cabrain.brain import Brain
from cabrain.service import ensure_schema
from cabrain.sleep.cycle import run_cycle
from cabrain.store import inbox
from cabrain.types import MemoryInput, MemoryType, Network


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


class Frozen:
    """A clock that stands still until the test moves it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def partition(moment: datetime) -> str:
    return "memories_p" + moment.astimezone(UTC).strftime("%Y%m")


def months_from(first: str, n: int) -> list[str]:
    year, month = int(first[:4]), int(first[5:7])
    out = []
    for _ in range(n):
        out.append(f"memories_p{year:04d}{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


async def _sql(dsn: str, query: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(query, *args)
    finally:
        await conn.close()


@pytest.fixture
async def brain_at(db_dsn, settings_for, embedder, brain):
    """Open a Brain on the test's database (agents and namespace made by ``brain``) whose clock is ``clock``."""
    opened = []

    async def make(clock: Frozen, **overrides: object) -> Brain:
        b = await Brain.open(settings_for(db_dsn, **overrides), dsn=db_dsn, embedder=embedder, clock=clock)
        opened.append(b)
        return b

    yield make
    for b in opened:
        await b.close()


# --- decay -----------------------------------------------------------------------------------------
DECAY_SPANS = [  # stored, then decayed as of
    pytest.param("2027-02-01T00:00:00", "2027-03-01T00:00:00", id="to-the-first-of-a-month"),
    pytest.param("2027-03-31T23:59:59", "2027-04-30T23:59:59", id="to-the-last-of-a-month"),
    pytest.param("2028-02-28T12:00:00", "2028-03-01T12:00:00", id="over-29-february"),  # 2 days, not 1
    pytest.param("2027-12-31T23:59:00", "2028-01-01T00:01:00", id="over-new-year"),  # 2 minutes
]


@pytest.mark.parametrize(("stored", "as_of"), DECAY_SPANS)
async def test_decay_counts_the_time_up_to_the_clock(
    brain,
    db_dsn,
    settings_for,
    stored,
    as_of,
) -> None:
    stored, clock = at(stored), Frozen(at(as_of))
    [r] = await brain.retain(
        "alice",
        [MemoryInput("Weekly sync notes, nothing decided.", "proj", importance=0.5, valid_at=stored)],
        decide=False,
    )
    await _sql(db_dsn, "UPDATE memories SET created_at = $1", stored)
    settings = settings_for(
        db_dsn, sleep_decay_half_life_days=30, sleep_decay_salience_boost=4, sleep_decay_min_change=0
    )

    first = await run_cycle(settings, db_dsn, steps=["decay"], use_ray=False, clock=clock)
    [row] = await _sql(db_dsn, "SELECT importance, decayed_at FROM memories WHERE id = $1", r.memory_id)
    days = (clock.now - stored).total_seconds() / 86400
    assert first.steps["decay"]["decayed"] == 1
    assert row["importance"] == pytest.approx(0.5 * 2 ** (-days / (30 * (1 + 4 * 0.5))), rel=1e-6)
    assert row["importance"] < 0.5 and row["decayed_at"] == clock.now

    again = await run_cycle(settings, db_dsn, steps=["decay"], use_ray=False, clock=clock)
    assert again.steps["decay"].get("decayed", 0) == 0  # no time passed by the clock: nothing to do

    clock.now += timedelta(days=1)  # a day later it decays by that day, from where it was
    before = row["importance"]
    await run_cycle(settings, db_dsn, steps=["decay"], use_ray=False, clock=clock)
    [row] = await _sql(db_dsn, "SELECT importance, decayed_at FROM memories WHERE id = $1", r.memory_id)
    assert row["importance"] == pytest.approx(before * 2 ** (-1 / (30 * (1 + 4 * before))), rel=1e-6)
    assert row["decayed_at"] == clock.now


# --- demotion --------------------------------------------------------------------------------------
MOMENTS = [  # the moment a memory becomes old enough, or the clock a decision is made at
    pytest.param("2027-03-01T00:00:00", id="first-of-a-month"),
    pytest.param("2027-04-30T23:59:59", id="last-of-a-month"),
    pytest.param("2028-02-29T12:00:00", id="29-february"),
    pytest.param("2028-01-01T00:00:00", id="new-year"),
]


@pytest.mark.parametrize("moment", MOMENTS)
async def test_a_memory_is_demoted_once_it_is_old_enough_and_not_a_moment_before(
    brain,
    db_dsn,
    settings_for,
    moment,
) -> None:
    moment = at(moment)
    episode_at, forgotten_at = moment - timedelta(days=30), moment - timedelta(days=7)
    [episode] = await brain.retain(
        "alice",
        [MemoryInput("Someone mentioned the coffee.", "proj", importance=0.1, valid_at=episode_at)],
        decide=False,
    )
    [fact] = await brain.retain(
        "alice",
        [
            MemoryInput(
                "The office wifi password is on the fridge.",
                "proj",
                network=Network.FACT,
                memory_type=MemoryType.SEMANTIC,
                valid_at=forgotten_at,
            )
        ],
        decide=False,
    )
    await brain.forget("alice", fact.memory_id, reason="wrong")
    await _sql(db_dsn, "UPDATE memories SET created_at = $2 WHERE id = $1", episode.memory_id, episode_at)
    await _sql(
        db_dsn, "UPDATE memories SET created_at = $2, invalid_at = $2 WHERE id = $1", fact.memory_id, forgotten_at
    )
    settings = settings_for(
        db_dsn, sleep_demote_after_days=30, sleep_demote_invalid_after_days=7, sleep_demote_keep_importance=0.5
    )

    async def demoted_as_of(now: datetime) -> int:
        report = await run_cycle(settings, db_dsn, steps=["demote"], use_ray=False, clock=Frozen(now))
        return report.steps["demote"].get("demoted", 0)

    assert await demoted_as_of(moment - timedelta(days=1)) == 0  # a day before
    assert await demoted_as_of(moment - timedelta(seconds=1)) == 0
    assert await demoted_as_of(moment) == 0  # exactly 30 (7) days old is not older than that
    assert await demoted_as_of(moment + timedelta(seconds=1)) == 2
    tiers = await _sql(
        db_dsn, "SELECT tier FROM memory_ids WHERE id = ANY($1::uuid[])", [episode.memory_id, fact.memory_id]
    )
    assert {r["tier"] for r in tiers} == {"cold"}


# --- the consolidation window ----------------------------------------------------------------------
@pytest.mark.parametrize("moment", MOMENTS)
async def test_consolidation_reads_the_episodes_stored_within_the_window_of_the_clock(
    brain,
    db_dsn,
    settings_for,
    moment,
) -> None:
    clock = Frozen(at(moment))
    edge = clock.now - timedelta(days=7)
    stored = {
        "The build cache lives on the shared NFS volume.": edge,  # exactly 7 days: out
        "Alice prefers tabs over spaces in Makefiles.": edge + timedelta(seconds=1),
        "The quarterly review moved to Thursday.": clock.now,
    }
    for text, when in stored.items():
        [r] = await brain.retain("alice", [MemoryInput(text, "proj", valid_at=when)], decide=False)
        await _sql(db_dsn, "UPDATE memories SET created_at = $2 WHERE id = $1", r.memory_id, when)
    settings = settings_for(db_dsn, sleep_consolidate_window_days=7)

    report = await run_cycle(settings, db_dsn, steps=["consolidate"], use_ray=False, clock=clock)
    assert report.steps["consolidate"]["episodes_read"] == 2
    clock.now += timedelta(seconds=1)  # the second episode reaches the edge
    report = await run_cycle(settings, db_dsn, steps=["consolidate"], use_ray=False, clock=clock)
    assert report.steps["consolidate"]["episodes_read"] == 1
    clock.now += timedelta(days=7)
    report = await run_cycle(settings, db_dsn, steps=["consolidate"], use_ray=False, clock=clock)
    assert report.steps["consolidate"].get("episodes_read", 0) == 0


# --- monthly partitions ----------------------------------------------------------------------------
PARTITION_CLOCKS = [  # the clock, and the month before its UTC month
    pytest.param("2027-03-01T00:00:00+00:00", "2027-02", id="first-of-a-month"),
    pytest.param("2027-04-30T23:59:59+00:00", "2027-03", id="last-of-a-month"),
    pytest.param("2028-02-29T12:00:00+00:00", "2028-01", id="29-february"),
    pytest.param("2027-12-31T23:59:59+00:00", "2027-11", id="new-years-eve"),
    pytest.param("2028-01-01T00:30:00+01:00", "2027-11", id="new-year-in-utc+1-is-still-december-in-utc"),
]


@pytest.mark.parametrize(("moment", "month_before"), PARTITION_CLOCKS)
async def test_partitions_are_made_for_the_clocks_month_and_the_months_around_it(
    db_dsn,
    settings_for,
    moment,
    month_before,
) -> None:
    clock = Frozen(datetime.fromisoformat(moment))
    existing = "SELECT relname FROM pg_class WHERE relname ~ '^memories_p[0-9]{6}$'"
    settings = settings_for(db_dsn, sleep_partitions_ahead=6)
    # at start-up (the database is migrated already): the month before the clock's and three ahead
    await ensure_schema(settings, db_dsn, clock=clock)
    assert set(months_from(month_before, 5)) <= {r["relname"] for r in await _sql(db_dsn, existing)}
    # maintain: the clock's month and sleep_partitions_ahead ahead
    await run_cycle(settings, db_dsn, steps=["maintain"], use_ray=False, clock=clock)
    assert set(months_from(month_before, 8)[1:]) <= {r["relname"] for r in await _sql(db_dsn, existing)}


VALID_AT = [
    pytest.param(at("2028-02-29T12:00:00"), id="29-february"),
    pytest.param(at("2027-12-31T23:59:59"), id="new-years-eve-23:59:59"),
    pytest.param(at("2027-12-31T23:59:59.999999"), id="the-last-microsecond-of-the-year"),
    pytest.param(at("2028-01-01T00:00:00"), id="new-year"),
    pytest.param(at("2027-03-01T00:00:00"), id="first-of-a-month"),
    pytest.param(at("2027-04-30T23:59:59"), id="last-of-a-month"),
    pytest.param(datetime(2028, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1))), id="new-year-in-utc+1"),
]


@pytest.mark.parametrize("moment", VALID_AT)
async def test_a_memory_written_as_of_a_date_lands_in_the_partition_of_its_utc_month(
    brain_at,
    db_dsn,
    settings_for,
    moment,
) -> None:
    writer = await brain_at(Frozen(moment))
    [r] = await writer.retain(
        "alice", [MemoryInput("The release train leaves every second Tuesday.", "proj")], decide=False
    )
    placed = "SELECT valid_at, tableoid::regclass::text AS part FROM memories WHERE id = $1"
    [row] = await _sql(db_dsn, placed, r.memory_id)
    assert row["valid_at"] == moment  # no valid_at given: it happened at the clock's now
    assert row["part"] in ("memories_default", partition(moment))  # its month's partition may not exist yet
    # maintain, as of any day, gives a month whose rows wait in the default partition its own partition
    some_day = Frozen(at("2031-06-15T00:00:00"))
    await run_cycle(settings_for(db_dsn), db_dsn, steps=["maintain"], use_ray=False, clock=some_day)
    [row] = await _sql(db_dsn, placed, r.memory_id)
    assert row["part"] == partition(moment)
    assert (await _sql(db_dsn, "SELECT count(*) AS n FROM memories_default"))[0]["n"] == 0


async def test_salience_counts_recency_by_the_brains_clock(brain, brain_at) -> None:
    happened = at("2028-02-29T12:00:00")
    scores = []
    for n, now in enumerate((happened, happened + timedelta(days=30))):
        writer = await brain_at(Frozen(now))
        [r] = await writer.retain(
            "alice",
            [MemoryInput("The staging database moved to db-stg-2.", "proj", source_ref=f"r{n}", valid_at=happened)],
            decide=False,
        )
        scores.append(r.importance)
    assert scores[0] - scores[1] == pytest.approx(0.10 * (1 - math.exp(-1)), abs=2e-4)  # recency: exp(-age / 30 days)


# --- the capture inbox's retention -----------------------------------------------------------------
@pytest.mark.parametrize(
    "moment",
    [
        pytest.param("2027-02-28T23:00:00", id="into-the-first-of-a-month"),
        pytest.param("2027-04-30T22:59:59", id="to-the-last-second-of-a-month"),
        pytest.param("2028-02-28T23:30:00", id="into-29-february"),
        pytest.param("2027-12-31T23:59:59", id="over-new-year"),
    ],
)
async def test_the_capture_inbox_keeps_rows_exactly_as_long_as_its_retention(
    brain,
    brain_at,
    db_dsn,
    moment,
) -> None:
    done_at = at(moment)
    kept = await brain.capture("alice", "proj", [{"content": "User asked: rotate the TLS certificate."}])
    failed = await brain.capture("alice", "proj", [{"content": "User asked: something that never stored."}])
    async with brain.engine.pool.acquire() as conn:
        await conn.execute("UPDATE capture_inbox SET processed_at = $2 WHERE id = $1", kept, done_at)
        await conn.execute(
            "UPDATE capture_inbox SET attempts = $2, created_at = $3, last_error = 'boom' WHERE id = $1",
            failed,
            inbox.MAX_ATTEMPTS,
            done_at,
        )
    clock = Frozen(done_at)
    drainer = await brain_at(clock, capture_inbox_retention_s=3600, capture_inbox_failed_retention_s=86400)

    async def left_at(now: datetime) -> set[int]:
        clock.now = now
        await drainer.drain_captures()
        return {r["id"] for r in await _sql(db_dsn, "SELECT id FROM capture_inbox")}

    assert await left_at(done_at + timedelta(hours=1)) == {kept, failed}  # exactly the retention: still kept
    assert await left_at(done_at + timedelta(hours=1, seconds=1)) == {failed}
    assert await left_at(done_at + timedelta(days=1)) == {failed}
    assert await left_at(done_at + timedelta(days=1, seconds=1)) == set()
