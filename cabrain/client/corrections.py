"""The async client's calls of a person's corrections (correct, restore) and the audit of judgments. Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

from cabrain.client.base import Transport


class CorrectionCalls(Transport):
    """A person's corrections (correct, restore) and the audit of judgments, as the key's agent."""


__all__ = ["CorrectionCalls"]
