"""The sleep cycle on a real multi-node Ray cluster (``ray.cluster_utils.Cluster``) on one machine.

Two databases hold the same memories. A cycle runs over the first on a one-node cluster; then a
worker node joins and a cycle runs over the second. Prints one JSON object: the node every step
task ran on, and a summary of each database afterwards (facts and their sources, what was
superseded, what went cold, entity summaries) that must not depend on where the steps ran.
Run by tests/integration/test_sleep_multinode.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

SUMMARY_FACTS = """
SELECT m.namespace, m.content,
       array(SELECT s.source_id::text FROM memory_sources s WHERE s.memory_id = m.id ORDER BY 1) AS sources
FROM memories m WHERE m.source_kind = 'sleep' ORDER BY 1, 2
"""
SUMMARY_HOT = """
SELECT m.id::text, m.namespace, m.invalid_at IS NOT NULL AS invalid,
       coalesce(n.content, m.superseded_by::text) AS superseded_by, m.importance
FROM memories m LEFT JOIN memories n ON n.id = m.superseded_by
WHERE m.source_kind IS DISTINCT FROM 'sleep' ORDER BY 1
"""
SUMMARY_COLD = "SELECT id::text, namespace FROM memory_ids WHERE tier = 'cold' ORDER BY 1"
SUMMARY_ENTITIES = "SELECT namespace, name, summary FROM entities WHERE summary IS NOT NULL ORDER BY 1, 2"


async def summarize(dsn: str) -> dict:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return {
            "facts": [[r["namespace"], r["content"], list(r["sources"])] for r in await conn.fetch(SUMMARY_FACTS)],
            "hot": [list(r.values()) for r in await conn.fetch(SUMMARY_HOT)],
            "cold": [list(r.values()) for r in await conn.fetch(SUMMARY_COLD)],
            "entities": [list(r.values()) for r in await conn.fetch(SUMMARY_ENTITIES)],
        }
    finally:
        await conn.close()


def cycle(dsn: str, home: str, address: str) -> dict:
    from cabrain.settings import load_settings
    from cabrain.sleep.cycle import run_cycle

    settings = load_settings(
        home=home,
        database_url=dsn,
        ray_address=address,
        sleep_demote_after_days=30,
        sleep_consolidate_window_days=400,
        sleep_demote_invalid_after_days=0,
    )
    report = asyncio.run(run_cycle(settings, dsn, use_ray=True))
    assert report.status == "done", report.tasks
    return {
        "nodes": sorted({t["node_id"] for t in report.tasks}),
        "tasks": len(report.tasks),
        "steps": report.steps,
        "summary": asyncio.run(summarize(dsn)),
    }


def main(dsn_one: str, dsn_two: str, home: str) -> dict:
    from cabrain import ray_runtime
    from cabrain.settings import load_settings

    # every node on this machine: Ray on loopback with token auth, as CaBrain's own local Ray
    ray_runtime.apply_ray_environment(ray_runtime.ray_environment(load_settings(home=home), local=True))
    import ray
    from ray.cluster_utils import Cluster

    store = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": store})
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        head = ray.get_runtime_context().get_node_id()
        one = cycle(dsn_one, os.path.join(home, "one"), cluster.address)
        worker = cluster.add_node(num_cpus=1, object_store_memory=store)
        cluster.wait_for_nodes()
        two = cycle(dsn_two, os.path.join(home, "two"), cluster.address)
        return {"head": head, "worker": worker.node_id, "one": one, "two": two}
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    from tests.integration.scripts import private_ray_tmpdir

    with private_ray_tmpdir():
        print("RESULT " + json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3]), default=str), flush=True)
