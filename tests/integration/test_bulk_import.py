"""Issue 37: the bulk import (:mod:`cabrain.portable.bulk`) writes what the row-by-row import writes.

The same export (with its vectors) is imported into two empty brains, one row by row and one in
staged batches; everything a reader sees is the same: every record an export of it holds, the rows
of every table, the overview's counts, the entities' mentions, the keyword index and its
statistics, the answers to recall. Importing it again adds nothing, and an import the database
refuses midway leaves nothing."""

from __future__ import annotations

import io
import json
import uuid

import pytest

from cabrain.errors import InputError
from cabrain.portable.facade import Portable
from cabrain.portable.restore import restore
from cabrain.store.backup import row_counts
from cabrain.text.tokenizer import tokenize
from cabrain.types import MemoryInput, RecallQuery, Visibility
from tests.conftest import _create_database, _drop_database
from tests.integration.test_portable import _fill, _held, _lines, _records

LONG = " ".join(  # longer than CABRAIN_CHUNK_MIN_CHARS: stored with its passages, re-embedded on import
    f"Step {n}: the runbook for the payments cluster in Riyadh says to drain node {n} before patching it."
    for n in range(1, 8)
)
QUERIES = [("bob", "which port does staging use"), ("alice", "من مسؤول عن التصميم"), ("alice", "payments runbook")]
# What the two imports may differ in: when each ran (activity_hours counts an import when it ran).
ACTIVITY = """
SELECT namespace, kind, owner_agent_id, visibility, sum(n) AS n FROM activity_hours
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
"""
TABLES = {
    "memory_counts": "SELECT * FROM memory_counts ORDER BY 1, 2, 3, 4, 5, 6, 7",
    "postings": "SELECT namespace, term, memory_id, valid_at, tf, doc_len FROM memory_terms ORDER BY 1, 2, 3",
    "bm25_terms": "SELECT * FROM bm25_terms ORDER BY 1, 2",
    "bm25_namespaces": "SELECT * FROM bm25_namespaces ORDER BY 1",
    # created_at: the exported time in both, compared through the export
    "memories": "SELECT to_jsonb(m) - 'created_at' AS row FROM memories m ORDER BY id",
    "memory_ids": "SELECT to_jsonb(i) AS row FROM memory_ids i ORDER BY id",
    "memory_vectors": "SELECT id, valid_at, embedding::text FROM memory_vectors ORDER BY id",
    "passages": "SELECT memory_id, chunk_no, content, embedding::text FROM memory_chunks ORDER BY 1, 2",
    "entities": "SELECT id, key, mentions FROM entities ORDER BY id",
    "links": "SELECT * FROM memory_entities ORDER BY 1, 2",
    "namespaces": "SELECT name, memory_count, chunk_count FROM namespaces ORDER BY name",
    "indexes": """SELECT tablename, indexname, indexdef FROM pg_indexes
                  WHERE tablename IN ('memory_vectors', 'memory_terms') ORDER BY 1, 2""",
    "keys": """SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
               WHERE conrelid IN ('memory_terms'::regclass, 'memory_vectors'::regclass) ORDER BY 1""",
}
# what a large import into a small brain builds again after its rows (CABRAIN_IMPORT_REBUILD_INDEX_AT)
REBUILT = """
SELECT array['memory_vectors_hnsw'::regclass::oid, 'memory_terms_lookup'::regclass::oid,
             'memory_terms_pkey'::regclass::oid]
"""


@pytest.fixture
async def two_dsns(pg_server, template_db):
    names = [await _create_database(pg_server, template_db) for _ in range(2)]
    yield [pg_server.dsn(name) for name in names]
    for name in names:
        await _drop_database(pg_server, name)


async def _indexes(engine) -> list[int]:
    async with engine.pool.acquire() as conn:
        return await conn.fetchval(REBUILT)


async def _state(engine) -> dict:
    async with engine.pool.acquire() as conn:
        seen = {name: [dict(r) for r in await conn.fetch(query)] for name, query in TABLES.items()}
        seen["activity"] = [dict(r) for r in await conn.fetch(ACTIVITY)]
        seen["rows"] = await row_counts(conn)
    return seen


