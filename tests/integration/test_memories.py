"""The memories table: partitions, global identity, constraints and vectors."""

import uuid
from datetime import UTC, date, datetime

import asyncpg
import numpy as np
import pytest

from cabrain.store.migrations import ensure_partitions

INSERT = """
INSERT INTO memories (id, namespace, owner_agent_id, content, embedding, valid_at, source_kind, source_ref)
VALUES ($1, 'proj', 'agent-a', $2, $3, $4, 'manual', 'test')
RETURNING tableoid::regclass::text
"""
GET_BY_ID = """
SELECT m.*, m.tableoid::regclass::text AS partition
FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.id = $1
"""


def unit_vector(seed: int, dim: int = 384) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
async def brain(conn):
    await conn.execute("INSERT INTO agents (id) VALUES ('agent-a')")
    await conn.execute("INSERT INTO namespaces (name, owner_agent_id) VALUES ('proj', 'agent-a')")
    return conn


async def test_a_memory_can_be_written_to_and_read_from_a_month_with_no_partition(brain):
    when = datetime(2031, 5, 10, 12, 30, tzinfo=UTC)
    assert await brain.fetchval("SELECT count(*) FROM pg_class WHERE relname = 'memories_p203105'") == 0
    mid = uuid.uuid4()
    vec = unit_vector(1)
    partition = await brain.fetchval(INSERT, mid, "ذهبنا إلى الإسكندرية in May 2031", vec, when)
    assert partition == "memories_default"

    row = await brain.fetchrow(GET_BY_ID, mid)
    assert row["content"] == "ذهبنا إلى الإسكندرية in May 2031"
    assert row["valid_at"] == when
    np.testing.assert_allclose(row["embedding"].to_numpy(), vec, rtol=1e-6)

    # Partition maintenance later creates the month and moves the row out of the default.
    created = await ensure_partitions(brain, date(2031, 5, 1), months_back=0, months_ahead=0)
    assert created == ["memories_p203105"]
    row = await brain.fetchrow(GET_BY_ID, mid)
    assert row["partition"] == "memories_p203105"
    assert row["content"].startswith("ذهبنا")
    assert await brain.fetchval("SELECT count(*) FROM memories WHERE id = $1", mid) == 1
    assert await brain.fetchval("SELECT count(*) FROM memories_default") == 0
    # Idempotent.
    assert await ensure_partitions(brain, date(2031, 5, 1), months_back=0, months_ahead=0) == created


async def test_new_partitions_get_every_index_and_vectors_share_one_graph(brain):
    await ensure_partitions(brain, date(2032, 1, 1), months_back=0, months_ahead=0)
    indexes = await brain.fetch("SELECT indexdef FROM pg_indexes WHERE tablename = 'memories_p203201'")
    defs = " ".join(r["indexdef"] for r in indexes)
    assert "hnsw" not in defs  # the vectors are walked in memory_vectors' one graph
    assert (
        await brain.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'memory_vectors' AND indexdef LIKE '%USING hnsw (embedding vector_cosine_ops)%'"
        )
        == 1
    )
    assert "(namespace, tier) WHERE (invalid_at IS NULL)" in defs
    assert "importance" not in defs  # no index covers importance: decay and bookkeeping update in place (HOT)
    options = await brain.fetchval("SELECT reloptions FROM pg_class WHERE relname = 'memories_p203201'")
    assert options == ["fillfactor=85"]


async def test_ids_are_unique_across_partitions(brain):
    mid = uuid.uuid4()
    await brain.fetchval(INSERT, mid, "first", unit_vector(2), datetime(2026, 11, 1, tzinfo=UTC))
    with pytest.raises(asyncpg.UniqueViolationError):
        await brain.fetchval(INSERT, mid, "same id, other month", unit_vector(3), datetime(2031, 1, 1, tzinfo=UTC))


async def test_a_memorys_identity_cannot_be_edited(brain):
    mid = uuid.uuid4()
    await brain.fetchval(INSERT, mid, "fixed in time", unit_vector(4), datetime.now(UTC))
    with pytest.raises(asyncpg.IntegrityConstraintViolationError, match="cannot change"):
        await brain.execute("UPDATE memories SET valid_at = valid_at - interval '40 days' WHERE id = $1", mid)
    with pytest.raises(asyncpg.IntegrityConstraintViolationError, match="supersede"):
        await brain.execute("UPDATE memories SET namespace = 'proj' || '' , id = gen_random_uuid() WHERE id = $1", mid)
    # Other fields change freely (access bookkeeping, soft invalidation).
    await brain.execute("UPDATE memories SET access_count = access_count + 1, invalid_at = now() WHERE id = $1", mid)


