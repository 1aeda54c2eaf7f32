"""A sleep cycle beside replicas that hold most of the CPUs, on a real two-CPU Ray cluster.

An actor holding 1.5 CPUs stands where the Serve replicas of `cabrain up` stand on a 2-core machine.
A cycle started there must finish (its steps ask for the 0.5 left); with a second actor holding the
rest, it must still finish (no reservation, one step at a time); a cycle whose steps ask for more
than any node has says why it waits, and an admin's cancel ends it 'cancelled', its steps withdrawn.
Prints one JSON object. Run by tests/integration/test_sleep_room.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid


def cycle(dsn: str, home: str, address: str, **extra) -> dict:
    from cabrain.settings import load_settings
    from cabrain.sleep.cycle import run_cycle

    settings = load_settings(home=home, database_url=dsn, ray_address=address, **extra)
    report = asyncio.run(run_cycle(settings, dsn, use_ray=True))
    return {"status": report.status, "room": report.room, "tasks": len(report.tasks), "errors": report.tasks}


async def cancelled(dsn: str, home: str, address: str) -> dict:
    """A run whose steps cannot fit: it says why it waits; a cancel ends it."""
    import asyncpg

    from cabrain.brain import Brain
    from cabrain.settings import load_settings
    from cabrain.sleep.cycle import run_cycle
    from cabrain.sleep.runs import SleepRuns

    settings = load_settings(home=home, database_url=dsn, ray_address=address, sleep_step_cpus=8, sleep_wait_note_s=0.5)
    run_id = uuid.uuid4()
    running = asyncio.create_task(run_cycle(settings, dsn, use_ray=True, run_id=run_id))
    conn = await asyncpg.connect(dsn)
    note = None
    try:
        deadline = time.monotonic() + 120
        while note is None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            note = await conn.fetchval("SELECT note FROM sleep_runs WHERE id = $1", run_id)
    finally:
        await conn.close()
    brain = await Brain.open(settings, dsn=dsn)
    try:
        asked = await SleepRuns(brain.engine).cancel("root", run_id)
        report = await asyncio.wait_for(running, 120)
        seen = await SleepRuns(brain.engine).run("root", run_id)
    finally:
        await brain.close()
    return {
        "note": note,
        "asked": asked["status"],
        "status": report.status,
        "withdrawn": len(report.withdrawn),
        "seen": {"status": seen["status"], "note": seen["note"], "withdrawn": len(seen["withdrawn"])},
    }


def main(dsn: str, home: str) -> dict:
    from cabrain import ray_runtime
    from cabrain.settings import load_settings

    ray_runtime.apply_ray_environment(ray_runtime.ray_environment(load_settings(home=home), local=True))
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": 80 * 1024**2})
    try:
        ray.init(address=cluster.address, log_to_driver=False)

        @ray.remote
        class Replica:  # holds its CPUs as a Serve replica does
            def ping(self) -> bool:
                return True

        ingress_and_embedder = Replica.options(num_cpus=1.5).remote()
        ray.get(ingress_and_embedder.ping.remote())
        beside = cycle(dsn, os.path.join(home, "a"), cluster.address)
        rest = Replica.options(num_cpus=0.5).remote()
        ray.get(rest.ping.remote())
        full = cycle(dsn, os.path.join(home, "b"), cluster.address)
        stopped = asyncio.run(cancelled(dsn, os.path.join(home, "c"), cluster.address))
        return {"beside": beside, "full": full, "cancelled": stopped}
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    from tests.integration.scripts import private_ray_tmpdir

    with private_ray_tmpdir():
        print("RESULT " + json.dumps(main(sys.argv[1], sys.argv[2]), default=str), flush=True)
