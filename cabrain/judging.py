"""What CaBrain decided on its own (supersessions, invalidations, merges, corrections, a sleep run's
work), and undoing it: the judgment operations of :class:`cabrain.brain.Brain`."""

from __future__ import annotations

import uuid
from typing import Any

from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.gate import Read, operation
from cabrain.membership import as_uuid
from cabrain.policy import Op
from cabrain.sleep import revert as sleep_revert
from cabrain.write import changes


class Judging:
    """The judgment half of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine

    @operation(
        Op.READ,
        reads=Read.MEMORIES,
        http="GET /v1/memories/{memory_id}/judgments",
        client="judgments",
        backend="judgments",
        mcp="memory_judgments",
        cli="judgments",
    )
    async def judgments(self, agent: str, memory_id: uuid.UUID | str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The judgments (supersessions, invalidations, merges, corrections, reverts) that changed a
        memory the agent may read, newest first."""
        memory_id = as_uuid(memory_id)
        if not 1 <= limit <= 500:
            raise InputError(f"limit must be between 1 and 500, got {limit}")
        return await changes.judgments_of(self.engine, agent, memory_id, limit)

    @operation(
        Op.CORRECT,
        reads=Read.MEMORIES,
        held=True,
        http=("POST /v1/memories/{memory_id}/revert", "POST /v1/judgments/{judgment_id}/revert"),
        client="revert",
        backend="revert",
        mcp="memory_revert",
        cli="revert",
    )
    async def revert(
        self,
        agent: str,
        *,
        judgment_id: uuid.UUID | str | None = None,
        memory_id: uuid.UUID | str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Undo a judgment - by its id, or the latest one not reverted yet that changed ``memory_id``:
        every memory it changed gets back its state before it (the same id, content, validity,
        metadata and links), and the revert is recorded as a judgment of its own (revertible in
        turn). Only an agent that may write the namespace and read every memory involved may."""
        if (judgment_id is None) == (memory_id is None):
            raise InputError("give a judgment id or a memory id, not both")
        return await changes.revert(
            self.engine,
            agent,
            judgment_id=as_uuid(judgment_id, "judgment id") if judgment_id is not None else None,
            memory_id=as_uuid(memory_id) if memory_id is not None else None,
            reason=reason,
        )

    @operation(
        Op.CORRECT,
        reads=Read.MEMORIES,
        held=True,
        http="POST /v1/sleep/runs/{run_id}/revert",
        client="revert_run",
        backend="revert_run",
        mcp="memory_revert",
        cli="revert",
    )
    async def revert_run(
        self, agent: str, run_id: uuid.UUID | str, *, reason: str | None = None
    ) -> list[dict[str, Any]]:
        """Undo everything sleep run ``run_id`` did - the facts it distilled, the summaries it wrote,
        its merges and supersessions, the importance it decayed, what it archived - in each namespace
        ``agent`` may write, as one revert judgment per namespace (revertible in turn). See
        :mod:`cabrain.sleep.revert`."""
        return await sleep_revert.revert_run(self.engine, agent, as_uuid(run_id, "run id"), reason)


__all__ = ["Judging"]
