"""Archive recall over a cold table made by an older CaBrain (before keyword tokens were stored):
the table gains the columns, old rows are still found by keywords, and stored tokens count terms
exactly as tokenizing the text does."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
import pyarrow as pa

from cabrain.search.archive import SCORE_COLUMNS
from cabrain.search.archive_rank import Pass
from cabrain.sleep.cycle import run_cycle
from cabrain.store import cold as coldmod
from cabrain.store.demote import DELETE_ROWS, LOCK_ROWS, MARK_COLD, MONTH_BOUNDS
from cabrain.text.tokenizer import query_terms
from cabrain.types import ArchiveQuery, MemoryInput, RecallMode, Visibility


async def test_a_table_without_stored_tokens_is_evolved_and_still_searched(brain, db_dsn) -> None:
    when = datetime.now(UTC) - timedelta(days=90)
    [old] = await brain.retain(
        "alice",
        [
            MemoryInput(
                "The invoice archive moved to the Frankfurt bucket.", "proj", visibility=Visibility.TEAM, valid_at=when
            )
        ],
        decide=False,
    )
    month = coldmod.month_of(when)
    # what an older CaBrain's demotion left behind: a table and rows without the token columns
    settings = brain.settings
    catalog = coldmod.open_catalog(settings)
    catalog.create_namespace_if_not_exists(coldmod.NAMESPACE)
    full = coldmod._iceberg_schema()
    legacy = type(full)(*[f for f in full.fields if f.name not in coldmod.EVOLVED])
    table = catalog.create_table(coldmod.TABLE, schema=legacy, partition_spec=coldmod._partition_spec(legacy))
    batch = uuid.uuid4()
    async with brain.engine.pool.acquire() as conn:  # the pool's connections decode vectors
        bounds = await conn.fetchrow(MONTH_BOUNDS, month)
        rows = await conn.fetch(LOCK_ROWS, "proj", bounds["lo"], bounds["hi"], [old.memory_id])
        arrow = coldmod.to_arrow(rows, batch, datetime.now(UTC)).drop_columns(list(coldmod.EVOLVED))
        table.append(arrow)
        async with conn.transaction():
            await conn.execute("DELETE FROM memory_terms WHERE memory_id = $1", old.memory_id)
            await conn.execute(MARK_COLD, [old.memory_id], batch, datetime.now(UTC))
            await conn.execute(DELETE_ROWS, "proj", bounds["lo"], bounds["hi"], [old.memory_id])
    # a new memory demoted by this CaBrain: the table gains the columns, the new row has its tokens
    [new] = await brain.retain(
        "alice",
        [
            MemoryInput(
                "The payroll export now runs from the Frankfurt bucket too.",
                "proj",
                visibility=Visibility.TEAM,
                valid_at=when,
            )
        ],
        decide=False,
    )
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("UPDATE memories SET created_at = now() - interval '90 days'")
    finally:
        await conn.close()
    demoting = settings.model_copy(update={"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0})
    report = await run_cycle(demoting, db_dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 1
    cold = coldmod.ColdTier(settings)
    assert {"terms", "term_count"} <= {f.name for f in cold.table().schema().fields}
    stored = {r["id"]: r for r in cold.scan("proj").to_pylist()}
    assert stored[str(old.memory_id)]["terms"] is None and stored[str(new.memory_id)]["terms"].startswith(" payroll ")
    found = await brain.recall_archive("alice", ArchiveQuery("Frankfurt bucket", "proj", k=5, mode=RecallMode.BM25))
    assert {h.memory.id for h in found.hits} == {old.memory_id, new.memory_id}
    invoice = await brain.recall_archive("alice", ArchiveQuery("invoice archive", "proj", k=1, mode=RecallMode.BM25))
    assert invoice.hits[0].memory.id == old.memory_id  # found by tokenizing its text
    # stored tokens and tokenizing the text count terms the same way
    table_rows = cold.scan("proj", columns=list(SCORE_COLUMNS))
    terms = Counter(query_terms(["the Frankfurt bucket export payroll runs"]))
    from_tokens, from_text = Pass(terms, None), Pass(terms, None)
    query = ArchiveQuery("x", "proj")
    assert table_rows.num_rows == 2
    from_tokens.add(table_rows.combine_chunks().to_batches()[0], query)
    blank = table_rows.set_column(
        table_rows.schema.get_field_index("terms"), "terms", pa.nulls(table_rows.num_rows, pa.string())
    )
    from_text.add(blank.combine_chunks().to_batches()[0], query)
    counted = [np.concatenate(p.counts).tolist() for p in (from_tokens, from_text)]
    assert counted[0] == counted[1] and all(any(row) for row in counted[0])  # both rows hold query terms
    assert np.concatenate(from_tokens.lengths).tolist() == np.concatenate(from_text.lengths).tolist()
