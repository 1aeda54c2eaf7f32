"""What the connector tests share: a namespace's memory rows as the sync left them, a stand-in's
state file edited between two syncs, and a Connectors facade whose retry waits are recorded."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import asyncpg

from cabrain.connectors.facade import Connectors
from cabrain.connectors.retry import Retry

ROWS = """
SELECT id, content, source_kind, source_ref, metadata, valid_at, invalid_at, superseded_by
FROM memories WHERE namespace = $1
"""


async def memories(dsn: str, namespace: str) -> list[asyncpg.Record]:
    """Every memory row of ``namespace``, current or not."""
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(ROWS, namespace)
    finally:
        await conn.close()


def edit_state(state: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    """Apply ``change`` to a stand-in's state file (it re-reads it on every request)."""
    data = json.loads(state.read_text())
    change(data)
    state.write_text(json.dumps(data))


async def recorded_hub(brain: Any, namespace: str, environ: Mapping[str, str]) -> tuple[Connectors, list[float]]:
    """A facade over ``brain``'s engine with ``namespace`` made by root, and the waits its retries asked for."""
    await brain.create_namespace("root", namespace)
    waits: list[float] = []
    return Connectors(brain.engine, environ=environ, retry=Retry(sleep=waits.append)), waits
