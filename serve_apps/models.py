"""Re-export of :mod:`cabrain.serve.models`."""

from cabrain.serve.models import (
    EmbedderDeployment,
    LocalQueries,
    RemoteEmbedder,
    RemoteReranker,
    RerankerDeployment,
    Turns,
    call_with_retry,
)

__all__ = [
    "EmbedderDeployment",
    "LocalQueries",
    "RemoteEmbedder",
    "RemoteReranker",
    "RerankerDeployment",
    "Turns",
    "call_with_retry",
]
