"""The async client's calls of recall as a debugger (explain, why not). Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

import uuid
from typing import Any

from cabrain.client.base import Transport, recall_body
from cabrain.types import RecallQuery


class ExplainCalls(Transport):
    """Recall as a debugger (explain, why not), as the key's agent."""

    async def explain_recall(self, query: RecallQuery, *, why_not: uuid.UUID | str | None = None) -> dict[str, Any]:
        """The recall taken apart, not counted as a use (its JSON form); ``why_not``: a memory id to
        ask about. See :meth:`cabrain.brain.Brain.explain_recall`."""
        body = recall_body(query) | {"why_not": str(why_not) if why_not is not None else None}
        answer: dict[str, Any] = await self.request("POST", "/v1/recall/explain", json=body)
        return answer


__all__ = ["ExplainCalls"]
