"""*demote*: old and invalidated rows move to the Iceberg cold tier, and leave the hot tier.

A memory is demoted when it was invalidated (forgotten or superseded) more than
``sleep_demote_invalid_after_days`` ago, or when it is an episode older than
``sleep_demote_after_days``, unused for as long, and either distilled into facts already or less
important than ``sleep_demote_keep_importance``. Facts, semantic memories, entity summaries and
pinned memories (memory-tool files, memories flagged ``important``) stay hot while current. Ages are
counted as of the step's clock (:mod:`cabrain.clock`).

Per namespace and month partition, in batches (the ledger is ``cold_batches``):

1. *plan*: the batch's ids are fixed and recorded (``planned``), in their own transaction;
2. in one transaction: lock the batch's hot rows; append them to Iceberg as one snapshot tagged
   with the batch id (skipped when a snapshot already carries it: a re-run after a crash); read
   the batch back from Iceberg and check every id is there and matches; then remove the rows'
   postings and passages, mark their ``memory_ids`` cold, delete the hot rows and mark the batch
   ``done``.

A crash before the Iceberg commit leaves the batch planned and the hot rows untouched; after it,
the PostgreSQL transaction rolls back and the re-run finds the snapshot, verifies and finishes.
Rows that changed between a crashed run and its re-run (a forget, say) are appended again with
their current state; archive reads keep the newest copy of each id. So every memory is, at every
moment, in exactly one tier as far as readers can tell, and never lost.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg

from cabrain import failpoints
from cabrain.errors import ColdStoreError
from cabrain.sleep.context import StepContext, StepResult
from cabrain.store import demote as demote_sql
from cabrain.store import judgments
from cabrain.store import namespaces as namespace_sql
from cabrain.store.cold import equal, month_of, to_arrow

ARCHIVE_TEXT_CHARS = 160  # of each archived memory's text, in the run's journal

# What must agree between the hot row and its cold copy (access counts and decayed importance may
# drift between a crashed run and its re-run; they are not what an archive answers for).
COMPARED = ("content", "invalid_at", "superseded_by", "visibility", "owner_agent_id", "network", "memory_type")


def _differs(hot: asyncpg.Record, cold: dict) -> bool:
    return any((str(hot[c]) if isinstance(hot[c], uuid.UUID) else hot[c]) != cold.get(c) for c in COMPARED)


async def demote(ctx: StepContext, namespace: str, month: str) -> StepResult:
    """Demote the namespace's eligible rows of one month partition (see the module docstring)."""
    result = ctx.result()
    settings = ctx.settings
    pool = await ctx.pool()
    async with pool.acquire() as conn:
        bounds = await conn.fetchrow(demote_sql.MONTH_BOUNDS, month)
        lo, hi = bounds["lo"], bounds["hi"]
        open_batches = await conn.fetch(demote_sql.OPEN_BATCHES, namespace, month)
    for batch in open_batches:  # a crashed run's batches are finished first
        await _finish(ctx, result, namespace, lo, hi, batch["id"], list(batch["memory_ids"]), resumed=True)
    while True:
        async with pool.acquire() as conn:
            pending = [i for b in await conn.fetch(demote_sql.OPEN_BATCHES, namespace, month) for i in b["memory_ids"]]
            ids = [
                r["id"]
                for r in await conn.fetch(
                    demote_sql.CANDIDATES,
                    namespace,
                    lo,
                    hi,
                    pending,
                    settings.sleep_demote_invalid_after_days * 86400,
                    settings.sleep_demote_after_days * 86400,
                    settings.sleep_demote_keep_importance,
                    settings.sleep_demote_batch,
                    ctx.clock(),
                )
            ]
            if not ids:
                break
            batch_id = uuid.uuid4()
            await conn.execute(demote_sql.PLAN_BATCH, batch_id, namespace, month, ctx.run_id, ids)
        failpoints.hit("demote.after_plan")
        await _finish(ctx, result, namespace, lo, hi, batch_id, ids, resumed=False)
    return result


