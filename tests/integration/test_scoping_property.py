"""Property: whatever agents, namespaces, visibilities and grants exist, recall and get never
return a memory the caller may not read. Then everything is demoted to the cold tier, and
archive recall and get are held to the same rules.

The rules are re-stated here independently of the SQL (cabrain/store/access.py) and checked on
random worlds: random agents (one admin, one later disabled), namespaces with random owners,
random read/write grants, memories with random visibility, and random queries by every agent.
"""

import random

import pytest

from cabrain.errors import AccessDenied, NotFound
from cabrain.sleep.cycle import run_cycle
from cabrain.types import ArchiveQuery, MemoryInput, RecallQuery, Visibility

WORDS = "deploy cache roadmap invoice queue backup secret budget release outage migration review".split()


def may_read(world, agent, memory) -> bool:
    if agent in world["disabled"]:
        return False
    if memory["visibility"] == "global" or memory["owner"] == agent:
        return True
    if memory["visibility"] == "team":
        ns = memory["namespace"]
        return agent in world["admins"] or world["owners"][ns] == agent or (agent, ns) in world["readers"]
    return False


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_recall_and_get_never_return_what_the_caller_may_not_read(brain, db_dsn, settings_for, seed):
    rng = random.Random(seed)
    agents = [f"agent{i}" for i in range(6)]
    for a in agents:
        await brain.create_agent(a, is_admin=(a == "agent5"))
    namespaces = [f"ns{seed}-{i}" for i in range(3)]
    world = {"owners": {}, "readers": set(), "admins": {"agent5"}, "disabled": set()}
    for ns in namespaces:
        owner = rng.choice(agents[:5])
        await brain.create_namespace(owner, ns)
        world["owners"][ns] = owner
        for grantee in rng.sample(agents, 3):
            can_read, can_write = rng.random() < 0.6, rng.random() < 0.5
            await brain.share(owner, ns, grantee, can_read=can_read, can_write=can_write)
            if can_read:
                world["readers"].add((grantee, ns))
            world.setdefault("writers", set())
            world.setdefault("offered", set())
            if can_write and rng.random() < 0.7:  # a write grant counts only once its grantee accepts it
                await brain.accept_grant(grantee, ns)
                world["writers"].add((grantee, ns))
            elif can_write:
                world["offered"].add((grantee, ns))
    memories = {}
    for i in range(45):
        ns = rng.choice(namespaces)
        writers = [world["owners"][ns], "agent5"] + [a for a, n in world.get("writers", set()) if n == ns]
        author = rng.choice(writers)
        visibility = rng.choice(list(Visibility))
        text = f"memory {i}: " + " ".join(rng.sample(WORDS, 4)) + f" item{i}"
        [result] = await brain.retain(author, MemoryInput(text, ns, visibility=visibility), decide=False)
        memories[result.memory_id] = {"namespace": ns, "owner": author, "visibility": visibility.value}
    for grantee, ns in sorted(world["offered"] - world["writers"]):  # offered, not accepted: no write
        if grantee != world["owners"][ns] and grantee != "agent5":
            with pytest.raises(AccessDenied, match="has not accepted"):
                await brain.retain(grantee, MemoryInput("an unaccepted write", ns), decide=False)
    disabled = rng.choice(agents[:5])
    async with brain.engine.pool.acquire() as conn:
        await conn.execute("UPDATE agents SET disabled_at = now() WHERE id = $1", disabled)
    world["disabled"].add(disabled)

    checked = 0
    for agent in agents:
        for ns in namespaces:
            for _ in range(3):
                query = " ".join(rng.sample(WORDS, 2))
                try:
                    result = await brain.recall(agent, RecallQuery(query, ns, k=50, include_invalid=True))
                except AccessDenied:
                    assert agent in world["disabled"]
                    continue
                for hit in result.hits + [type("H", (), {"memory": m}) for m in result.related]:
                    memory = memories[hit.memory.id]
                    assert may_read(world, agent, memory), (agent, memory)
                    checked += 1
        for memory_id, memory in memories.items():
            try:
                got = await brain.get(agent, memory_id)
            except AccessDenied:  # a disabled agent reads nothing, not even what it wrote
                assert agent in world["disabled"]
                continue
            except NotFound:
                assert not may_read(world, agent, memory), (agent, memory)
            else:
                assert may_read(world, agent, memory), (agent, memory)
                assert got.memory.id == memory_id
    assert checked > 50, "the worlds must actually return hits to check"

    # the same world, demoted: archive recall and get read the cold tier under the same rules
    settings = settings_for(db_dsn, sleep_demote_after_days=0, sleep_demote_keep_importance=1.0)
    report = await run_cycle(settings, db_dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == len(memories)
    checked = 0
    for agent in agents:
        for ns in namespaces:
            query = " ".join(rng.sample(WORDS, 2))
            try:
                result = await brain.recall_archive(agent, ArchiveQuery(query, ns, k=50))
            except AccessDenied:
                assert agent in world["disabled"]
                continue
            expected = {i for i, m in memories.items() if m["namespace"] == ns and may_read(world, agent, m)}
            assert {h.memory.id for h in result.hits} == expected, (agent, ns)  # k covers them all
            checked += len(expected)
            for hit in result.hits:
                assert hit.memory.tier == "cold"
                for link in hit.derived + hit.sources:
                    assert may_read(world, agent, memories[link.memory_id])
        for memory_id, memory in rng.sample(sorted(memories.items()), 12):
            try:
                got = await brain.get(agent, memory_id)
            except AccessDenied:  # a disabled agent reads nothing, not even what it wrote
                assert agent in world["disabled"]
                continue
            except NotFound:
                assert not may_read(world, agent, memory), (agent, memory)
            else:
                assert may_read(world, agent, memory) and got.memory.tier == "cold", (agent, memory)
    assert checked > 50
