"""An entity's neighbourhood as a graph: the entity, the memories that mention it (newest current
ones the caller may read), and the other entities those memories mention. What the console draws;
scoped as :meth:`cabrain.brain.Brain.entity` is (a namespace the caller may not read is
:class:`NotFound`, and only readable memories link entities)."""

from __future__ import annotations

import uuid
from collections import Counter
from itertools import combinations
from typing import Any

from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.store import access
from cabrain.store import entities as entity_sql
from cabrain.text.entities import entity_key

MAX_MEMORIES = 2000
MAX_ENTITY_EDGES = 300  # the entity-to-entity edges drawn at most, the heaviest


async def neighbourhood(
    engine: Engine, agent: str, namespace: str, name_or_id: str, *, limit: int = 300
) -> dict[str, Any]:
    """``{"center", "nodes", "edges"}``: nodes are entities (``kind`` "entity") and memories (``kind``
    "memory"); an edge is a memory mentioning an entity (``kind`` "mentions") or two entities mentioned
    together (``kind`` "mentioned together", ``weight`` in how many of the graph's memories, or for the
    entity itself in how many readable facts among its newest mentions, whichever is more; the
    heaviest ``MAX_ENTITY_EDGES``)."""
    if not 1 <= limit <= MAX_MEMORIES:
        raise InputError(f"limit must be between 1 and {MAX_MEMORIES}, got {limit}")
    try:
        entity_id: uuid.UUID | None = uuid.UUID(name_or_id)
    except ValueError:
        entity_id = None
    async with engine.pool.acquire() as conn:
        (await access.caller(conn, agent, namespace)).require_team_read()
        center = await entity_sql.one(
            conn, namespace, agent, entity_id=entity_id, key=entity_key(name_or_id), name=name_or_id
        )
        rows = await entity_sql.neighbourhood(conn, namespace, agent, center.id, limit=limit)
        related = await entity_sql.related(conn, namespace, agent, center.id, limit=limit)
    nodes: dict[str, dict[str, Any]] = {
        f"e:{center.id}": {"id": f"e:{center.id}", "kind": "entity", "label": center.name, "ref": str(center.id)}
    }
    edges: list[dict[str, Any]] = []
    mentioned: dict[str, list[str]] = {}
    for r in rows:
        memory, entity = f"m:{r['memory_id']}", f"e:{r['entity_id']}"
        nodes.setdefault(memory, {"id": memory, "kind": "memory", "label": r["content"], "ref": str(r["memory_id"])})
        nodes.setdefault(entity, {"id": entity, "kind": "entity", "label": r["name"], "ref": str(r["entity_id"])})
        edges.append({"source": memory, "target": entity, "kind": "mentions"})
        mentioned.setdefault(memory, []).append(entity)
    together: Counter[tuple[str, str]] = Counter()
    for names in mentioned.values():  # entity to entity: mentioned together in a memory of the graph
        together.update(combinations(sorted(set(names)), 2))
    for rel in related:  # and the facts the entity shares (among its newest mentions; not only those drawn)
        entity = f"e:{rel.id}"
        nodes.setdefault(entity, {"id": entity, "kind": "entity", "label": rel.name, "ref": str(rel.id)})
        pair = (min(entity, f"e:{center.id}"), max(entity, f"e:{center.id}"))
        together[pair] = max(together[pair], rel.shared_facts)
    for (a, b), weight in together.most_common(MAX_ENTITY_EDGES):
        edges.append({"source": a, "target": b, "kind": "mentioned together", "weight": weight})
    return {"center": f"e:{center.id}", "nodes": list(nodes.values()), "edges": edges}
