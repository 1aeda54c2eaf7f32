"""The async client's calls of entities merged and renamed. Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from cabrain.client.base import Transport


class EntityCareCalls(Transport):
    """Entities merged and renamed, as the key's agent."""

    async def rename_entity(
        self, namespace: str, name_or_id: str, new_name: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        """Rename an entity (a revertible judgment, returned); see :meth:`cabrain.brain.Brain.rename_entity`."""
        path = f"/v1/entities/{urllib.parse.quote(str(name_or_id), safe='')}/rename"
        body = {"new_name": new_name, "reason": reason}
        answer: dict[str, Any] = await self.request("POST", path, params={"namespace": namespace}, json=body)
        return answer

    async def merge_entity(
        self, namespace: str, name_or_id: str, into: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        """Merge an entity into another (a revertible judgment, returned); see
        :meth:`cabrain.brain.Brain.merge_entity`."""
        path = f"/v1/entities/{urllib.parse.quote(str(name_or_id), safe='')}/merge"
        body = {"into": into, "reason": reason}
        answer: dict[str, Any] = await self.request("POST", path, params={"namespace": namespace}, json=body)
        return answer


__all__ = ["EntityCareCalls"]
