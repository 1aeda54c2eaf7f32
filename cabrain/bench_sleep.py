"""``cabrain bench sleep``: sleep-cycle throughput (memories per second per step) on 1..N Ray nodes.

Builds a synthetic workload of N memories over several namespaces (one holding half of them),
loads it once into a scratch database, then for each node count copies that database, starts a
Ray cluster of that many nodes (``ray.cluster_utils.Cluster``: every node on this machine, with
``--cpus-per-node`` CPUs each), and runs the cycle one step at a time over every namespace, timing
each step. The cold tier of each run is a fresh Iceberg table in a temporary directory.

What is synthetic, and why. Embedding 100k texts on two CPU cores takes hours, and word salad has
no real similarity structure (its real e5 embeddings are all within cosine 0.86 of each other, so
every text would cluster with every other). So the vectors are built around the mean direction of
real embeddings, with a similarity structure that exercises every step:

- 70% of the memories are episodes in groups of 3-6 paraphrases (cosine about 0.94 within a group,
  0.75-0.8 between groups): consolidation distills them;
- 5% are near-duplicate pairs (cosine about 0.985): dedup merges them;
- 20% are isolated episodes;
- 5% are facts, half of them in pairs that contradict each other (the same statement with another
  number): reconsolidation supersedes the older.

``valid_at`` is spread over the last 12 months (stored that long ago as well), so decay and
demotion have real partitions to work through. Texts are synthetic sentences of the bench's
Arabic and English word lists.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from cabrain.bench import AR_WORDS, EN_WORDS, _progress, machine_facts, synthetic_text
from cabrain.settings import Settings

AGENT = "bench"
# step -> the counter that says how many memories it worked through
ITEMS = {
    "consolidate": "episodes_read",
    "dedup": "memories_compared",
    "reconsolidate": "facts_compared",
    "decay": "decayed",
    "demote": "demoted",
}
# Cosine targets of the workload, as per-dimension noise for unit vectors of dimension d:
# cos(a, b) of two noisy copies of one vector is about 1 / (1 + d * sigma^2).
GROUP_SPREAD = 0.25  # between groups: about 0.8
PARAPHRASE = 0.06  # within a group: about 0.94
DUPLICATE = 0.015  # near-duplicates: about 0.985
# How often each kind is drawn (groups, duplicate pairs, isolated, facts), so that the shares of
# *rows* are 70 / 5 / 20 / 5 % (groups hold 4.5 rows on average, pairs 2, facts 1.5).
DRAWS = [0.70 / 4.5, 0.05 / 2, 0.20 / 1, 0.05 / 1.5]


def _noisy(center: np.ndarray, spread: float, rng: np.random.Generator, count: int = 1) -> np.ndarray:
    dim = center.shape[0]
    out = center + rng.normal(0.0, np.sqrt(spread / dim), (count, dim)).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _variant(text: str, rng: random.Random) -> str:
    """A paraphrase of ``text``: two of its words swapped for others of its language."""
    words = text.split()
    pool = AR_WORDS if words[0] in AR_WORDS else EN_WORDS
    for _ in range(2):
        words[rng.randrange(len(words) - 1)] = rng.choice(pool)
    return " ".join(words)


def workload(n: int, namespaces: list[str], mean: np.ndarray, seed: int):
    """The bench's memories (see the module docstring), as rows for ``insert_memories``."""
    rng, np_rng = random.Random(seed), np.random.default_rng(seed)
    now = datetime.now(UTC)
    weights = [0.5] + [0.5 / (len(namespaces) - 1)] * (len(namespaces) - 1) if len(namespaces) > 1 else [1.0]
    made = 0
    while made < n:
        namespace = rng.choices(namespaces, weights)[0]
        when = now - timedelta(seconds=rng.randint(3600, 365 * 86400))
        center = _noisy(mean, GROUP_SPREAD, np_rng)[0]
        text = synthetic_text(rng)
        roll = rng.choices(range(4), DRAWS)[0]
        if roll == 0:  # a group of paraphrases
            size = min(rng.randint(3, 6), n - made)
            texts = [text] + [_variant(text, rng) for _ in range(size - 1)]
            vectors, kind = _noisy(center, PARAPHRASE, np_rng, size), ("experience", "episodic")
        elif roll == 1:  # near-duplicates
            size = min(2, n - made)
            texts, vectors, kind = (
                [text, text + " ."][:size],
                _noisy(center, DUPLICATE, np_rng, size),
                ("experience", "episodic"),
            )
        elif roll == 2:
            size, texts, vectors, kind = 1, [text], center[None, :], ("experience", "episodic")
        else:  # a fact, and in half the cases a newer one that contradicts it
            subject = " ".join(text.split()[:6])
            size = min(2 if rng.random() < 0.5 else 1, n - made)
            texts = [f"{subject} limit is {rng.randint(10, 99)}", f"{subject} limit is {rng.randint(100, 999)}"][:size]
            vectors, kind = _noisy(center, DUPLICATE, np_rng, size), ("fact", "semantic")
        for i in range(size):
            valid_at = when + timedelta(minutes=10 * i)
            content = texts[i]
            yield {
                "id": uuid.uuid4(),
                "namespace": namespace,
                "owner_agent_id": AGENT,
                "visibility": "team",
                "network": kind[0],
                "memory_type": kind[1],
                "content": content,
                "source_kind": "bench",
                "source_ref": None,
                "embedding": vectors[i],
                "importance": round(rng.random(), 3),
                "valid_at": valid_at,
                "metadata": {},
                "content_hash": hashlib.sha256(content.encode()).digest(),
            }
        made += size


