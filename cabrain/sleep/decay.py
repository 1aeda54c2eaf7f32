"""*decay*: importance fades with time, salient memories slowest (SPEC §4.3).

    importance <- max(floor, importance * 2 ** (-days / half_life)),
    half_life   = sleep_decay_half_life_days * (1 + sleep_decay_salience_boost * importance)

(a pinned memory - a memory-tool file, or one flagged ``important`` - decays no lower than
``sleep_decay_pinned_floor``), where ``days`` is the time since the row last decayed (or, the first time, since it was last
used or stored), as of the step's clock. ``decayed_at`` records that moment, so a re-run right after a crash decays by
(almost) nothing: the step is idempotent. A row is only rewritten once it would lose at least
``sleep_decay_min_change`` (or reach the floor): until then its time keeps adding up, so a nightly
run rewrites the rows whose importance moved, not every row, every night. Only current hot rows decay; a row used since its last
decay counts its time from that use (reinforcement).
"""

from __future__ import annotations

from cabrain.sleep.context import StepContext, StepResult
from cabrain.store import demote as demote_sql
from cabrain.store import judgments
from cabrain.store import sleep as sleep_sql


async def decay(ctx: StepContext, namespace: str, month: str) -> StepResult:
    result = ctx.result()
    s = ctx.settings
    pool = await ctx.pool()
    async with pool.acquire() as conn, conn.transaction():
        bounds = await conn.fetchrow(demote_sql.MONTH_BOUNDS, month)
        rows = await conn.fetch(
            sleep_sql.DECAY,
            namespace,
            bounds["lo"],
            bounds["hi"],
            s.sleep_decay_half_life_days,
            s.sleep_decay_salience_boost,
            s.sleep_decay_floor,
            s.sleep_decay_min_change,
            s.sleep_decay_pinned_floor,
            ctx.clock(),
        )
        if rows:  # the run's journal: each memory's importance before and after, so a revert restores it
            await judgments.record(
                conn,
                judgments.Judgment(
                    namespace,
                    "decay",
                    "decay",
                    f"decayed {len(rows)} memor{'ies' if len(rows) != 1 else 'y'} ({month})",
                    run_id=ctx.run_id,
                    inputs={"month": month},
                    changes=[
                        judgments.Change(
                            r["id"],
                            r["valid_at"],
                            {"importance": float(r["before"])},
                            {"importance": float(r["after"])},
                        )
                        for r in rows
                    ],
                ),
            )
    result.add("decayed", len(rows))
    result.add("importance_lost_x1000", int(sum(r["before"] - r["after"] for r in rows) * 1000))
    for r in sorted(rows, key=lambda r: r["after"] - r["before"])[:20]:
        result.change(memory_id=r["id"], action="decayed", before=round(r["before"], 4), after=round(r["after"], 4))
    return result


__all__ = ["decay"]
