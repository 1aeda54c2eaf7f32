"""As of a time (issue 34): recall, get and browse answer what the brain held true then - the versions
valid at or before it and not yet superseded or forgotten then - on a memory revised twice, through
every search path, and the L1 cache keeps the times apart. Recall without ``as_of`` is unchanged, in
its answers and in its plans."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from cabrain.errors import InputError, NotFound
from cabrain.store import vector as vector_sql
from cabrain.store.browse import BrowseFilters
from cabrain.types import Memory, MemoryInput, RecallMode, RecallQuery
from tests.conftest import brings, start_redis

QUESTION = "which host does the staging database run on?"
WORDINGS = (
    "The staging database runs on host db-1 in rack A.",
    "The staging database runs on host db-2 in rack B.",
    "The staging database runs on host db-3 in rack C.",
)
FIRST_TRUE = datetime(2025, 1, 1, 9, tzinfo=UTC)


@dataclasses.dataclass
class Revised:
    """A memory revised twice (``versions``, oldest first) beside one that never changed, and a
    moment inside each version's time as the current one."""

    versions: list[Memory]
    other: Memory

    def between(self, a: datetime, b: datetime) -> datetime:
        assert a < b
        return a + (b - a) / 2

    @property
    def before(self) -> datetime:  # before the first version was true
        return FIRST_TRUE - timedelta(days=1)

    def during(self, i: int) -> datetime:
        """A moment when version ``i`` alone was current: after its predecessor ended, before its
        successor began. (A revision's ``valid_at`` is when its write began, the old version's
        ``invalid_at`` when its transaction did, after the embedding: for those milliseconds both
        were true.)"""
        v = self.versions
        start = v[0].valid_at if i == 0 else max(v[i - 1].invalid_at, v[i].valid_at)  # type: ignore[type-var]
        end = v[i + 1].valid_at if i + 1 < len(v) else datetime.now(UTC)
        return self.between(start, end)

    @property
    def ids(self) -> list:
        return [m.id for m in self.versions]


async def revise(brain) -> Revised:
    [other] = await brain.retain(
        "alice",
        MemoryInput("Sara prefers dark mode in every editor.", "proj", valid_at=FIRST_TRUE - timedelta(days=30)),
    )
    [first] = await brain.retain("alice", MemoryInput(WORDINGS[0], "proj", valid_at=FIRST_TRUE))
    second = await brain.reconsolidate("alice", first.memory_id, WORDINGS[1], reason="moved")
    third = await brain.reconsolidate("alice", second.memory_id, WORDINGS[2], reason="moved again")
    ids = (first.memory_id, second.memory_id, third.memory_id)
    versions = [(await brain.get("alice", i)).memory for i in ids]
    assert [m.content for m in versions] == list(WORDINGS)
    # each revision ended its predecessor, the last one is current
    assert versions[0].invalid_at < versions[2].valid_at < versions[1].invalid_at and versions[2].invalid_at is None
    return Revised(versions, (await brain.get("alice", other.memory_id)).memory)


async def recalled(brain, as_of: datetime | None, **kw) -> list:
    result = await brain.recall("alice", RecallQuery(QUESTION, "proj", k=5, as_of=as_of, **kw))
    return [h.memory.id for h in result.hits]


@pytest.mark.parametrize("mode", list(RecallMode))
@pytest.mark.parametrize("path", ["exact", "graph"])
async def test_recall_as_of_each_time_finds_the_version_current_then(open_brain, mode, path):
    # "graph": the HNSW walk over memory_vectors, which keeps a superseded version's vector
    settings = {"vector_exact_max": 0, "vector_skip_cost": 0.0} if path == "graph" else {}
    brain = await open_brain(**settings)
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    revised = await revise(brain)

    def versions(ids: list) -> list:
        return [i for i in ids if i in revised.ids]

    walks_before = await graph_walks(brain)

    assert versions(await recalled(brain, revised.before, mode=mode)) == []  # not true yet
    assert await recalled(brain, revised.other.valid_at - timedelta(seconds=1), mode=mode) == []  # nothing was
    for i, version in enumerate(revised.versions):
        assert versions(await recalled(brain, revised.during(i), mode=mode)) == [version.id], i
    now = await recalled(brain, None, mode=mode)
    assert versions(now) == [revised.versions[2].id]
    # with its history too: every version valid by then, the current one among them
    with_history = await recalled(brain, revised.during(1), mode=mode, include_invalid=True)
    assert sorted(map(str, versions(with_history))) == sorted(map(str, revised.ids[:2]))
    if mode is not RecallMode.BM25:  # the other memory shares no word with the question
        assert revised.other.id in now and revised.other.id in await recalled(brain, revised.during(0), mode=mode)
    walked = await graph_walks(brain) > walks_before
    if path == "exact" or mode is not RecallMode.BM25:  # (BM25 alone walks no graph, which the write may have)
        assert walked == (path == "graph")


