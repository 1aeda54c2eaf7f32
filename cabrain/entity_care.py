"""Entities looked after by people: mention counts, merge and rename as revertible judgments:
operations of :class:`cabrain.brain.Brain`."""

from __future__ import annotations

from cabrain.engine import Engine


class EntityCare:
    """A part of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine


__all__ = ["EntityCare"]
