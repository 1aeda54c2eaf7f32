"""Property: whatever agents, namespaces, visibilities and grants exist, recall and get never
return a memory the caller may not read.

The rules are re-stated here independently of the SQL (cabrain/store/scope.py) and checked on
random worlds: random agents (one admin, one later disabled), namespaces with random owners,
random read/write grants, memories with random visibility, and random queries by every agent.
"""

import random

import pytest

from cabrain.errors import AccessDenied, NotFound
from cabrain.types import MemoryInput, RecallQuery, Visibility

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
async def test_recall_and_get_never_return_what_the_caller_may_not_read(brain, seed):
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
            if can_write:
                world["writers"].add((grantee, ns))
    memories = {}
    for i in range(45):
        ns = rng.choice(namespaces)
        writers = [world["owners"][ns], "agent5"] + [a for a, n in world.get("writers", set()) if n == ns]
        author = rng.choice(writers)
        visibility = rng.choice(list(Visibility))
        text = f"memory {i}: " + " ".join(rng.sample(WORDS, 4)) + f" item{i}"
        [result] = await brain.retain(author, MemoryInput(text, ns, visibility=visibility), decide=False)
        memories[result.memory_id] = {"namespace": ns, "owner": author, "visibility": visibility.value}
    disabled = rng.choice(agents[:5])
    async with brain.pool.acquire() as conn:
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
            except NotFound:
                assert not may_read(world, agent, memory), (agent, memory)
            else:
                assert may_read(world, agent, memory), (agent, memory)
                assert got.memory.id == memory_id
    assert checked > 50, "the worlds must actually return hits to check"
