"""The async client's calls of the overview of what the brain holds and did. Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

from cabrain.client.base import Transport


class OverviewCalls(Transport):
    """The overview of what the brain holds and did, as the key's agent."""


__all__ = ["OverviewCalls"]
