"""The ingress deployment: each replica is a :class:`~cabrain.serve.replica.Replica` serving the
app of :func:`cabrain.serve.api.create_api`."""

from __future__ import annotations

from fastapi import FastAPI
from ray import serve

from cabrain.serve.api import create_api
from cabrain.serve.replica import Replica


class IngressReplica(Replica):
    """One replica of the HTTP API."""

    def __serve_build_asgi_app__(self) -> FastAPI:
        return create_api(self)


# Applied as calls, not as class decorators: type checkers keep a decorated class's own type.
Ingress = serve.deployment(name="Ingress", health_check_period_s=5)(serve.ingress()(IngressReplica))