async def test_a_bulk_import_is_the_row_by_row_import(brain, settings_for, two_dsns, embedder) -> None:
    from cabrain.brain import Brain

    await _fill(brain)
    await brain.retain("alice", MemoryInput(LONG, "proj", visibility=Visibility.TEAM))
    out = io.StringIO()
    report = await Portable(brain.engine).export(None, ["proj"], out, with_embeddings=True)
    text = out.getvalue()
    exported = _records(text)
    assert all("embedding" in m for m in exported["memory"])

    # the bulk import of this small export builds its indexes once, after its rows, as a large one does
    rowwise, bulky = [
        await Brain.open(settings_for(d, import_rebuild_index_at=1), dsn=d, embedder=embedder) for d in two_dsns
    ]
    try:
        indexes = [await _indexes(b.engine) for b in (rowwise, bulky)]
        one = await restore(rowwise.engine, io.StringIO(text), bulk=False)
        other = await Portable(bulky.engine).restore(None, io.StringIO(text))  # vectors kept: the bulk path
        assert await _indexes(rowwise.engine) == indexes[0]  # grown row by row
        rebuilt = await _indexes(bulky.engine)  # dropped, and made again as they were defined
        assert all(a != b for a, b in zip(rebuilt, indexes[1], strict=True))
        assert one.added == other.added and one.added["memory"] == report.counts["memory"]
        assert one.skipped == other.skipped

        states = [await _state(b.engine) for b in (rowwise, bulky)]
        for name in states[0]:
            assert states[0][name] == states[1][name], name
        assert states[1]["postings"] and states[1]["passages"] and states[1]["memory_counts"]
        for b in (rowwise, bulky):
            again = io.StringIO()
            await Portable(b.engine).export(None, ["proj"], again, with_embeddings=True)
            assert _records(again.getvalue()) == exported

        for agent, query in QUERIES:
            answers = [
                [
                    (h.memory.id, round(h.score, 6))
                    for h in (await b.recall(agent, RecallQuery(query, "proj", k=4))).hits
                ]
                for b in (rowwise, bulky)
            ]
            assert answers[0] == answers[1] and answers[0], query

        await bulky.engine.bookkeeper.close()  # the recalls' events are written (off their response path)
        before = await _held(bulky.engine)
        twice = await restore(bulky.engine, io.StringIO(text), bulk=True)
        assert twice.added == {} and twice.skipped["memory"] == report.counts["memory"]
        assert await _held(bulky.engine) == before
    finally:
        await rowwise.close()
        await bulky.close()


async def test_a_bulk_import_the_database_refuses_midway_leaves_nothing(
    brain, settings_for, two_dsns, embedder
) -> None:
    """Its last memory names an owner that is no agent: the batches before it were staged and
    written, the database refuses that one, and none of the import stays; fixed, it imports whole."""
    from cabrain.brain import Brain

    await _fill(brain)
    out = io.StringIO()
    await Portable(brain.engine).export(None, ["proj"], out, with_embeddings=True)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    last = max(i for i, r in enumerate(records) if r["type"] == "memory")
    records[last]["owner_agent_id"] = "ghost"
    other = await Brain.open(settings_for(two_dsns[0]), dsn=two_dsns[0], embedder=embedder)
    try:
        before = await _held(other.engine)
        with pytest.raises(InputError, match="could not be written") as refused:
            await restore(other.engine, _lines(records), batch=2, bulk=True)
        assert "nothing of it was written" in refused.value.message
        assert await _held(other.engine) == before
        records[last]["owner_agent_id"] = "alice"
        report = await restore(other.engine, _lines(records), batch=2, bulk=True)
        assert report.added["memory"] == sum(1 for r in records if r["type"] == "memory")
    finally:
        await other.close()


async def test_a_bulk_import_in_many_batches_that_builds_its_indexes_again_runs_through(
    brain, settings_for, two_dsns, embedder
) -> None:
    """Once its first batch has dropped the indexes it builds again, the import's transaction holds
    ``memory_ids``: the next batches look for memories stored before on the import's own connection
    (on another, the lookup waited for the import to commit, and the import for the lookup)."""
    from cabrain.brain import Brain

    await _fill(brain)
    out = io.StringIO()
    report = await Portable(brain.engine).export(None, ["proj"], out, with_embeddings=True)
    other = await Brain.open(settings_for(two_dsns[1], import_rebuild_index_at=1), dsn=two_dsns[1], embedder=embedder)
    try:
        assert other.engine.pool.get_max_size() > 1
        indexes = await _indexes(other.engine)
        done = await restore(other.engine, io.StringIO(out.getvalue()), batch=2, bulk=True)
        assert done.added["memory"] == report.counts["memory"] > 2
        assert all(a != b for a, b in zip(await _indexes(other.engine), indexes, strict=True))
    finally:
        await other.close()


async def test_a_memory_named_twice_is_written_once_with_its_own_words(brain, settings_for, two_dsns, embedder) -> None:
    """A bulk import counts a batch's words while the batch before is written: a file naming one
    memory twice (the second with other text) writes the first, indexed by its own words, whether
    the two share a batch or not."""
    from cabrain.brain import Brain

    await _fill(brain)
    out = io.StringIO()
    await Portable(brain.engine).export(None, ["proj"], out, with_embeddings=True)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    first = next(r for r in records if r["type"] == "memory" and "staging database" in r["content"])
    twin = {**first, "content": "Zanzibar quokkas juggle marmalade."}
    records.insert(records.index(first) + 1, twin)
    records[-1]["counts"]["memory"] += 1
    lines = _lines(records)
    memory_id = uuid.UUID(first["id"])
    for dsn, batch in zip(two_dsns, (2, None), strict=True):  # batches of two, and one batch
        other = await Brain.open(settings_for(dsn, import_rebuild_index_at=1), dsn=dsn, embedder=embedder)
        try:
            done = await restore(other.engine, lines, batch=batch, bulk=True)
            assert done.skipped == {"memory": 1}, batch
            async with other.engine.pool.acquire() as conn:
                content = await conn.fetchval("SELECT content FROM memories WHERE id = $1", memory_id)
                words = {
                    r[0] for r in await conn.fetch("SELECT term FROM memory_terms WHERE memory_id = $1", memory_id)
                }
        finally:
            await other.close()
        assert content == first["content"]
        assert set(tokenize(first["content"])) <= words and not set(tokenize(twin["content"])) & words, batch
