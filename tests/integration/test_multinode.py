"""Adding a node adds replicas: a real multi-node Ray cluster (in a subprocess of its own), on loopback,
whose job endpoints refuse callers without the cluster's token."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, free_port, make_scratch_dir


@pytest.mark.ray
def test_a_replica_waits_for_an_added_node_and_then_serves_from_it(db_dsn: str) -> None:
    home = make_scratch_dir("cabrain-multinode-")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration.scripts.multinode", db_dsn, str(home), str(free_port())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    seen = json.loads(lines[-1].removeprefix("RESULT "))
    assert seen["running_before_join"] == 1
    assert not seen["completed_on_one_node"]  # the second replica had nowhere to go
    assert seen["embedder_nodes"] == sorted([seen["head"], seen["worker"]])  # both replicas serve
    assert len(seen["embedder_pids"]) == 2
    assert seen["recall_statuses"] == [200] * 20
    assert seen["removed"] is True and "cabrain" not in seen["apps_after_down"]  # cabrain down
    # two nodes, every replica and proxy: nothing listens beyond loopback, no job runs without the token
    assert len(seen["listeners"]) > 10 and seen["exposed"] == [], seen["listeners"]
    refused = seen["jobs_without_token"]
    assert list(refused.values()).count(401) >= 2 and not [s for s in refused.values() if s < 400], refused
    assert 200 in seen["jobs_with_token"].values(), seen["jobs_with_token"]
    driver = seen["foreign_driver"]  # a driver without the token runs nothing
    assert driver["returncode"] != 0 and not driver["ran"] and driver["refused_for_the_token"], driver
