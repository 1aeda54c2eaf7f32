"""A person's corrections: edit a memory as a new version that supersedes the old one, forget as a
revertible judgment, restore a forgotten memory, and the audit of judgments per namespace with bulk
revert: operations of :class:`cabrain.brain.Brain`."""

from __future__ import annotations

from cabrain.engine import Engine


class Corrections:
    """A part of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine


__all__ = ["Corrections"]
