"""What the brain holds and did, at a glance: counts per namespace, tier, type and source kept
incrementally, activity over the last day and week, storage of both tiers: operations of
:class:`cabrain.brain.Brain`."""

from __future__ import annotations

from cabrain.engine import Engine


class Overview:
    """A part of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine


__all__ = ["Overview"]
