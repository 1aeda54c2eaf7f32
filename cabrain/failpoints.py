"""Named points where a test can make a fault happen at one exact moment, to prove that the code
around it loses and duplicates nothing whatever moment it stops at.

``CABRAIN_FAILPOINTS=demote.after_cold_commit,retain.after_commit`` (comma-separated) arms points;
``retain.after_commit@ns`` arms one only where the code names the scope ``ns`` (a namespace), so a
long-running test service can keep a point armed for one namespace of its own.
:func:`hit` makes the process die as a crash would (``os._exit``: no clean-up, no ``finally``);
:func:`drop` makes the database drop the connection, as a network fault or a failover would.
Unset, each is a dictionary lookup and nothing else. Production never sets the variable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

import asyncpg

from cabrain.store import db as db_sql

EXIT_CODE = 137  # what a SIGKILL looks like


def armed(name: str, scopes: Iterable[str] = ()) -> bool:
    """``name`` is armed, everywhere or in one of ``scopes``."""
    points = os.environ.get("CABRAIN_FAILPOINTS") or ""
    if not points:
        return False
    wanted = {name, *(f"{name}@{scope}" for scope in scopes)}
    return any(p.strip() in wanted for p in points.split(","))


def hit(name: str) -> None:
    """Exit now, as a killed process would, when ``name`` is armed."""
    if armed(name):
        sys.stderr.write(f"cabrain failpoint {name}: exiting as a crash would\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)


async def drop(name: str, conn: asyncpg.Connection, scopes: Iterable[str] = ()) -> None:
    """The server ends ``conn``'s session now (``pg_terminate_backend``), when ``name`` is armed
    (there or in one of ``scopes``): the caller sees the connection lost, as after a network fault,
    whatever it had committed."""
    if armed(name, scopes):
        await conn.execute(db_sql.TERMINATE_SELF)


__all__ = ["EXIT_CODE", "armed", "drop", "hit"]
