"""``cabrain import --ray`` on a real two-node Ray cluster (``ray.cluster_utils.Cluster``) on one
machine: an export without vectors, its memories embedded on both nodes. Prints one JSON object:
the nodes and the import's report (with ``embedded_on``, the texts each node embedded). Run by
tests/integration/test_bulk_import_ray.py; its environment is the command's (cli_env)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys


def main(path: str, home: str) -> dict:
    from cabrain import ray_runtime
    from cabrain.settings import load_settings

    # every node on this machine: Ray on loopback with token auth, as CaBrain's own local Ray
    ray_runtime.apply_ray_environment(ray_runtime.ray_environment(load_settings(home=home), local=True))
    import ray
    from ray.cluster_utils import Cluster

    from cabrain.cli import main as cabrain

    store = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": store})
    try:
        worker = cluster.add_node(num_cpus=1, object_store_memory=store)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        head = ray.get_runtime_context().get_node_id()
        os.environ["CABRAIN_RAY_ADDRESS"] = cluster.address
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cabrain(["import", "cabrain", path, "--ray", "--json", "--quiet"])
        return {"code": code, "head": head, "worker": worker.node_id, "report": json.loads(out.getvalue())}
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    from tests.integration.scripts import private_ray_tmpdir

    with private_ray_tmpdir():
        print("RESULT " + json.dumps(main(sys.argv[1], sys.argv[2]), default=str), flush=True)
