"""A person's corrections: edit a memory as a new version that supersedes the old one, forget as a
revertible judgment, restore a forgotten memory, and the audit of judgments per namespace with bulk
revert: operations of :class:`cabrain.brain.Brain` (the pipeline: :mod:`cabrain.write.corrections`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from cabrain import edge
from cabrain.engine import Engine
from cabrain.gate import Read, operation
from cabrain.membership import as_uuid
from cabrain.policy import Op
from cabrain.types import RetainResult
from cabrain.write import corrections


class Corrections:
    """A part of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine

    @operation(
        Op.CORRECT,
        reads=Read.MEMORIES,
        held=True,
        http="POST /v1/memories/{memory_id}/correct",
        client="correct",
        backend="correct",
        mcp="memory_correct",
        cli="correct",
    )
    async def correct(
        self, agent: str, memory_id: uuid.UUID | str, content: str, *, reason: str | None = None
    ) -> RetainResult:
        """A person's correction: ``content`` becomes a new version of the memory (same namespace,
        visibility, classification and provenance; embedded and indexed as any write) and the old one
        is superseded. Recorded as a judgment of kind ``correction`` decided by a person, with the
        agent and ``reason``; reverting it makes the old version current again and takes the new one
        out of recall. Needs write access to the namespace; only a current memory can be corrected."""
        return await corrections.correct(self.engine, agent, as_uuid(memory_id), content, reason=reason)

    @operation(
        Op.CORRECT,
        reads=Read.MEMORIES,
        held=True,
        http="POST /v1/memories/{memory_id}/restore",
        client="restore",
        backend="restore",
        mcp="memory_restore",
        cli="unforget",
    )
    async def restore(self, agent: str, memory_id: uuid.UUID | str, *, reason: str | None = None) -> dict[str, Any]:
        """Bring a forgotten memory back: its forget is reverted (or, forgotten before forgets were
        judgments, it is restored directly as a judgment of kind ``restore``), so recall finds it
        again (archive recall, for one in the cold tier). Returns that judgment, revertible in turn
        (which forgets it again). Needs write access to the namespace."""
        return await corrections.restore(self.engine, agent, as_uuid(memory_id), reason=reason)

    @operation(
        Op.READ,
        namespace="namespace",
        reads=Read.MEMORIES,
        http="GET /v1/namespaces/{namespace:path}/judgments",
        client="audit",
        cli="audit",
    )
    async def audit(
        self,
        agent: str,
        namespace: str,
        *,
        kind: str | None = None,
        origin: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        """The judgments of ``namespace``, newest first, a keyset page at a time (``cursor``: a page's
        ``next_cursor``): of one ``kind``, decided by one ``origin`` (write, sleep, person, import),
        made in [``since``, ``until``). Only judgments about memories ``agent`` may read, each with
        the texts of what it took out of recall (``before``) and brought in (``after``), who made it
        and why; and the counts per origin and kind in the window."""
        return await corrections.audit(
            self.engine,
            agent,
            namespace,
            kind=kind,
            origin=origin,
            since=edge.check_moment(since, "from") if since is not None else None,
            until=edge.check_moment(until, "to") if until is not None else None,
            cursor=cursor,
            limit=limit,
        )

    @operation(
        Op.CORRECT,
        reads=Read.MEMORIES,
        held=True,
        http="POST /v1/judgments/revert",
        client="revert_judgments",
        cli="audit",
    )
    async def revert_judgments(
        self, agent: str, judgment_ids: Sequence[uuid.UUID | str], *, reason: str | None = None
    ) -> list[dict[str, Any]]:
        """Revert several judgments (at most 100), each in its own transaction and recorded as its own
        revert judgment, the newest first; per id, ``ok`` and the revert's id, or the ``status`` and
        ``error`` of why it was not reverted (the others are reverted all the same)."""
        return await corrections.revert_many(
            self.engine, agent, [as_uuid(i, "judgment id") for i in judgment_ids], reason=reason
        )


__all__ = ["Corrections"]
