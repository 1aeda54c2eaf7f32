"""Recall as a debugger: the same recall, never counted as a use, with every list's rank and score,
each boost's formula, and why a given memory was not returned: operations of
:class:`cabrain.brain.Brain`."""

from __future__ import annotations

from cabrain.engine import Engine


class Explaining:
    """A part of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine


__all__ = ["Explaining"]
