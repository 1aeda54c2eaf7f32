"""Named points where a test can make the process die as a crash would (``os._exit``, no clean-up,
no ``finally``), to prove a step loses and duplicates nothing whatever moment it stops at.

``CABRAIN_FAILPOINTS=demote.after_cold_commit`` (comma-separated) arms points; unset, ``hit`` is a
dictionary lookup and nothing else.
"""

from __future__ import annotations

import os
import sys

EXIT_CODE = 137  # what a SIGKILL looks like


def hit(name: str) -> None:
    armed = os.environ.get("CABRAIN_FAILPOINTS")
    if armed and name in {p.strip() for p in armed.split(",")}:
        sys.stderr.write(f"cabrain failpoint {name}: exiting as a crash would\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)


__all__ = ["hit"]