async def _load(dsn: str, settings: Settings, embedder, n: int, namespaces: list[str], seed: int, quiet: bool) -> float:
    from cabrain.brain import Brain
    from cabrain.search.keyword import IndexedDoc
    from cabrain.store import memories as sql
    from cabrain.store.migrations import ensure_partitions

    started = time.perf_counter()
    rng = random.Random(seed)
    sample = [synthetic_text(rng) for _ in range(64)]
    mean = np.asarray(await embedder.embed_documents(sample), dtype=np.float32).mean(axis=0)
    mean /= np.linalg.norm(mean)
    brain = await Brain.open(settings.model_copy(update={"redis_url": None}), dsn=dsn, embedder=embedder)
    try:
        await brain.create_agent(AGENT)
        for name in namespaces:
            await brain.create_namespace(AGENT, name)
        async with brain.pool.acquire() as conn:
            await ensure_partitions(conn, datetime.now(UTC).date(), months_back=13, months_ahead=1)
        batch: list[dict] = []
        loaded = 0

        async def flush() -> None:
            nonlocal loaded
            docs = [IndexedDoc(r["id"], r["namespace"], r["valid_at"], r["content"]) for r in batch]
            async with brain.pool.acquire() as conn, conn.transaction():
                await sql.insert_memories(conn, batch)
                await brain.keyword.index(conn, docs)
            loaded += len(batch)
            batch.clear()
            _progress(f"  loaded {loaded}/{n} memories", quiet)

        for row in workload(n, namespaces, mean, seed):
            batch.append(row)
            if len(batch) == 5000:
                await flush()
        if batch:
            await flush()
        async with brain.pool.acquire() as conn:
            await conn.execute("UPDATE memories SET created_at = valid_at")  # stored when it happened
            await conn.execute("VACUUM ANALYZE memories")
            await conn.execute("VACUUM ANALYZE memory_terms")
    finally:
        await brain.close()
    return time.perf_counter() - started


@contextlib.contextmanager
def _cluster(settings: Settings, nodes: int, cpus: int):
    from cabrain.service import apply_ray_environment, ray_environment

    apply_ray_environment(ray_environment(settings, local=True))  # loopback, token auth
    import ray
    from ray.cluster_utils import Cluster

    store = 100 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "object_store_memory": store})
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus, object_store_memory=store)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


async def _admin(dsn: str, statement: str) -> None:
    from cabrain.store.db import connect

    conn = await connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _run_steps(settings: Settings, dsn: str, quiet: bool) -> dict[str, Any]:
    import asyncpg

    from cabrain.sleep.cycle import STEPS, run_cycle

    out: dict[str, Any] = {"steps": {}, "tasks_per_node": Counter()}
    for step in STEPS:
        conn = await asyncpg.connect(dsn)
        try:
            hot = await conn.fetchval("SELECT count(*) FROM memories")
        finally:
            await conn.close()
        report = await run_cycle(settings, dsn, steps=[step], use_ray=True)
        if report.status != "done":
            from cabrain.errors import CabrainError

            failed = [t for t in report.tasks if "error" in t]
            raise CabrainError(f"the {step} step did not finish ({report.status}): {failed}")
        counts = report.steps.get(step, {})
        items = counts.get(ITEMS.get(step, ""), 0)
        out["steps"][step] = {
            "seconds": round(report.seconds, 3),
            "hot_memories": hot,
            "items": items,
            "memories_per_s": round(hot / report.seconds, 1),
            "items_per_s": round(items / report.seconds, 1),
            "tasks": len(report.tasks),
            "counts": counts,
        }
        for task in report.tasks:
            out["tasks_per_node"][task.get("node_id") or "?"] += 1
        _progress(f"    {step}: {report.seconds:.1f} s, {items} items, {hot} hot memories", quiet)
    out["tasks_per_node"] = dict(out["tasks_per_node"])
    out["total_s"] = round(sum(s["seconds"] for s in out["steps"].values()), 3)
    return out


async def _time_archive(settings: Settings, dsn: str, embedder, namespace: str, queries: int, quiet: bool) -> dict:
    """Archive recall latency over what the run demoted (the namespace holding half the corpus)."""
    from cabrain.brain import Brain
    from cabrain.eval import percentiles
    from cabrain.types import ArchiveQuery

    rng = random.Random(5)
    texts = [" ".join(synthetic_text(rng).split()[: rng.randint(3, 10)]) for _ in range(queries)]
    brain = await Brain.open(settings, dsn=dsn, embedder=embedder)
    try:
        total, scan, scanned = [], [], 0
        for text in texts:
            result = await brain.recall_archive(AGENT, ArchiveQuery(text, namespace, k=10))
            total.append(result.timings_ms["total_ms"])
            scan.append(result.timings_ms.get("scan_ms", 0.0))
            scanned = result.scanned
    finally:
        await brain.close()
    out = {"namespace": namespace, "cold_rows": scanned, "total_ms": percentiles(total), "scan_ms": percentiles(scan)}
    _progress(f"    archive recall over {scanned} cold rows: p50 {out['total_ms']['p50']:.0f} ms", quiet)
    return out


