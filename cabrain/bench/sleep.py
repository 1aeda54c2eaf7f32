"""``cabrain bench sleep``: sleep-cycle throughput (memories per second per step) on 1..N Ray nodes.

Builds a synthetic workload of N memories over several namespaces (one holding half of them),
loads it once into a scratch database, then for each node count copies that database, starts a
Ray cluster of that many nodes (``ray.cluster_utils.Cluster``: every node on this machine, with
``--cpus-per-node`` CPUs each), and runs the cycle one step at a time over every namespace, timing
each step. The cold tier of each run is a fresh Iceberg table in a temporary directory.

The workload and why it is synthetic: :mod:`cabrain.bench.sleep_workload`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np

from cabrain.bench.corpus import AGENT, synthetic_text
from cabrain.bench.measure import machine_facts
from cabrain.bench.progress import say
from cabrain.bench.sleep_workload import workload
from cabrain.brain import Brain
from cabrain.errors import CabrainError, ConfigError
from cabrain.eval import percentiles
from cabrain.providers.embedders import load_embedder
from cabrain.ray_runtime import apply_ray_environment, ray_environment, ray_temp_dir
from cabrain.scratch import with_database
from cabrain.settings import Settings
from cabrain.sleep.cycle import STEPS, run_cycle
from cabrain.store import bench as bench_sql
from cabrain.store import memories as sql
from cabrain.store import migrations
from cabrain.store.db import connect, hot_tier, server_facts
from cabrain.store.keyword import IndexedDoc
from cabrain.store.migrations import ensure_partitions
from cabrain.types import ArchiveQuery

# step -> the counter that says how many memories it worked through
ITEMS = {
    "consolidate": "episodes_read",
    "dedup": "memories_compared",
    "reconsolidate": "facts_compared",
    "decay": "decayed",
    "demote": "demoted",
}


async def _load(dsn: str, settings: Settings, embedder, n: int, namespaces: list[str], seed: int, quiet: bool) -> float:
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
        async with brain.engine.pool.acquire() as conn:
            await ensure_partitions(conn, datetime.now(UTC).date(), months_back=13, months_ahead=1)
        batch: list[dict] = []
        loaded = 0

        async def flush() -> None:
            nonlocal loaded
            docs = [IndexedDoc(r["id"], r["namespace"], r["valid_at"], r["content"]) for r in batch]
            async with brain.engine.pool.acquire() as conn, conn.transaction():
                await sql.insert_memories(conn, batch)
                await brain.engine.keyword.index(conn, docs)
            loaded += len(batch)
            batch.clear()
            say(f"  loaded {loaded}/{n} memories", quiet)

        for row in workload(n, namespaces, mean, seed):
            batch.append(row)
            if len(batch) == 5000:
                await flush()
        if batch:
            await flush()
        async with brain.engine.pool.acquire() as conn:
            await conn.execute(bench_sql.CREATED_WHEN_VALID)  # stored when it happened
            await conn.execute(bench_sql.vacuum_analyze("memories"))
            await conn.execute(bench_sql.vacuum_analyze("memory_terms"))
    finally:
        await brain.close()
    return time.perf_counter() - started


@contextlib.contextmanager
def _cluster(settings: Settings, nodes: int, cpus: int):
    apply_ray_environment(ray_environment(settings, local=True))  # loopback, token auth
    import ray  # lazy: Ray is heavy, and reads the environment set just above
    from ray.cluster_utils import Cluster

    store = 100 * 1024 * 1024
    temp = str(ray_temp_dir(settings))  # private to us, never the shared /tmp/ray
    # where the head writes Ray's address file (and removes it at shutdown): ours too
    os.environ["RAY_TMPDIR"] = temp
    os.makedirs(os.path.join(temp, "ray"), mode=0o700, exist_ok=True)
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": cpus, "object_store_memory": store, "temp_dir": temp}
    )
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus, object_store_memory=store, temp_dir=temp)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


async def _admin(dsn: str, statement: str) -> None:
    conn = await connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _run_steps(settings: Settings, dsn: str, quiet: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"steps": {}, "tasks_per_node": Counter()}
    for step in STEPS:
        conn = await asyncpg.connect(dsn)
        try:
            hot = await conn.fetchval(bench_sql.COUNT_MEMORIES)
        finally:
            await conn.close()
        report = await run_cycle(settings, dsn, steps=[step], use_ray=True)
        if report.status != "done":
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
        say(f"    {step}: {report.seconds:.1f} s, {items} items, {hot} hot memories", quiet)
    out["tasks_per_node"] = dict(out["tasks_per_node"])
    out["total_s"] = round(sum(s["seconds"] for s in out["steps"].values()), 3)
    return out


async def _time_archive(settings: Settings, dsn: str, embedder, namespace: str, queries: int, quiet: bool) -> dict:
    """Archive recall latency over what the run demoted (the namespace holding half the corpus)."""
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
    out: dict[str, Any] = {
        "namespace": namespace,
        "cold_rows": scanned,
        "total_ms": percentiles(total),
        "scan_ms": percentiles(scan),
    }
    say(f"    archive recall over {scanned} cold rows: p50 {out['total_ms']['p50']:.0f} ms", quiet)
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
    if settings.ray_address:
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
            await admin.execute(bench_sql.create_database(source))
        finally:
            await admin.close()
        copies: list[str] = []
        colds: list[str] = []
        try:
            conn = await connect(with_database(dsn, source))
            try:
                await migrations.migrate(
                    conn, settings.schema_dir, embedding_dim=embedder.dim, embedding_model=settings.embedding_model
                )
            finally:
                await conn.close()
            say(f"loading {memories} memories into {namespaces} namespaces", quiet)
            result["load_s"] = round(
                await _load(with_database(dsn, source), bench_settings, embedder, memories, names, seed, quiet), 1
            )
            for count in nodes:
                copy = f"{source}_{count}n"
                await _admin(dsn, bench_sql.copy_database(copy, source))
                copies.append(copy)
                cold = tempfile.mkdtemp(prefix="cabrain-sleepbench-cold-")
                colds.append(cold)
                run_settings = bench_settings.model_copy(
                    update={
                        "cold_catalog_uri": f"sqlite:///{cold}/catalog.db",
                        "cold_warehouse": f"file://{cold}/warehouse",
                    }
                )
                os.makedirs(f"{cold}/warehouse", exist_ok=True)
                say(f"  {count} node(s) x {cpus_per_node} CPU", quiet)
                with _cluster(run_settings, count, cpus_per_node):
                    result["runs"][str(count)] = await _run_steps(run_settings, with_database(dsn, copy), quiet)
                if "archive" not in result and archive_queries:
                    result["archive"] = await _time_archive(
                        run_settings, with_database(dsn, copy), embedder, names[0], archive_queries, quiet
                    )
        finally:
            for name in [*copies, source]:
                await _admin(dsn, bench_sql.drop_database(name))
            for cold in colds:  # each run's cold tier, measured and done with
                shutil.rmtree(cold, ignore_errors=True)
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


__all__ = ["main_run", "render_sleep", "run_sleep_bench", "workload"]
