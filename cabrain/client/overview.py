"""The async client's calls of the overview of what the brain holds and did. Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

from typing import Any

from cabrain.client.base import Transport


class OverviewCalls(Transport):
    """The overview of what the brain holds and did, as the key's agent."""

    async def overview(self, *, namespace: str | None = None, runs: int = 5) -> dict[str, Any]:
        """Counts per namespace, tier, state, type and source; activity per day and hour; the newest
        sleep runs; pending actions; storage (admins). See :meth:`cabrain.brain.Brain.overview`."""
        params: dict[str, Any] = {"runs": runs} | ({"namespace": namespace} if namespace else {})
        answer: dict[str, Any] = await self.request("GET", "/v1/overview", params=params)
        return answer


__all__ = ["OverviewCalls"]
