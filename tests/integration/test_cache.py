"""The Redis L1 cache: faster answers, never stale ones (whatever Redis restores), and correct answers
without Redis."""

import logging

import pytest

from cabrain.errors import NotFound
from cabrain.types import MemoryInput, RecallQuery
from tests.conftest import brings, start_redis


@pytest.fixture
@brings("subprocess")
def redis_server(tmp_path):
    proc, url = start_redis(tmp_path)
    yield proc, url
    if proc.poll() is None:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
async def cached_brain(open_brain, redis_server):
    brain = await open_brain(redis_url=redis_server[1])
    await brain.create_agent("alice")
    await brain.create_agent("bob")
    await brain.create_namespace("alice", "proj")
    return brain


def contents(result):
    return [h.memory.content for h in result.hits]


async def test_a_repeated_recall_is_served_from_the_cache(cached_brain):
    await cached_brain.retain("alice", MemoryInput("The nightly build starts at 01:00.", "proj"))
    query = RecallQuery("when does the nightly build start?", "proj", k=3)
    first = await cached_brain.recall("alice", query)
    second = await cached_brain.recall("alice", query)
    assert not first.cached and second.cached
    assert contents(second) == contents(first)
    assert second.hits[0].breakdown == first.hits[0].breakdown
    assert cached_brain.engine.cache.hits >= 1
    await cached_brain.engine.bookkeeper.close()
    got = await cached_brain.get("alice", first.hits[0].memory.id)
    assert got.memory.access_count == 2, "a cached answer still counts as an access"


async def test_the_cache_never_serves_a_forgotten_or_superseded_memory(cached_brain):
    [old] = await cached_brain.retain("alice", MemoryInput("The status page lives at status.internal.", "proj"))
    query = RecallQuery("where is the status page?", "proj", k=3)
    assert contents(await cached_brain.recall("alice", query)) == ["The status page lives at status.internal."]
    got = await cached_brain.get("alice", old.memory_id)  # cached row
    new = await cached_brain.reconsolidate("alice", old.memory_id, "The status page moved to status.example.org.")
    after = await cached_brain.recall("alice", query)
    assert not after.cached
    assert contents(after) == ["The status page moved to status.example.org."]
    assert (await cached_brain.get("alice", old.memory_id)).memory.superseded_by == new.memory_id
    assert got.memory.superseded_by is None
    await cached_brain.forget("alice", new.memory_id)
    assert contents(await cached_brain.recall("alice", query)) == []


async def test_a_new_grant_is_seen_at_once_despite_the_cache(cached_brain):
    from cabrain.types import Visibility

    await cached_brain.retain(
        "alice", MemoryInput("Team-only: the offsite is in Aswan.", "proj", visibility=Visibility.TEAM)
    )
    query = RecallQuery("where is the offsite?", "proj", k=3)
    assert contents(await cached_brain.recall("bob", query)) == []
    await cached_brain.share("alice", "proj", "bob")
    assert contents(await cached_brain.recall("bob", query)) == ["Team-only: the offsite is in Aswan."]
    await cached_brain.revoke("alice", "proj", "bob")
    assert contents(await cached_brain.recall("bob", query)) == []


async def test_with_redis_stopped_recall_still_answers_correctly_and_says_so(cached_brain, redis_server, caplog):
    await cached_brain.retain(
        "alice",
        [
            MemoryInput("The VPN endpoint is vpn.internal.", "proj"),
            MemoryInput("Lunch is served at noon.", "proj"),
        ],
    )
    query = RecallQuery("what is the VPN endpoint?", "proj", k=1)
    warm = await cached_brain.recall("alice", query)
    proc, _ = redis_server
    proc.kill()
    proc.wait(10)
    with caplog.at_level(logging.WARNING, logger="cabrain.providers.cache"):
        cold = await cached_brain.recall("alice", query)
        await cached_brain.retain("alice", MemoryInput("The VPN endpoint moved to vpn2.internal.", "proj"))
        moved = await cached_brain.recall("alice", query)
    assert not cold.cached and contents(cold) == contents(warm)
    assert contents(moved) == ["The VPN endpoint moved to vpn2.internal."]
    assert any(r.msg == "cache.unavailable" for r in caplog.records)
    assert cached_brain.engine.cache.errors > 0


async def test_a_flushed_redis_serves_no_stale_answers(cached_brain, redis_server):
    import redis.asyncio as aioredis

    [memory] = await cached_brain.retain("alice", MemoryInput("Releases are tagged on Mondays.", "proj"))
    query = RecallQuery("when are releases tagged?", "proj", k=1)
    await cached_brain.recall("alice", query)
    client = aioredis.from_url(redis_server[1])
    await client.flushall()
    await client.aclose()
    await cached_brain.forget("alice", memory.memory_id)
    assert contents(await cached_brain.recall("alice", query)) == []


