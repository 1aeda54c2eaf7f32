"""Checkout shim: ``python -m jobs.workflow_learn`` runs :mod:`cabrain.jobs.workflow_learn`."""

from __future__ import annotations

import sys

from cabrain.jobs.workflow_learn import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
