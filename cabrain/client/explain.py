"""The async client's calls of recall as a debugger (explain, why not). Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

from cabrain.client.base import Transport


class ExplainCalls(Transport):
    """Recall as a debugger (explain, why not), as the key's agent."""


__all__ = ["ExplainCalls"]
