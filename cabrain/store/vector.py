"""Statements of dense vector search (:mod:`cabrain.search.vector`, which chooses between them and
steers the planner): the memories' own vectors (``memory_vectors``, one HNSW graph of every hot
vector: schema 0007, over ``memories``), their passages' (``memory_chunks``: schema 0003), and the
sizes that choose between the exact scan and the graph walk (``namespaces``' counters,
``pg_class``)."""

from __future__ import annotations

from cabrain.store.access import ACCESS_CTE, RECALL_FILTER
from cabrain.store.memories import COLUMNS
from cabrain.store.statement import Statement

# --- the memories' own vectors -------------------------------------------------------------------------
# Through the one HNSW graph of memory_vectors, joined back to the rows for scope and filters (run
# with sorting disabled, so the index order is kept and the scan stops after :limit survivors).
SEARCH = Statement(
    f"""
WITH {ACCESS_CTE},
nearest AS MATERIALIZED (
    SELECT {COLUMNS}, v.embedding <=> :vector AS distance
    FROM memory_vectors v JOIN memories m ON m.id = v.id AND m.valid_at = v.valid_at
    WHERE v.namespace = :namespace AND {RECALL_FILTER}
    ORDER BY v.embedding <=> :vector
    LIMIT :limit
)
SELECT * FROM nearest ORDER BY distance, id
"""
)
# Exact: "+ 0" keeps the HNSW index out, so the namespace's rows are found by its btree and the
# nearest chosen by distance alone; only those are then read whole (sorting the namespace's rows
# with all their columns cost a fifth more: a 10k namespace 21.5 -> 17.7 ms).
SEARCH_EXACT = Statement(
    f"""
WITH {ACCESS_CTE},
nearest AS MATERIALIZED (
    SELECT m.id, m.valid_at, m.embedding <=> :vector AS distance
    FROM memories m
    WHERE {RECALL_FILTER} AND m.embedding IS NOT NULL
    ORDER BY (m.embedding <=> :vector) + 0
    LIMIT :limit
)
SELECT {COLUMNS}, n.distance
FROM nearest n JOIN memories m ON m.id = n.id AND m.valid_at = n.valid_at
ORDER BY n.distance, m.id
"""
)

# --- the passages' vectors -----------------------------------------------------------------------------
_PASSAGES = """
WITH {access},
near AS MATERIALIZED (
    SELECT c.memory_id, c.valid_at, c.embedding <=> :vector AS d
    FROM memory_chunks c
    WHERE c.namespace = :namespace
    ORDER BY {order}
    LIMIT :passages
),
best AS (SELECT memory_id, valid_at, min(d) AS passage_distance FROM near GROUP BY memory_id, valid_at)
SELECT {columns}, m.embedding <=> :vector AS distance, b.passage_distance
FROM best b JOIN memories m ON m.id = b.memory_id AND m.valid_at = b.valid_at
WHERE {where} AND m.embedding IS NOT NULL
ORDER BY b.passage_distance, m.id
LIMIT :limit
"""
PASSAGES = Statement(
    _PASSAGES.format(access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="c.embedding <=> :vector")
)
PASSAGES_EXACT = Statement(
    _PASSAGES.format(access=ACCESS_CTE, columns=COLUMNS, where=RECALL_FILTER, order="(c.embedding <=> :vector) + 0")
)

# --- sizes ---------------------------------------------------------------------------------------------
# The graph's size as the planner last counted it (autovacuum keeps it current): free to read.
GRAPH_SIZE = "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'memory_vectors'::regclass"
SIZES = f"""
SELECT n.memory_count, n.chunk_count, ({GRAPH_SIZE}) AS vectors,
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'memory_chunks'::regclass) AS passages
FROM namespaces n WHERE n.name = $1
"""
