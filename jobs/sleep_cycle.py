"""Checkout shim: ``python -m jobs.sleep_cycle`` runs :mod:`cabrain.jobs.sleep_cycle`."""

from __future__ import annotations

import sys

from cabrain.jobs.sleep_cycle import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
