"""A write's neighbours and the deterministic decision against them (see :mod:`cabrain.write.decision`)."""

from __future__ import annotations

import asyncpg

from cabrain.engine import Engine
from cabrain.search import vector
from cabrain.store.keyword import SearchFilters
from cabrain.write.decision import Neighbour, WriteDecision, decide
from cabrain.write.decision.origin import Origin, origin_of
from cabrain.write.item import Item


async def neighbours_of(
    conn: asyncpg.Connection,
    engine: Engine,
    agent: str,
    item: Item,
    limit: int | None = None,
    size: int | None = None,
    total: int | None = None,
) -> list[Neighbour]:
    assert item.embedding is not None, "embedded before its neighbours are searched"
    rows = await vector.search(
        conn,
        item.embedding,
        SearchFilters(item.input.namespace, agent),
        limit or engine.settings.neighbours,
        exact_max=engine.settings.vector_exact_max,
        ef_search=engine.settings.retain_ef_search,
        size=size,
        total=total,
        skip_cost=engine.settings.vector_skip_cost,
    )
    kinds = engine.settings.record_source_kinds
    return [
        Neighbour(
            r["id"],
            r["content"],
            1.0 - float(r["distance"]),
            r["visibility"],
            origin_of(r["source_kind"], r["source_ref"], r["metadata"], kinds),
        )
        for r in rows
    ]


def origin(settings, item: Item) -> Origin:
    """Where the item comes from: a turn's speaker, a record's identity (write.decision.origin)."""
    inp = item.input
    return origin_of(inp.source_kind, inp.source_ref, inp.metadata, settings.record_source_kinds)


def deterministic(settings, item: Item, neighbours: list[Neighbour]) -> WriteDecision:
    return decide(
        item.content,
        neighbours,
        duplicate_similarity=settings.duplicate_similarity,
        revision_similarity=settings.revision_similarity,
        visibility=item.input.visibility.value,
        origin=origin(settings, item),
    )
