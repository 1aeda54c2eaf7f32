"""``CABRAIN_SERVE_DIRECT_INGRESS`` as the environment of the Ray that CaBrain starts: Serve's switch,
a port range holding the API's port alone (as Serve's own allocator reads it), and no quarantine."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray.serve._private.common import RequestProtocol
from ray.serve._private.node_port_manager import NoAvailablePortError, PortAllocator

from cabrain.ray_runtime import ray_environment
from cabrain.settings import load_settings


def test_off_by_default_nothing_of_serves_direct_ingress_is_set(tmp_path: Path) -> None:
    env = ray_environment(load_settings(home=tmp_path), local=False)
    assert not [k for k in env if "DIRECT_INGRESS" in k or "QUARANTINE" in k]


def test_on_the_ingress_replica_gets_the_api_port_and_only_it(tmp_path: Path) -> None:
    env = ray_environment(load_settings(home=tmp_path, api_port=9123, serve_direct_ingress=True), local=False)
    assert env["RAY_SERVE_ENABLE_DIRECT_INGRESS"] == "1"
    assert env["RAY_SERVE_PORT_QUARANTINE_S"] == "0"
    low, high = int(env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"]), int(env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"])
    ports = PortAllocator(low, high, protocol=RequestProtocol.HTTP, node_id="node")
    assert ports.allocate("first") == 9123
    with pytest.raises(NoAvailablePortError):  # a second ingress replica on the node gets none
        ports.allocate("second")