async def test_superseded_by_must_point_at_a_real_memory_in_any_partition(brain):
    old, new = uuid.uuid4(), uuid.uuid4()
    await brain.fetchval(INSERT, old, "we deploy on Fridays", unit_vector(5), datetime(2026, 10, 3, tzinfo=UTC))
    await brain.fetchval(INSERT, new, "we never deploy on Fridays", unit_vector(6), datetime(2031, 2, 3, tzinfo=UTC))
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await brain.execute("UPDATE memories SET superseded_by = $2 WHERE id = $1", old, uuid.uuid4())
    await brain.execute("UPDATE memories SET superseded_by = $2, invalid_at = now() WHERE id = $1", old, new)
    chain = await brain.fetchrow(
        "SELECT o.content AS old, n.content AS new FROM memories o "
        "JOIN memory_ids i ON i.id = o.superseded_by "
        "JOIN memories n ON n.id = i.id AND n.valid_at = i.valid_at WHERE o.id = $1",
        old,
    )
    assert dict(chain) == {"old": "we deploy on Fridays", "new": "we never deploy on Fridays"}


@pytest.mark.parametrize(
    ("column", "value"),
    [("visibility", "public"), ("importance", 1.5), ("network", "rumour"), ("tier", "warm"), ("content", "")],
)
async def test_constraints_reject_invalid_values(brain, column, value):
    with pytest.raises(asyncpg.CheckViolationError):
        await brain.execute(
            f"INSERT INTO memories (namespace, content, {column}) VALUES ('proj', 'x', $1)"
            if column != "content"
            else "INSERT INTO memories (namespace, content) VALUES ('proj', $1)",
            value,
        )


async def test_scoping_references_are_enforced(brain):
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await brain.execute("INSERT INTO memories (namespace, content) VALUES ('nowhere', 'x')")
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await brain.execute("INSERT INTO memories (namespace, owner_agent_id, content) VALUES ('proj', 'ghost', 'x')")


async def test_vectors_of_the_wrong_dimension_are_rejected(brain):
    with pytest.raises(asyncpg.DataError, match="expected 384 dimensions"):
        await brain.fetchval(INSERT, uuid.uuid4(), "short", np.ones(3, dtype=np.float32), datetime.now(UTC))


async def test_nearest_neighbour_search_across_partitions(brain):
    base = unit_vector(7)
    months = [datetime(2026, 10, 5, tzinfo=UTC), datetime(2031, 7, 5, tzinfo=UTC)]
    ids = []
    for i, when in enumerate(months * 3):
        noisy = base + 0.05 * (i + 1) * unit_vector(100 + i)
        mid = uuid.uuid4()
        ids.append(mid)
        await brain.fetchval(INSERT, mid, f"memory {i}", noisy / np.linalg.norm(noisy), when)
    top = await brain.fetch("SELECT id FROM memories WHERE namespace = 'proj' ORDER BY embedding <=> $1 LIMIT 3", base)
    assert [r["id"] for r in top] == ids[:3]


async def test_a_rows_vector_follows_it_through_partition_moves_updates_and_deletes(brain):
    vector_of = "SELECT embedding FROM memory_vectors WHERE id = $1"
    memory_id, when = uuid.uuid4(), datetime(2033, 3, 3, tzinfo=UTC)
    assert await brain.fetchval(INSERT, memory_id, "a fact", unit_vector(1), when) == "memories_default"
    assert np.allclose((await brain.fetchval(vector_of, memory_id)).to_numpy(), unit_vector(1))
    await ensure_partitions(brain, date(2033, 3, 1), months_back=0, months_ahead=0)  # the row moves
    assert (await brain.fetchrow(GET_BY_ID, memory_id))["partition"] == "memories_p203303"
    assert np.allclose((await brain.fetchval(vector_of, memory_id)).to_numpy(), unit_vector(1))
    await brain.execute("UPDATE memories SET embedding = $2 WHERE id = $1", memory_id, unit_vector(2))
    assert np.allclose((await brain.fetchval(vector_of, memory_id)).to_numpy(), unit_vector(2))
    await brain.execute("UPDATE memories SET invalid_at = now() WHERE id = $1", memory_id)
    assert await brain.fetchval(vector_of, memory_id) is not None  # history stays searchable
    await brain.execute("DELETE FROM memories WHERE id = $1", memory_id)  # as demotion does
    assert await brain.fetchval(vector_of, memory_id) is None
