"""Checkout shim: ``python -m jobs.sleep_scheduler`` runs :mod:`cabrain.jobs.sleep_scheduler`."""

from __future__ import annotations

import sys

from cabrain.jobs.sleep_scheduler import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
