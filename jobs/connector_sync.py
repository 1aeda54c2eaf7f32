"""Checkout shim: ``python -m jobs.connector_sync`` runs :mod:`cabrain.jobs.connector_sync`."""

from __future__ import annotations

import sys

from cabrain.jobs.connector_sync import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
