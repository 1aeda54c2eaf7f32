"""``cabrain bench counts``: what the kept counts cost the writes that keep them (issue 36).

The overview's counts (``memory_counts`` and ``activity_hours``, schema 0022) and the entities'
mention counters (0023) are kept by triggers, so that the overview and the entity pages never scan.
Those triggers run on every write. This times the same writes with them on and with them off, on
one scratch database, in alternating rounds (on, off, off, on, ...: drift in the machine's speed
hits both alike), and reports each write's rate both ways and what the triggers add per operation:

- **retain, batched**: calls of ``--batch`` new texts through the whole write path (embedding,
  the neighbours' decisions, entity linking, the counts);
- **retain, one at a time**;
- **forget**: a memory forgotten (a row update that moves its count and its entities' mentions, and
  a judgment, counted too);
- **recall**: its event is counted per hour.

Each text names two of the corpus's places or tools, capitalised, so that retain links entities
and the mention counters are kept too.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from cabrain.bench.corpus import AGENT, ENTITY_NAMES, NAMESPACE, synthetic_queries, synthetic_text
from cabrain.bench.progress import say
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings
from cabrain.store import bench as sql
from cabrain.types import MemoryInput, RecallQuery, Visibility

# The triggers that keep the counts (schema 0022, 0023 and 0025), by table.
COUNT_TRIGGERS: dict[str, tuple[str, ...]] = {
    "memories": (
        "memories_count_insert",
        "memories_count_delete",
        "memories_count_update",
        "entity_mentions_memories_in",
        "entity_mentions_memories_change",
    ),
    "memory_ids": ("memory_ids_count",),
    "memory_events": ("memory_events_count",),
    "judgments": ("judgments_count",),
    "memory_entities": ("entity_mentions_links_in", "entity_mentions_links_out"),
}


def named_text(rng: random.Random) -> str:
    """A corpus text that names two of its places or tools, capitalised as people write them."""
    first, second = rng.sample([n for n in ENTITY_NAMES if n.isascii()], 2)
    return f"{first.title()} and {second.title()}: {synthetic_text(rng)}"


async def _set_triggers(brain, on: bool) -> None:
    async with brain.engine.pool.acquire() as conn:
        for table, names in COUNT_TRIGGERS.items():
            for name in names:
                await conn.execute(sql.set_trigger(table, name, on))


async def run_counts_bench(
    settings: Settings, *, batch: int = 32, rounds: int = 4, seed: int = 7, quiet: bool = False
) -> dict[str, Any]:
    """Each write's rate with the count triggers on and off (see the module's doc)."""
    embedder = load_embedder(settings)
    rng = random.Random(seed)
    async with scratch_brain(settings, embedder, prefix="cabrain_bench_counts") as (brain, _facts, _dsn):
        await brain.create_agent(AGENT)
        await brain.create_namespace(AGENT, NAMESPACE)
        await brain.retain(AGENT, [MemoryInput(named_text(rng), NAMESPACE) for _ in range(batch)])  # warm-up
        kept: list[uuid.UUID] = []

        async def retain_batched() -> int:
            texts = [MemoryInput(named_text(rng), NAMESPACE, visibility=Visibility.TEAM) for _ in range(batch)]
            kept.extend(r.memory_id for r in await brain.retain(AGENT, texts))
            return batch

        async def retain_single() -> int:
            for _ in range(batch // 4 or 1):
                [r] = await brain.retain(AGENT, [MemoryInput(named_text(rng), NAMESPACE)])
                kept.append(r.memory_id)
            return batch // 4 or 1

        async def forget() -> int:
            n = min(batch, len(kept))
            for _ in range(n):
                await brain.forget(AGENT, kept.pop(rng.randrange(len(kept))), reason="bench")
            return n

        queries = synthetic_queries(rng, batch)

        async def recall() -> int:
            for text in queries:
                await brain.recall(AGENT, RecallQuery(text, NAMESPACE, k=10, rerank=False))
            return len(queries)

        work: dict[str, Callable[[], Awaitable[int]]] = {
            "retain_batched": retain_batched,
            "retain_single": retain_single,
            "forget": forget,
            "recall": recall,
        }
        result: dict[str, Any] = {"batch": batch, "rounds": rounds, "writes": {}}
        try:
            for name, fn in work.items():
                spent = {True: [0.0, 0], False: [0.0, 0]}
                for i in range(rounds):
                    on = (i % 4) in (0, 3)  # on, off, off, on, ...
                    await _set_triggers(brain, on)
                    started = time.perf_counter()
                    done = await fn()
                    spent[on][0] += time.perf_counter() - started
                    spent[on][1] += done
                on_ms = 1000 * spent[True][0] / max(spent[True][1], 1)
                off_ms = 1000 * spent[False][0] / max(spent[False][1], 1)
                result["writes"][name] = {
                    "operations": spent[True][1] + spent[False][1],
                    "ms_each_counted": round(on_ms, 3),
                    "ms_each_uncounted": round(off_ms, 3),
                    "added_ms": round(on_ms - off_ms, 3),
                    "added_pct": round(100 * (on_ms - off_ms) / off_ms, 1) if off_ms else None,
                }
                say(f"  {name}: {on_ms:.2f} ms each counted, {off_ms:.2f} uncounted", quiet)
        finally:
            await _set_triggers(brain, True)  # (the scratch database is dropped next)
    return result


def render_counts(result: dict[str, Any]) -> str:
    lines = [f"the kept counts' cost on writes ({result['rounds']} alternating rounds, batches of {result['batch']}):"]
    for name, w in result["writes"].items():
        lines.append(
            f"  {name.replace('_', ' ')}: {w['ms_each_counted']:.2f} ms each with the counts, "
            f"{w['ms_each_uncounted']:.2f} without ({w['added_ms']:+.2f} ms, {w['added_pct']:+.1f} %) "
            f"over {w['operations']} operations"
        )
    return "\n".join(lines)
