"""The async client's calls of entities merged and renamed. Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

from cabrain.client.base import Transport


class EntityCareCalls(Transport):
    """Entities merged and renamed, as the key's agent."""


__all__ = ["EntityCareCalls"]