async def test_embeddings_are_cached_by_content(cached_brain):
    await cached_brain.retain("alice", MemoryInput("Cache me once.", "proj"))
    before = cached_brain.engine.cache.hits
    vectors = await cached_brain.engine.embed_documents(["Cache me once."])
    assert cached_brain.engine.cache.hits == before + 1
    assert len(vectors[0]) == cached_brain.engine.embedder.dim


def _restart_from_snapshot(proc, url: str, folder, snapshot: bytes | None = None):
    """Kill Redis, optionally put an older snapshot in its place, and start it again on the same port
    from the snapshot in ``folder``: what it had then comes back, keys and all."""
    proc.kill()
    proc.wait(10)
    if snapshot is not None:
        (folder / "dump.rdb").write_bytes(snapshot)
    return start_redis(folder, port=int(url.rsplit(":", 1)[1].split("/")[0]))[0]


@pytest.mark.subprocess
@pytest.mark.parametrize("redis_during_the_change", ["down", "up, then an older snapshot restored"])
async def test_a_forget_is_never_undone_by_what_redis_restores(open_brain, tmp_path, redis_during_the_change):
    import redis.asyncio as aioredis

    folder = tmp_path / "redis"
    folder.mkdir()
    proc, url = start_redis(folder)
    try:
        brain = await open_brain(redis_url=url)
        await brain.create_agent("alice")
        await brain.create_namespace("alice", "proj")
        [memory] = await brain.retain("alice", MemoryInput("The on-call phone is in drawer 3.", "proj"))
        query = RecallQuery("where is the on-call phone?", "proj", k=3)
        assert contents(await brain.recall("alice", query)) == ["The on-call phone is in drawer 3."]
        assert (await brain.recall("alice", query)).cached
        assert (await brain.get("alice", memory.memory_id)).memory.invalid_at is None  # cached too
        client = aioredis.from_url(url)
        await client.save()  # the snapshot holds both cached answers
        await client.aclose()
        snapshot = (folder / "dump.rdb").read_bytes()
        if redis_during_the_change == "down":
            proc.kill()
            proc.wait(10)
            await brain.forget("alice", memory.memory_id)  # Redis cannot be told
            proc = _restart_from_snapshot(proc, url, folder)
        else:
            await brain.forget("alice", memory.memory_id)
            proc = _restart_from_snapshot(proc, url, folder, snapshot)
        client = aioredis.from_url(url)
        assert await client.dbsize() > 0, "the restored snapshot brought the old entries back"
        await client.aclose()
        for _ in range(2):  # the brain's Redis connection notices the restart (one failed call) and reconnects
            await brain.engine.cache.get("warm-up")
        after = await brain.recall("alice", query)
        assert contents(after) == [] and not after.cached
        assert (await brain.get("alice", memory.memory_id)).memory.invalid_at is not None
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.subprocess
async def test_a_revoke_while_redis_is_down_holds_when_redis_comes_back_from_its_snapshot(open_brain, tmp_path):
    import redis.asyncio as aioredis

    from cabrain.types import Visibility

    folder = tmp_path / "redis"
    folder.mkdir()
    proc, url = start_redis(folder)
    try:
        brain = await open_brain(redis_url=url)
        for agent in ("alice", "bob"):
            await brain.create_agent(agent)
        await brain.create_namespace("alice", "proj")
        [memory] = await brain.retain(
            "alice", MemoryInput("Team-only: the merger closes in March.", "proj", visibility=Visibility.TEAM)
        )
        await brain.share("alice", "proj", "bob")
        query = RecallQuery("when does the merger close?", "proj", k=3)
        assert contents(await brain.recall("bob", query)) == ["Team-only: the merger closes in March."]
        assert (await brain.recall("bob", query)).cached
        assert (await brain.get("bob", memory.memory_id)).memory.content
        client = aioredis.from_url(url)
        await client.save()
        await client.aclose()
        proc.kill()
        proc.wait(10)
        assert await brain.revoke("alice", "proj", "bob")
        proc = _restart_from_snapshot(proc, url, folder)
        for _ in range(2):
            await brain.engine.cache.get("warm-up")
        assert contents(await brain.recall("bob", query)) == []
        with pytest.raises(NotFound):
            await brain.get("bob", memory.memory_id)
    finally:
        proc.kill()
        proc.wait(10)


async def test_a_sleep_step_moves_the_cache_generation_too(cached_brain, db_dsn, settings_for):
    """Changes made outside the Brain (a sleep step, as another role) make cached answers unreachable."""
    import asyncpg

    [memory] = await cached_brain.retain("alice", MemoryInput("The wiki moved to wiki.internal.", "proj"))
    query = RecallQuery("where is the wiki?", "proj", k=3)
    await cached_brain.recall("alice", query)
    assert (await cached_brain.recall("alice", query)).cached
    conn = await asyncpg.connect(db_dsn)
    try:  # what reconsolidate and dedup do to a row, as plain SQL
        await conn.execute("UPDATE memories SET invalid_at = now() WHERE id = $1", memory.memory_id)
    finally:
        await conn.close()
    after = await cached_brain.recall("alice", query)
    assert not after.cached and contents(after) == []
