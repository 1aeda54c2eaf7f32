"""High-importance patterns: the same problem seen in several sessions becomes a ``pattern`` event.

Only namespaces someone subscribed to patterns of are looked at (a subscription without a namespace
counts for every namespace). Each memory written there since the last look is compared with its
nearest current neighbours (the one HNSW graph of the hot tier); when those at least
``pattern_similarity`` alike come from ``pattern_min_sessions`` different sessions (a chat thread,
a captured session, else a source), that is a pattern. Its finding is named by the oldest memory of
the group, so the group growing is the same finding (the gate tells a subscriber once); its
importance is the highest of the group's, which the subscriber's threshold then weighs.
"""

from __future__ import annotations

from datetime import timedelta

from cabrain.engine import Engine
from cabrain.store import notify as sql

STEP = "notify_patterns"


async def find_patterns(engine: Engine, *, batch: int = 200) -> int:
    """Look at what was written since the last look; how many pattern events were made."""
    s = engine.settings
    made = 0
    async with engine.pool.acquire() as conn:
        names = [r["namespace"] for r in await conn.fetch(sql.PATTERN_NAMESPACES)]
        for namespace in names:
            since = await conn.fetchval(sql.WATERMARK, namespace, STEP)
            if since is None:
                since = engine.clock() - timedelta(days=1)
            fresh = await conn.fetch(sql.FRESH, namespace, since, batch)
            for row in fresh:
                alike = [
                    n
                    for n in await conn.fetch(sql.NEIGHBOURS, namespace, row["embedding"], row["id"])
                    if n["similarity"] >= s.pattern_similarity
                ]
                group = [row, *alike]
                sessions = {g["session"] for g in group}
                if len(sessions) < s.pattern_min_sessions:
                    continue
                oldest = min(group, key=lambda g: (g["created_at"], str(g["id"])))
                finding = f"pattern:{oldest['id']}"
                window = engine.clock() - timedelta(hours=s.notify_dedup_hours)
                if await conn.fetchval(sql.FINDING_SINCE, finding, window):
                    continue
                await sql.insert_event(
                    conn,
                    "pattern",
                    namespace,
                    finding,
                    now=engine.clock(),
                    importance=max(float(g["importance"]) for g in group),
                    body=f"Seen in {len(sessions)} sessions.",
                    memory_ids=[g["id"] for g in sorted(group, key=lambda g: g["created_at"], reverse=True)][:10],
                )
                made += 1
            if fresh:
                await conn.execute(sql.SET_WATERMARK, namespace, STEP, fresh[-1]["created_at"])
    return made


__all__ = ["find_patterns"]
