"""Browsing a namespace (the console's memory list): keyset pages newest first, every filter, an
importance floor read a bounded window at a time, and the same scoping as recall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cabrain.errors import InputError, NotFound
from cabrain.store import browse
from cabrain.store.browse import BrowseFilters
from cabrain.types import MemoryInput, MemoryType, Network, Visibility

START = datetime(2026, 3, 1, 12, tzinfo=UTC)


async def _seed(brain) -> list:
    items = [
        MemoryInput(
            f"Runbook step {i}: restart the ingest worker number {i} and check its queue depth.",
            "proj",
            visibility=Visibility.TEAM,
            network=Network.FACT if i % 3 == 0 else Network.EXPERIENCE,
            memory_type=MemoryType.PROCEDURAL if i % 2 else MemoryType.EPISODIC,
            source_kind="runbook" if i < 5 else "chat",
            importance=0.9 if i in (3, 17, 18) else 0.2,
            valid_at=START + timedelta(days=i),
        )
        for i in range(20)
    ]
    results = await brain.retain("alice", items, decide=False)
    return [r.memory_id for r in results]


async def test_keyset_pages_newest_first_with_every_filter(brain) -> None:
    ids = await _seed(brain)
    first = await brain.browse("alice", "proj", BrowseFilters(), limit=8)
    assert [m.id for m in first.memories] == ids[::-1][:8] and first.next_cursor
    second = await brain.browse("alice", "proj", BrowseFilters(), limit=8, cursor=first.next_cursor)
    third = await brain.browse("alice", "proj", BrowseFilters(), limit=8, cursor=second.next_cursor)
    assert [m.id for m in second.memories + third.memories] == ids[::-1][8:] and third.next_cursor is None
    facts = await brain.browse("alice", "proj", BrowseFilters(networks=(Network.FACT,)), limit=50)
    assert [m.id for m in facts.memories] == [ids[i] for i in (18, 15, 12, 9, 6, 3, 0)]
    steps = await brain.browse("alice", "proj", BrowseFilters(memory_types=(MemoryType.PROCEDURAL,)), limit=50)
    assert all(m.memory_type is MemoryType.PROCEDURAL for m in steps.memories) and len(steps.memories) == 10
    runbook = await brain.browse("alice", "proj", BrowseFilters(source_kinds=("runbook",)), limit=50)
    assert [m.id for m in runbook.memories] == ids[4::-1]
    window = BrowseFilters(valid_from=START + timedelta(days=5), valid_to=START + timedelta(days=8))
    assert [m.id for m in (await brain.browse("alice", "proj", window, limit=50)).memories] == ids[7:4:-1]

    # history: a forgotten memory leaves the list, and comes back with history
    await brain.forget("alice", ids[19], reason="obsolete")
    assert ids[19] not in [m.id for m in (await brain.browse("alice", "proj", BrowseFilters(), limit=5)).memories]
    with_history = await brain.browse("alice", "proj", BrowseFilters(history=True), limit=5)
    assert with_history.memories[0].id == ids[19] and not with_history.memories[0].is_current


async def test_an_importance_floor_reads_a_bounded_window_per_page(brain) -> None:
    ids = await _seed(brain)
    floor = BrowseFilters(min_importance=0.8)
    async with brain.engine.pool.acquire() as conn:
        rows, cursor = await browse.page(conn, "proj", "alice", floor, limit=2, cursor=None, scan=5)
        assert [r["id"] for r in rows] == [ids[18], ids[17]] and cursor  # a full page inside the window
        rows, cursor = await browse.page(conn, "proj", "alice", floor, limit=2, cursor=cursor, scan=5)
        assert rows == [] and cursor  # the next five (16..12) clear nothing: an empty page that goes on
        seen = []
        while cursor:
            rows, cursor = await browse.page(conn, "proj", "alice", floor, limit=2, cursor=cursor, scan=5)
            seen += [r["id"] for r in rows]
        assert seen == [ids[3]]
    whole = await brain.browse("alice", "proj", floor, limit=50)  # the default window holds them all
    assert [m.id for m in whole.memories] == [ids[18], ids[17], ids[3]] and whole.next_cursor is None


async def test_scoping_is_recalls_and_bad_input_is_clear(brain) -> None:
    await _seed(brain)
    [private] = await brain.retain("alice", [MemoryInput("Alice's own note about the lighthouse.", "proj")])
    listed = await brain.browse("alice", "proj", BrowseFilters(), limit=50)
    assert private.memory_id in [m.id for m in listed.memories]
    for other in ("bob", "root"):  # bob holds no grant; an admin reads team memories, never private ones
        seen = [m.id for m in (await brain.browse(other, "proj", BrowseFilters(), limit=50)).memories]
        assert private.memory_id not in seen
    assert len((await brain.browse("root", "proj", BrowseFilters(), limit=50)).memories) == 20
    assert (await brain.browse("bob", "proj", BrowseFilters(), limit=50)).memories == []
    with pytest.raises(NotFound):
        await brain.browse("alice", "nope", BrowseFilters())
    with pytest.raises(InputError, match="page cursor"):
        await brain.browse("alice", "proj", BrowseFilters(), cursor="garbage")
    with pytest.raises(InputError, match="limit"):
        await brain.browse("alice", "proj", BrowseFilters(), limit=0)
    with pytest.raises(InputError, match="time and source"):
        await brain.browse("alice", "proj", BrowseFilters(networks=(Network.FACT,)), archived=True)
    with pytest.raises(InputError, match="between 0 and 1"):
        BrowseFilters(min_importance=1.5)