async def graph_walks(brain) -> int:
    """How often the HNSW graph of memory_vectors was walked. A backend reports its counts when it
    goes idle at most once a second, else some seconds later: every connection of the pool (those
    that ran the recalls among them) is told to report them before the count is read."""
    pool = brain.engine.pool
    held = [await pool.acquire() for _ in range(pool.get_max_size())]
    try:
        for conn in held:  # the flush happens as the statement ends, before its answer comes back
            await conn.execute("SELECT pg_stat_force_next_flush()")
        await held[0].execute("SELECT pg_stat_clear_snapshot()")
        sql = "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'memory_vectors_hnsw'"
        return await held[0].fetchval(sql)
    finally:
        for conn in held:
            await pool.release(conn)


async def test_recall_without_as_of_is_what_it_was(brain):
    revised = await revise(brain)
    query = RecallQuery(QUESTION, "proj", k=5)
    now = await brain.recall("alice", query)
    assert now.hits[0].memory.content == WORDINGS[2]
    assert all(h.memory.invalid_at is None for h in now.hits) and len(now.hits) == 2
    # as of the far future: the same hits, in the same order, with the same scores
    later = await brain.recall("alice", dataclasses.replace(query, as_of=datetime(9999, 12, 30, tzinfo=UTC)))
    assert [(h.memory.id, h.score) for h in later.hits] == [(h.memory.id, h.score) for h in now.hits]
    assert revised.versions[0].id not in [h.memory.id for h in now.hits]


async def test_get_as_of_answers_the_version_current_then_with_its_own_history(brain):
    revised = await revise(brain)
    v = revised.versions
    for asked in revised.ids:  # whichever version's id is asked for
        for i in range(3):
            got = await brain.get("alice", asked, as_of=revised.during(i))
            assert got.memory.id == v[i].id and got.memory.content == WORDINGS[i]
            assert [m.id for m in got.previous] == revised.ids[:i] and [m.id for m in got.next] == revised.ids[i + 1 :]
        with pytest.raises(NotFound, match=r"no version of memory .* was current at 2024-12-31"):
            await brain.get("alice", asked, as_of=revised.before)
        assert (await brain.get("alice", asked)).memory.id == asked  # without as_of: the version asked for
    naive = await brain.get("alice", v[2].id, as_of=revised.during(0).replace(tzinfo=None))
    assert naive.memory.id == v[0].id  # a naive time is UTC
    with pytest.raises(NotFound):  # another agent: as unknown as without as_of
        await brain.get("bob", v[2].id, as_of=revised.during(2))
    with pytest.raises(InputError, match="outside the times CaBrain keeps"):
        await brain.get("alice", v[2].id, as_of=datetime(1, 1, 1, tzinfo=UTC))

    then = revised.during(2)
    gone = await brain.forget("alice", v[2].id, reason="decommissioned")
    assert (await brain.get("alice", v[0].id, as_of=then)).memory.id == v[2].id  # true then
    with pytest.raises(NotFound):  # since forgotten: nothing of it is true
        await brain.get("alice", v[0].id, as_of=gone.memory.invalid_at)
    assert await recalled(brain, gone.memory.invalid_at) == [revised.other.id]
    assert v[2].id in await recalled(brain, then)


async def test_browse_as_of_shows_the_namespace_as_it_stood(brain):
    revised = await revise(brain)

    async def page(**filters) -> list:
        return [m.id for m in (await brain.browse("alice", "proj", BrowseFilters(**filters), limit=50)).memories]

    assert await page(as_of=revised.before) == [revised.other.id]
    for i, version in enumerate(revised.versions):
        assert await page(as_of=revised.during(i)) == [version.id, revised.other.id]
    assert await page() == [revised.versions[2].id, revised.other.id]
    # with history: every version valid by then, newest first
    assert await page(as_of=revised.during(1), history=True) == [*reversed(revised.ids[:2]), revised.other.id]
    first_page = await brain.browse("alice", "proj", BrowseFilters(as_of=revised.during(2), history=True), limit=2)
    rest = await brain.browse(
        "alice", "proj", BrowseFilters(as_of=revised.during(2), history=True), limit=2, cursor=first_page.next_cursor
    )
    assert [m.id for m in first_page.memories + rest.memories] == [*reversed(revised.ids), revised.other.id]
    with pytest.raises(InputError, match="as_of looks at hot memories only"):
        await brain.browse("alice", "proj", BrowseFilters(as_of=revised.during(0)), archived=True)


