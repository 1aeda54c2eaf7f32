"""The ``cabrain`` executable. ``cabrain capture`` runs on every Claude Code hook event, so it is
dispatched here before the full command line (and its settings machinery) is imported."""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:2] == ["capture"]:
        from cabrain.faces.capture import main as capture

        return capture(sys.argv[2:])
    from cabrain.cli import main as cli

    return cli()
