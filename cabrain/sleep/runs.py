"""What sleep did, as people may see it, and starting a cycle from the service.

A run touches many namespaces; an agent sees a run only through the namespaces it may read as a
whole (its own, those it holds a read grant on; an admin every one): their steps, their counts
and the judgments of the run whose every memory it may read, each revertible as any judgment is
(:meth:`cabrain.brain.Brain.revert`). Another namespace's counts are never summed into what it sees.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from cabrain.engine import Engine
from cabrain.errors import ConfigError, ConflictError, InputError, NotFound
from cabrain.gate import Read, operation
from cabrain.policy import Op
from cabrain.settings import load_settings, settings_for_replicas
from cabrain.store import access
from cabrain.store import judgments as judgment_sql
from cabrain.store import namespaces as namespace_sql
from cabrain.store import sleep as sleep_sql
from cabrain.write.changes import may_see_judgment

log = logging.getLogger(__name__)

RUN_TEXTS = 2000  # memories whose text a run's page shows at most

_running: set[Any] = set()  # the cycles this process started (their Ray references)


class SleepRuns:
    """The sleep runs an agent may see, and starting one (admins)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def _scope(self, conn: asyncpg.Connection, agent: str) -> tuple[bool, list[str]]:
        readable = [
            r["name"] for r in await namespace_sql.of_agent(conn, agent) if r["can_read"]
        ]  # checks it is active
        return await access.is_admin(conn, agent), readable

    @operation(Op.READ, reads=Read.NAMESPACE, http="GET /v1/sleep/runs")
    async def runs(self, agent: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The newest runs that touched a namespace ``agent`` may read, with their counts there."""
        if not 1 <= limit <= 500:
            raise InputError(f"limit must be between 1 and 500, got {limit}")
        async with self.engine.pool.acquire() as conn:
            admin, visible = await self._scope(conn, agent)
            rows = await conn.fetch(sleep_sql.RUNS, admin, visible, limit)
            steps = await conn.fetch(sleep_sql.RUN_STEPS, [r["id"] for r in rows], admin, visible)
        out = []
        for row in rows:
            mine = [s for s in steps if s["run_id"] == row["id"]]
            out.append(_run(row, admin, visible) | {"counts": _totals(mine), "failed_steps": _failed(mine)})
        return out

    @operation(Op.READ, reads=Read.MEMORIES, http="GET /v1/sleep/runs/{run_id}")
    async def run(self, agent: str, run_id: uuid.UUID, *, judgment_limit: int = 500) -> dict[str, Any]:
        """One run: its steps in the namespaces ``agent`` may read and the judgments it may see."""
        async with self.engine.pool.acquire() as conn:
            admin, visible = await self._scope(conn, agent)
            row = await conn.fetchrow(sleep_sql.RUN, run_id)
            if row is None or not (admin or set(row["namespaces"]) & set(visible)):
                raise NotFound(f"sleep run {run_id} does not exist or is not visible to {agent!r}")
            steps = await conn.fetch(sleep_sql.RUN_STEPS, [run_id], admin, visible)
            judged = [
                judgment_sql.describe(j)
                for j in await conn.fetch(sleep_sql.RUN_JUDGMENTS, run_id, judgment_limit)
                if await may_see_judgment(conn, agent, j)
            ]
            reverts = [
                judgment_sql.describe(j)
                for j in await conn.fetch(sleep_sql.RUN_REVERTS, str(run_id))
                if await may_see_judgment(conn, agent, j)
            ]
            # the texts of the hot memories those judgments name (every one readable by the caller)
            named = sorted({uuid.UUID(m) for j in judged for m in j["memory_ids"]})[:RUN_TEXTS]
            texts = {
                str(r["id"]): {
                    "content": r["content"],
                    "network": r["network"],
                    "source_ref": r["source_ref"],
                    "current": r["current"],
                }
                for r in await conn.fetch(sleep_sql.RUN_MEMORY_TEXTS, named)
            }
        report = json.loads(row["report"]) if isinstance(row["report"], str) else dict(row["report"] or {})
        return _run(row, admin, visible) | {
            "counts": _totals(steps),
            "steps": [_step(s) for s in steps],
            "judgments": judged,
            "memories": texts,
            "reverts": reverts,  # the run's reverts (one per namespace), each revertible in turn
            "skipped": report.get("skipped", {}) if admin else {},
            "room": report.get("room", "") if admin else "",
            "withdrawn": report.get("withdrawn", []) if admin else [],
        }

    @operation(Op.ADMIN, admin=True, http="POST /v1/sleep/runs/{run_id}/cancel")
    async def cancel(self, agent: str, run_id: uuid.UUID) -> dict[str, Any]:
        """Ask a running cycle to stop (an admin's): it starts no further step, withdraws those still
        waiting for room, lets the running ones finish and ends 'cancelled'. A run whose driver is
        gone (it holds no namespace lock) ends at once. An ended run: 409."""
        from cabrain.sleep.cycle import LOCK_CLASS

        async with self.engine.pool.acquire() as conn:
            row = await conn.fetchrow(sleep_sql.RUN, run_id)
            if row is None:
                raise NotFound(f"sleep run {run_id} does not exist")
            asked = await conn.fetchval(sleep_sql.CANCEL, run_id)
            if asked is None:
                raise ConflictError(f"sleep run {run_id} has ended ({row['status']}); there is nothing to cancel")
            status = "running"
            if row["namespaces"] and not await conn.fetchval(
                sleep_sql.DRIVER_ALIVE, LOCK_CLASS, list(row["namespaces"])
            ):
                status = (
                    await conn.fetchval(sleep_sql.ORPHANED, run_id, "its driver was gone: ended by a cancel") or status
                )
        log.info("sleep cycle cancel asked", extra={"agent": agent, "run_id": str(run_id), "status": status})
        return {"id": str(run_id), "status": status, "cancel_requested_at": asked}

    @operation(Op.ADMIN, admin=True, http="POST /v1/sleep/runs")
    async def start(
        self, agent: str, namespaces: Sequence[str] | None = None, steps: Sequence[str] | None = None
    ) -> uuid.UUID:
        """Start a sleep cycle on the cluster this service runs on (an admin's), and return its run id
        at once: the run's page follows it. Its steps fan out over the nodes as ``cabrain sleep``'s do."""
        from cabrain.sleep.cycle import STEPS, check_steps

        chosen = list(steps or STEPS)
        check_steps(chosen)
        async with self.engine.pool.acquire() as conn:
            known = {r["name"] for r in await conn.fetch(sleep_sql.KNOWN_NAMESPACES, list(namespaces or []))}
        missing = [n for n in namespaces or [] if n not in known]
        if missing:
            raise NotFound(f"unknown namespace(s): {', '.join(missing)}")
        settings = self.engine.settings
        if settings.database_url is None:
            raise ConfigError("starting a sleep cycle from the service needs CABRAIN_DATABASE_URL")
        import ray  # heavy: only here

        if not ray.is_initialized():
            raise ConfigError("starting a sleep cycle needs the service's Ray", hint="run `cabrain sleep` instead")
        run_id = uuid.uuid4()
        dsn = settings.database_url.get_secret_value()
        ref = _driver().remote(settings_for_replicas(settings), dsn, list(namespaces or []), chosen, str(run_id))
        _running.add(ref)
        asyncio.get_running_loop().create_task(_forget_when_done(ref))
        log.info("sleep cycle started", extra={"agent": agent, "run_id": str(run_id)})
        await self._recorded(run_id, ref)
        return run_id

    async def _recorded(self, run_id: uuid.UUID, ref: Any, timeout_s: float = 30.0) -> None:
        """Wait until the run is in ``sleep_runs`` (its page can show it), or say why it is not."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            async with self.engine.pool.acquire() as conn:
                if await conn.fetchval(sleep_sql.RUN_EXISTS, run_id):
                    return
            if ref not in _running:  # ended before it was recorded: a bad namespace, a lost database
                try:
                    await ref
                except Exception as exc:  # noqa: BLE001 - any failure of the task is why it did not start
                    cause = getattr(exc, "cause", None) or exc  # a Ray task error carries the task's own
                    raise ConfigError(f"the sleep cycle did not start: {cause}") from None
            await asyncio.sleep(0.2)
        raise ConfigError(f"sleep run {run_id} was started but has not begun in {timeout_s:g} s; see the Ray logs")


async def _forget_when_done(ref: Any) -> None:
    try:
        await ref
    except Exception as exc:  # noqa: BLE001 - the run's row says how it ended; this is the log
        log.warning("sleep cycle failed", extra={"error": str(exc)})
    finally:
        _running.discard(ref)


def _driver() -> Any:  # a Ray remote function
    import ray

    @ray.remote(num_cpus=0, max_retries=0)
    def sleep_cycle(
        settings: dict[str, Any], dsn: str, namespaces: list[str], steps: list[str], run_id: str
    ) -> dict[str, Any]:
        from cabrain.sleep.cycle import run_cycle

        report = asyncio.run(
            run_cycle(
                load_settings(**settings), dsn, namespaces=namespaces or None, steps=steps, run_id=uuid.UUID(run_id)
            )
        )
        return report.to_json()

    return sleep_cycle


def _run(row: asyncpg.Record, admin: bool, visible: list[str]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "status": row["status"],
        "host": row["host"] if admin else None,
        "steps_planned": list(row["steps"]),
        "namespaces": [n for n in row["namespaces"] if admin or n in visible],
        "note": _note(row, admin, visible),  # why it waits, while it does (cabrain.sleep.room)
        "cancel_requested_at": row["cancel_requested_at"],
    }


def _note(row: asyncpg.Record, admin: bool, visible: list[str]) -> str | None:
    """Why the run waits: it names a step's namespace, so whole only to who may read every one."""
    if row["note"] is None or admin or set(row["namespaces"]) <= set(visible):
        return row["note"]
    return "waiting for room on the cluster"


def _counts(row: asyncpg.Record) -> dict[str, int]:
    counts = row["counts"]
    return json.loads(counts) if isinstance(counts, str) else dict(counts or {})


def _totals(steps: Sequence[asyncpg.Record]) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for s in steps:
        bucket = totals.setdefault(s["step"], {})
        for key, n in _counts(s).items():
            if isinstance(n, int | float):
                bucket[key] = bucket.get(key, 0) + int(n)
    return totals


def _failed(steps: Sequence[asyncpg.Record]) -> int:
    return sum(1 for s in steps if s["status"] == "failed")


def _step(row: asyncpg.Record) -> dict[str, Any]:
    seconds = (row["finished_at"] - row["started_at"]).total_seconds() if row["finished_at"] else None
    return {
        "step": row["step"],
        "namespace": row["namespace"],
        "month": row["month"],
        "status": row["status"],
        "counts": _counts(row),
        "node_id": row["node_id"],
        "seconds": seconds,
        "error": row["error"],
    }