async def run_sleep_bench(
    settings: Settings,
    *,
    memories: int,
    namespaces: int,
    nodes: list[int],
    cpus_per_node: int = 1,
    archive_queries: int = 30,
    seed: int = 11,
    quiet: bool = False,
) -> dict[str, Any]:
    """Load the workload once, then time each sleep step on clusters of each size in ``nodes``."""
    from cabrain.providers.embedders import load_embedder
    from cabrain.store import migrations
    from cabrain.store.db import connect, hot_tier, server_facts
    from cabrain.store.scratch import with_database

    if settings.ray_address:
        from cabrain.errors import ConfigError

        raise ConfigError("the benchmark starts its own Ray clusters; unset CABRAIN_RAY_ADDRESS")
    embedder = load_embedder(settings)
    names = [f"bench-{i}" for i in range(namespaces)]
    source = f"cabrain_sleepbench_{uuid.uuid4().hex[:10]}"
    result: dict[str, Any] = {
        "memories": memories,
        "namespaces": namespaces,
        "cpus_per_node": cpus_per_node,
        "runs": {},
    }
    bench_settings = settings.model_copy(
        update={
            "redis_url": None,
            "sleep_consolidate_window_days": 400.0,  # the whole backlog is recent enough
        }
    )
    with hot_tier(settings) as dsn:
        admin = await connect(dsn)
        try:
            facts = await server_facts(admin)
            await admin.execute(f'CREATE DATABASE "{source}"')
        finally:
            await admin.close()
        copies = []
        try:
            conn = await connect(with_database(dsn, source))
            try:
                await migrations.migrate(
                    conn, settings.schema_dir, embedding_dim=embedder.dim, embedding_model=settings.embedding_model
                )
            finally:
                await conn.close()
            _progress(f"loading {memories} memories into {namespaces} namespaces", quiet)
            result["load_s"] = round(
                await _load(with_database(dsn, source), bench_settings, embedder, memories, names, seed, quiet), 1
            )
            for count in nodes:
                copy = f"{source}_{count}n"
                await _admin(dsn, f'CREATE DATABASE "{copy}" TEMPLATE "{source}"')
                copies.append(copy)
                cold = tempfile.mkdtemp(prefix="cabrain-sleepbench-cold-")
                run_settings = bench_settings.model_copy(
                    update={
                        "cold_catalog_uri": f"sqlite:///{cold}/catalog.db",
                        "cold_warehouse": f"file://{cold}/warehouse",
                    }
                )
                os.makedirs(f"{cold}/warehouse", exist_ok=True)
                _progress(f"  {count} node(s) x {cpus_per_node} CPU", quiet)
                with _cluster(run_settings, count, cpus_per_node):
                    result["runs"][str(count)] = await _run_steps(run_settings, with_database(dsn, copy), quiet)
                if "archive" not in result and archive_queries:
                    result["archive"] = await _time_archive(
                        run_settings, with_database(dsn, copy), embedder, names[0], archive_queries, quiet
                    )
        finally:
            for name in [*copies, source]:
                await _admin(dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    result["machine"] = machine_facts(facts, embedder)
    return result


def render_sleep(result: dict[str, Any]) -> str:
    runs = result["runs"]
    counts = sorted(runs, key=int)
    head = "| step | items | " + " | ".join(f"{c} node(s): s | items/s | memories/s" for c in counts) + " |"
    lines = [head, "|" + " --- |" * (2 + 3 * len(counts))]
    first = runs[counts[0]]["steps"]
    for step in first:
        cells = [step, str(first[step]["items"])]
        for c in counts:
            s = runs[c]["steps"][step]
            cells += [f"{s['seconds']:.1f}", f"{s['items_per_s']:.0f}", f"{s['memories_per_s']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("| total | | " + " | ".join(f"{runs[c]['total_s']:.1f} | |" for c in counts) + " |")
    for c in counts:
        lines.append(f"\n{c} node(s): tasks per node {sorted(runs[c]['tasks_per_node'].values(), reverse=True)}")
    if "archive" in result:
        a = result["archive"]
        lines.append(
            f"\narchive recall ({a['namespace']}, {a['cold_rows']} cold rows): total p50 {a['total_ms']['p50']:.0f} ms, "
            f"p95 {a['total_ms']['p95']:.0f} ms; of which the scan p50 {a['scan_ms']['p50']:.0f} ms"
        )
    return "\n".join(lines)


def main_run(settings: Settings, **kwargs: Any) -> dict[str, Any]:
    return asyncio.run(run_sleep_bench(settings, **kwargs))


__all__ = ["render_sleep", "run_sleep_bench", "workload"]
