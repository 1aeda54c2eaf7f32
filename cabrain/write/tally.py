"""What the write decisions did to what a source brought: every import's and sync's summary says it.

A record that a decision merged into a stored memory (NOOP), that superseded one (UPDATE) or that
retracted one (INVALIDATE) is counted with the reason recorded, and the memories taken out of
recall are named (the first ``SHOWN``), so a summary says what was hidden and how to put it back:
each is a judgment, and ``cabrain revert MEMORY_ID`` (``POST /v1/memories/{id}/revert``) undoes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cabrain.types import Decision, RetainResult

SHOWN = 20
REVERT_HINT = "each is a judgment: `cabrain judgments MEMORY_ID` says why, `cabrain revert MEMORY_ID` puts it back"


@dataclass(kw_only=True)
class Decided:
    added: int = 0  # stored as new memories (ADD, or UPDATE: see superseded)
    duplicates: int = 0  # judged the same as a stored memory (NOOP: reinforced it instead of being stored)
    retracted: int = 0  # withdrew a stored memory and stored nothing (INVALIDATE)
    superseded: int = 0  # stored, and took an older memory out of recall (UPDATE)
    reasons: dict[str, int] = field(default_factory=dict)  # "merged: why", "superseded: why", "retracted: why"
    taken_out: list[str] = field(default_factory=list)  # memories taken out of recall (the first SHOWN)

    def decided(self, result: RetainResult) -> None:
        """Count one write's decision."""
        if result.decision is Decision.NOOP:
            self.duplicates += 1
            self._why("merged", result.reason)
            return
        if result.decision is Decision.INVALIDATE:
            self.retracted += 1
            self._why("retracted", result.reason)
        else:
            self.added += 1
            if result.superseded:
                self.superseded += 1
                self._why("superseded", result.reason)
        room = SHOWN - len(self.taken_out)
        self.taken_out.extend(str(m) for m in result.superseded[: max(room, 0)])

    def merge(self, other: Decided) -> None:
        for name, value in other.__dict__.items():
            mine = getattr(self, name)
            if isinstance(value, dict):
                for key, n in value.items():
                    mine[key] = mine.get(key, 0) + n
            elif isinstance(value, list):
                mine.extend(value[: max(SHOWN - len(mine), 0)])
            else:
                setattr(self, name, mine + value)

    def decisions_line(self) -> str:
        """The decisions in a sentence, with how to undo them ("" when they changed nothing stored)."""
        if not (self.duplicates or self.retracted or self.superseded):
            return ""
        parts = [f"{self.superseded} superseded a stored memory", f"{self.duplicates} merged into one"]
        parts.append(f"{self.retracted} retracted one")
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(self.reasons.items(), key=lambda kv: -kv[1])[:5])
        hint = f" ({REVERT_HINT})" if self.taken_out else ""
        return f"decisions: {', '.join(parts)}: {why}{hint}"

    def decisions_json(self) -> dict[str, Any]:
        return {"reasons": dict(self.reasons), "taken_out": list(self.taken_out), "revert": REVERT_HINT}

    def _why(self, what: str, reason: str | None) -> None:
        key = f"{what}: {reason or 'no reason recorded'}"
        self.reasons[key] = self.reasons.get(key, 0) + 1


def skipped_line(skipped: Mapping[str, int]) -> str:
    """What a source held that is no memory, by reason, in a sentence, the most first ("" when
    nothing): ``skipped 105: 94 attachment, 11 system``."""
    reasons = sorted(((why, n) for why, n in skipped.items() if n), key=lambda kv: (-kv[1], kv[0]))
    if not reasons:
        return ""
    return f"skipped {sum(n for _, n in reasons)}: " + ", ".join(f"{n} {why}" for why, n in reasons)