async def test_recall_refuses_a_bad_as_of_or_dialogue_clearly(brain):
    await revise(brain)
    for query, message in (
        (RecallQuery("q", "proj", as_of=datetime(1, 1, 1, tzinfo=UTC)), "as_of: .* outside the times"),
        (RecallQuery("q", "proj", as_of="yesterday"), "as_of must be a date and time"),  # type: ignore[arg-type]
        (RecallQuery("q", "proj", context=("t",) * 21), "at most 20 are taken"),
        (RecallQuery("q", "proj", context=("fine", "bad\x00turn")), "context turn 2 contains a NUL"),
        (RecallQuery("q", "proj", context=("x" * 4001,)), "context turn 1 is 4001 characters, the limit is 4000"),
    ):
        with pytest.raises(InputError, match=message):
            await brain.recall("alice", query)
    # the extremes a time may take, and a dialogue of twenty turns, are answered
    for edge_time in (datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC), datetime(2025, 6, 1)):
        await brain.recall("alice", RecallQuery(QUESTION, "proj", as_of=edge_time))
    turns = tuple(f"earlier turn {i} about the staging database" for i in range(20))
    result = await brain.recall("alice", RecallQuery(QUESTION, "proj", context=turns))
    assert result.hits and result.hits[0].memory.content == WORDINGS[2]


@pytest.fixture
@brings("subprocess")
def redis_url(tmp_path):
    proc, url = start_redis(tmp_path)
    yield url
    proc.terminate()
    proc.wait(10)


async def test_the_cache_keeps_each_as_of_and_each_dialogue_apart(open_brain, redis_url):
    brain = await open_brain(redis_url=redis_url)
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    revised = await revise(brain)
    moments = [revised.during(i) for i in range(3)]
    for round_ in range(2):  # the second round from the cache, each time its own answer
        for moment, version in zip(moments, revised.versions, strict=True):
            result = await brain.recall("alice", RecallQuery(QUESTION, "proj", k=5, as_of=moment))
            assert result.cached == bool(round_)
            assert version.id in [h.memory.id for h in result.hits]
            assert not ({h.memory.id for h in result.hits} & (set(revised.ids) - {version.id}))
            assert (await brain.get("alice", revised.ids[2], as_of=moment)).memory.id == version.id
    plain = await brain.recall("alice", RecallQuery(QUESTION, "proj", k=5))
    talk = await brain.recall("alice", RecallQuery(QUESTION, "proj", k=5, context=("we talked about racks",)))
    assert not plain.cached and not talk.cached  # another dialogue is another question
    assert (await brain.recall("alice", RecallQuery(QUESTION, "proj", k=5, context=("we talked about racks",)))).cached


async def _custom_plan(conn, statement, values: dict[str, str]) -> str:
    async with conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        await conn.execute(f"PREPARE shape AS {statement.sql}")
        try:
            literals = ", ".join(values[name] for name in statement.names)
            return "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN (COSTS OFF) EXECUTE shape({literals})"))
        finally:
            await conn.execute("DEALLOCATE shape")


async def test_without_as_of_the_filter_plans_as_the_current_only_one(conn):
    # Planned for its values, a NULL as_of folds away: the scan keeps to current rows through the
    # partial index memories_ns (WHERE invalid_at IS NULL) and nothing of as_of is evaluated per row.
    await conn.execute("INSERT INTO agents (id) VALUES ('a')")
    await conn.execute("INSERT INTO namespaces (name, owner_agent_id) VALUES ('ns', 'a')")
    values = {
        "namespace": "'ns'",
        "agent": "'a'",
        "include_invalid": "false",
        "sitting_summaries": "false",
        **dict.fromkeys(("networks", "memory_types", "source_kinds", "valid_from", "valid_to", "as_of"), "NULL"),
        "limit": "10",
        "vector": "'[" + ",".join(["0.1"] * 384) + "]'",
    }
    plan = await _custom_plan(conn, vector_sql.SEARCH_EXACT, values)
    assert "namespace_tier_idx" in plan and "valid_at <=" not in plan and "invalid_at >" not in plan, plan
    asked = await _custom_plan(conn, vector_sql.SEARCH_EXACT, {**values, "as_of": "'2026-01-01T00:00:00Z'"})
    assert "valid_at <= '2026-01-01" in asked and "invalid_at > '2026-01-01" in asked, asked
    assert "namespace_tier_idx" not in asked  # the current-only index cannot serve the past
