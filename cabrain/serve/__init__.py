"""CaBrain's Ray Serve application: the HTTP ingress (``/v1``, routers per area under
:mod:`cabrain.serve.routes`) and the model deployments, built by :func:`cabrain.serve.app.build_app`.
``serve_apps/`` at the top of the repository re-exports it for Serve config files.

Importing this package (which every replica does, to load its deployment class) also keeps each
Serve replica's inter-deployment gRPC server off the network: Ray Serve 2.60 binds it to ``[::]``
(every interface) whatever the node's address is. It is bound to the node's own address instead,
which on a machine's local Ray is loopback and on a cluster the address other nodes reach it by
(Serve only uses this server for gRPC handles, which CaBrain does not use). The server also checks
Ray's token, as every Ray server does under token authentication.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def _bind_replica_grpc_to_node_address() -> None:
    try:  # Ray's internals, imported here: a Ray without them leaves the port as Ray binds it
        from ray._common.network_utils import build_address
        from ray.serve._private import replica
        from ray.util import get_node_ip_address
    except ImportError:
        return
    original = getattr(replica, "add_port_to_grpc_server", None)
    if original is None or getattr(original, "cabrain_node_bound", False):
        if original is None:  # a Ray that no longer has it; the socket test shows what it binds
            log.warning("ray.serve replica module has no add_port_to_grpc_server; its gRPC port is Ray's choice")
        return

    def add_port_on_node_address(server, address: str):
        if address.startswith(("[::]:", "0.0.0.0:")):
            address = build_address(get_node_ip_address(), int(address.rsplit(":", 1)[1]))
        return original(server, address)

    add_port_on_node_address.cabrain_node_bound = True  # type: ignore[attr-defined]
    replica.add_port_to_grpc_server = add_port_on_node_address


_bind_replica_grpc_to_node_address()
