"""Scale-out on a real multi-node Ray cluster (``ray.cluster_utils.Cluster``) on one machine.

The head node has room for the ingress and one embedder replica; the app asks for two. The
second replica waits until a worker node joins, is placed there, and then serves requests.
Prints one JSON object with what it saw. Run by tests/integration/test_multinode.py.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path


def main(dsn: str, home: str, port: int) -> dict:
    from cabrain import ray_runtime, service
    from cabrain.settings import load_settings

    # The cluster every node of which runs on this machine: Ray on loopback, with token auth, as
    # CaBrain runs its own local Ray (before Ray is imported: it reads the switch once).
    ray_runtime.apply_ray_environment(ray_runtime.ray_environment(load_settings(home=home), local=True))
    token_file = Path(home) / "ray" / "auth_token"

    import httpx
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster

    from tests import netcheck

    store = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": store})
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        head = ray.get_runtime_context().get_node_id()
        # `cabrain up` onto an existing cluster: shared database, this cluster's address. Every node
        # of this test runs on one machine, so only the head runs an HTTP proxy.
        settings = load_settings(
            home=home,
            database_url=dsn,
            api_port=port,
            serve_ready_timeout_s=180,
            ray_address=cluster.address,
            serve_proxy_location="HeadOnly",
            ray_auth_token_file=token_file,
        )
        args = {"ingress": {"num_cpus": 0}, "embedder": {"num_replicas": 2, "num_cpus": 1}}
        done = threading.Event()
        failure: list[BaseException] = []

        def deploy() -> None:
            try:
                service.up(settings, app_args=args)  # deploys, waits until ready, returns
            except BaseException as exc:  # noqa: BLE001 - reported below
                failure.append(exc)
            finally:
                done.set()

        threading.Thread(target=deploy, daemon=True).start()
        # wait until one embedder replica runs and the second cannot be placed
        deadline = time.monotonic() + 180
        running_before = 0
        while time.monotonic() < deadline and not done.is_set():
            try:
                status = serve.status().applications["cabrain"].deployments["Embedder"]
                running_before = status.replica_states.get("RUNNING", 0)
                if running_before == 1:
                    break
            except KeyError:
                pass
            time.sleep(0.5)
        completed_on_one_node = done.is_set()
        worker = cluster.add_node(num_cpus=1, object_store_memory=store)
        if not done.wait(180):
            raise TimeoutError("the application did not finish deploying after the node joined")
        if failure:
            raise failure[0]
        service.wait_ready(settings, progress=False)
        handle = serve.get_deployment_handle("Embedder", app_name="cabrain")
        served = [handle.info.remote().result(timeout_s=60) for _ in range(60)]
        key = (Path(home) / "admin.key").read_text().strip()  # made by `cabrain up` on its first run
        with httpx.Client(base_url=service.api_url(settings), headers={"Authorization": f"Bearer {key}"}) as client:
            client.post("/v1/namespaces", json={"name": "cluster"})
            client.post(
                "/v1/memories/batch",
                json={
                    "items": [
                        {"content": f"Cluster fact {i}: node {i} runs rack {i * 3}.", "namespace": "cluster"}
                        for i in range(8)
                    ],
                    "decide": False,
                },
            )
            recalls = [
                client.post(
                    "/v1/recall", json={"query": f"which rack does node {i} run?", "namespace": "cluster"}
                ).status_code
                for i in range(20)
            ]
        # What the cluster exposes, every node and replica up: loopback only; jobs need the token.
        found = netcheck.listeners(netcheck.process_tree(os.getpid()))
        without_token = netcheck.job_submission_statuses(found, token=None)
        with_token = netcheck.job_submission_statuses(
            [f for f in found if "DashboardAgent" in f.name], token=token_file.read_text().strip()
        )
        driver = _foreign_driver(cluster.address)
        removed = service.down(settings)
        return {
            "foreign_driver": driver,
            "listeners": [str(f) for f in found],
            "exposed": netcheck.exposed(found),
            "jobs_without_token": without_token,
            "jobs_with_token": with_token,
            "removed": removed,
            "apps_after_down": sorted(serve.status().applications),
            "head": head,
            "worker": worker.node_id,
            "running_before_join": running_before,
            "completed_on_one_node": completed_on_one_node,
            "embedder_nodes": sorted({s["node_id"] for s in served}),
            "embedder_pids": sorted({s["pid"] for s in served}),
            "recall_statuses": recalls,
        }
    finally:
        serve.shutdown()
        ray.shutdown()
        cluster.shutdown()


def _foreign_driver(address: str) -> dict:
    """Another process on the machine connects as a Ray driver without the cluster's token (it
    would run code as the service's user): what happens."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as empty_home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
        env["HOME"] = empty_home  # no ~/.ray/auth_token either
        code = (
            f"import ray; ray.init(address={address!r}, log_to_driver=False); "
            "print('RAN', ray.get(ray.remote(lambda: open('/etc/hostname').read()).remote()))"
        )
        probe = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    return {
        "returncode": probe.returncode,
        "ran": "RAN" in probe.stdout,
        "refused_for_the_token": "InvalidAuthToken" in probe.stderr or "AuthenticationError" in probe.stderr,
    }


if __name__ == "__main__":
    from tests.integration.scripts import private_ray_tmpdir

    with private_ray_tmpdir():
        print("RESULT " + json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))), flush=True)
