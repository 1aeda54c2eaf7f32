"""The async client's calls of a person's corrections (correct, restore) and the audit of judgments. Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from cabrain.client.base import Transport
from cabrain.types import RetainResult, retain_from_dict


class CorrectionCalls(Transport):
    """A person's corrections (correct, restore) and the audit of judgments, as the key's agent."""

    async def correct(self, memory_id: uuid.UUID | str, content: str, *, reason: str | None = None) -> RetainResult:
        """Correct a memory: ``content`` becomes its new version, the old one superseded (revertible)."""
        body = {"content": content, "reason": reason}
        return retain_from_dict(await self.request("POST", f"/v1/memories/{memory_id}/correct", json=body))

    async def restore(self, memory_id: uuid.UUID | str, *, reason: str | None = None) -> dict[str, Any]:
        """Bring a forgotten memory back to recall; returns the judgment that did (revertible)."""
        answer: dict[str, Any] = await self.request(
            "POST", f"/v1/memories/{memory_id}/restore", json={"reason": reason}
        )
        return answer

    async def audit(
        self,
        namespace: str,
        *,
        kind: str | None = None,
        origin: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        """A page of the namespace's judgments, newest first (``next_cursor`` for the next), with counts."""
        params: dict[str, Any] = {"limit": limit}
        for name, value in (("kind", kind), ("origin", origin), ("cursor", cursor)):
            if value is not None:
                params[name] = value
        if since is not None:
            params["from"] = since.isoformat()
        if until is not None:
            params["to"] = until.isoformat()
        answer: dict[str, Any] = await self.request("GET", f"/v1/namespaces/{namespace}/judgments", params=params)
        return answer

    async def revert_judgments(
        self, judgment_ids: Sequence[uuid.UUID | str], *, reason: str | None = None
    ) -> list[dict[str, Any]]:
        """Revert several judgments, each its own revert; per id, ``ok`` or the error (not raised)."""
        body = {"ids": [str(i) for i in judgment_ids], "reason": reason}
        return (await self.request("POST", "/v1/judgments/revert", json=body))["results"]


__all__ = ["CorrectionCalls"]