async def _finish(
    ctx: StepContext,
    result: StepResult,
    namespace: str,
    lo: datetime,
    hi: datetime,
    batch: uuid.UUID,
    ids: list[uuid.UUID],
    *,
    resumed: bool,
) -> None:
    cold = ctx.cold()
    pool = await ctx.pool()
    async with pool.acquire() as conn, conn.transaction():
        # The namespace's writer lock first, as every writer takes it: a retain holds it while it
        # updates the namespace's counters, then its keyword statistics, then may supersede a row;
        # taken here after the rows and statistics, the two orders could deadlock.
        await namespace_sql.lock(conn, namespace)
        rows = await conn.fetch(demote_sql.LOCK_ROWS, namespace, lo, hi, ids)
        if not rows:  # nothing hot is left of it: it finished, short of the ledger's last word
            await conn.execute(demote_sql.FINISH_BATCH, batch, cold.committed_snapshot(batch))
            return
        demoted_at = datetime.now(UTC)  # a record (archive reads keep the newest copy), not a decision: wall clock
        snapshot = cold.committed_snapshot(batch)
        if snapshot is None:
            snapshot = cold.append_batch(batch, to_arrow(rows, batch, demoted_at))
        else:  # a re-run: the snapshot landed before the crash; rows changed since are appended again
            copies = cold.newest(namespace, [str(r["id"]) for r in rows], equal("valid_month", month_of(lo)))
            changed = [r for r in rows if str(r["id"]) not in copies or _differs(r, copies[str(r["id"])])]
            if changed:
                fix = uuid.uuid5(
                    batch, ",".join(sorted(f"{r['id']}:{r['invalid_at']}:{r['superseded_by']}" for r in changed))
                )
                cold.append_batch(fix, to_arrow(changed, batch, demoted_at))
                result.add("rewritten_after_crash", len(changed))
        failpoints.hit("demote.after_cold_commit")
        held = cold.batch_ids(namespace, batch)
        missing = {str(r["id"]) for r in rows} - held
        if missing:
            raise ColdStoreError(
                f"demotion batch {batch}: {len(missing)} of {len(rows)} rows are not in the cold tier after the commit; "
                "the hot rows are kept",
                hint="check the Iceberg warehouse, then run the sleep cycle again",
            )
        kept = [r["id"] for r in rows]
        docs = await conn.fetch(demote_sql.DOCS_OF, namespace, kept)
        terms = await conn.fetch(demote_sql.DELETE_POSTINGS, namespace, kept)
        if terms:
            await conn.execute(demote_sql.LOWER_DF, namespace, [t["term"] for t in terms], [t["n"] for t in terms])
        await conn.execute(demote_sql.LOWER_STATS, namespace, len(docs), sum(d["doc_len"] for d in docs))
        chunks = int((await conn.execute(demote_sql.DELETE_CHUNKS, namespace, kept)).split()[-1])
        await conn.execute(demote_sql.MARK_COLD, kept, batch, demoted_at)
        failpoints.hit("demote.before_hot_delete")
        deleted = int((await conn.execute(demote_sql.DELETE_ROWS, namespace, lo, hi, kept)).split()[-1])
        await conn.execute(demote_sql.LOWER_COUNTS, namespace, deleted, chunks)
        await conn.execute(demote_sql.FINISH_BATCH, batch, snapshot)
        await judgments.record(  # the run's journal: what it archived, so a revert brings it back
            conn,
            judgments.Judgment(
                namespace,
                "archive",
                "demote",
                f"archived {len(rows)} memor{'ies' if len(rows) != 1 else 'y'} to the cold tier",
                run_id=ctx.run_id,
                inputs={
                    "batch": str(batch),
                    "memories": {
                        str(r["id"]): {
                            "text": r["content"][:ARCHIVE_TEXT_CHARS],
                            "why": "invalidated" if r["invalid_at"] else "old episode",
                        }
                        for r in rows
                    },
                },
                related={r["id"] for r in rows},
            ),
        )
    failpoints.hit("demote.after_hot_delete")
    result.add("demoted", deleted)
    result.add("batches")
    if resumed:
        result.add("batches_resumed")
    for r in rows:
        result.change(
            memory_id=r["id"], action="demoted", batch=batch, why="invalidated" if r["invalid_at"] else "old episode"
        )


__all__ = ["demote"]
