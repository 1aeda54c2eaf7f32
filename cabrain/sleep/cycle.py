"""The sleep cycle: plan per namespace and month partition, run the steps as Ray tasks spread over
the cluster, keep a report.

Per namespace the steps run in order (consolidate, dedup, reconsolidate, decay, demote, purge:
each sees what the one before changed); namespaces run side by side, and decay and demote fan out
further, one task per month partition. ``maintain`` runs once at the end. Every step records a
``sleep_steps`` row (status, counts, what changed, the node it ran on), the run a ``sleep_runs``
row with the summary.

Two cycles never work on one namespace at once: the driver holds a PostgreSQL advisory lock per
namespace for the length of the run (released by the server if the driver dies) and skips, and
reports, namespaces another cycle holds.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from cabrain.clock import Clock, utc_now
from cabrain.errors import ConfigError
from cabrain.settings import Settings, load_settings, settings_for_replicas
from cabrain.sleep.context import StepContext, jsonb
from cabrain.sleep.room import Room, nodes_cpus, step_room, waiting_note
from cabrain.store import sleep as sleep_sql
from cabrain.store.migrations import SLEEP_ROLE

log = logging.getLogger(__name__)

STEPS = ("consolidate", "dedup", "reconsolidate", "decay", "demote", "purge", "maintain")
PER_MONTH = frozenset({"decay", "demote"})
LOCK_CLASS = 0x5C1EE9  # advisory lock key space of the sleep cycle


class StepWithdrawn(Exception):
    """A step that had not started when its run was cancelled."""


@dataclass
class CycleReport:
    run_id: uuid.UUID
    status: str
    seconds: float
    namespaces: list[str]
    skipped: dict[str, str]
    steps: dict[str, dict[str, int]]  # step -> summed counts
    tasks: list[dict[str, Any]] = field(default_factory=list)  # one per step task
    sleep_role: str = ""
    room: str = ""  # what each step asked Ray for, and why (cabrain.sleep.room)
    withdrawn: list[dict[str, str]] = field(default_factory=list)  # steps a cancel kept from running

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": str(self.run_id),
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "namespaces": self.namespaces,
            "skipped": self.skipped,
            "steps": self.steps,
            "tasks": self.tasks,
            "sleep_role": self.sleep_role,
            "room": self.room,
            "withdrawn": self.withdrawn,
        }


def _node_id() -> str | None:
    try:
        import ray  # heavy: loaded only where a step runs

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - informational
        return None


async def execute_step(
    settings: Settings, dsn: str, run_id: uuid.UUID, step: str, namespace: str, month: str, *, clock: Clock = utc_now
) -> dict[str, Any]:
    """Run one step on one namespace (and month) and record it; what the driver gets back."""
    from cabrain.sleep import steps as registry  # the steps' modules load where steps run, not in a Ray driver

    fn = registry.STEP_FUNCTIONS[step]
    ctx = StepContext(settings, dsn, run_id, clock=clock)
    node = _node_id()
    started = time.perf_counter()
    try:
        pool = await ctx.pool()
        async with pool.acquire() as conn:
            await conn.execute(sleep_sql.START_STEP, run_id, step, namespace, month, node)
        try:
            result = await fn(ctx, namespace, month)
        except Exception as exc:
            async with pool.acquire() as conn:
                await conn.execute(
                    sleep_sql.END_STEP, run_id, step, namespace, month, "failed", "{}", "[]", str(exc)[:2000]
                )
            raise
        async with pool.acquire() as conn:
            await conn.execute(
                sleep_sql.END_STEP,
                run_id,
                step,
                namespace,
                month,
                "done",
                jsonb(result.counts),
                jsonb(result.changes),
                None,
            )
    finally:
        await ctx.close()
    return {
        "step": step,
        "namespace": namespace,
        "month": month,
        "node_id": node,
        "seconds": round(time.perf_counter() - started, 3),
        "counts": result.counts,
    }


def _remote_step() -> Any:  # a Ray remote function
    import ray  # heavy: loaded only for a run on Ray

    @ray.remote(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")
    def sleep_step(
        settings: dict[str, Any], dsn: str, run_id: str, step: str, namespace: str, month: str, clock: Clock = utc_now
    ) -> dict:
        return asyncio.run(
            execute_step(load_settings(**settings), dsn, uuid.UUID(run_id), step, namespace, month, clock=clock)
        )

    return sleep_step


def check_steps(steps: Sequence[str]) -> None:
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        raise ConfigError(f"unknown sleep step(s): {', '.join(unknown)}", hint=f"steps: {', '.join(STEPS)}")


async def sleep_dsn(settings: Settings, dsn: str) -> tuple[str, str]:
    """The URL sleep tasks connect with, and a line saying which role that is."""
    if settings.sleep_database_url is not None:
        return settings.sleep_database_url.get_secret_value(), "CABRAIN_SLEEP_DATABASE_URL"
    conn = await asyncpg.connect(dsn)
    try:
        exists = await conn.fetchval(sleep_sql.ROLE_EXISTS, SLEEP_ROLE)
        me = await conn.fetchval(sleep_sql.CURRENT_USER)
    finally:
        await conn.close()
    if not exists:
        return dsn, f"{me} (role {SLEEP_ROLE} does not exist)"
    candidate = _with_user(dsn, SLEEP_ROLE)
    try:
        probe = await asyncpg.connect(candidate, timeout=10)
        await probe.close()
    except (asyncpg.PostgresError, OSError) as exc:
        return (
            dsn,
            f"{me} ({SLEEP_ROLE} cannot log in with the hot tier's URL: {type(exc).__name__}; set CABRAIN_SLEEP_DATABASE_URL)",
        )
    return candidate, SLEEP_ROLE


def _with_user(dsn: str, user: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


async def run_cycle(
    settings: Settings,
    dsn: str,
    *,
    namespaces: Sequence[str] | None = None,
    steps: Sequence[str] = STEPS,
    use_ray: bool = True,
    progress: Callable[[str], None] | None = None,
    clock: Clock = utc_now,
    run_id: uuid.UUID | None = None,
) -> CycleReport:
    """One sleep cycle over ``namespaces`` (default: all) on the hot tier at ``dsn``, as of ``clock``
    (every age a step decides on: decay, the consolidation window, demotion, purge, partitions ahead).
    ``run_id`` names the run (one the caller made, to follow it before it ends); else a new one."""
    check_steps(steps)
    say = progress or (lambda line: None)
    run_id = run_id or uuid.uuid4()
    started = time.perf_counter()
    worker_dsn, role = await sleep_dsn(settings, dsn)
    lock_conn = await asyncpg.connect(dsn)
    try:
        wanted = list(namespaces) if namespaces else [r["name"] for r in await lock_conn.fetch(sleep_sql.NAMESPACES)]
        known = {r["name"] for r in await lock_conn.fetch(sleep_sql.NAMESPACES)}
        missing = [n for n in wanted if n not in known]
        if missing:
            raise ConfigError(f"unknown namespace(s): {', '.join(missing)}")
        mine, skipped = [], {}
        for name in wanted:
            if await lock_conn.fetchval(sleep_sql.TRY_LOCK, LOCK_CLASS, name):
                mine.append(name)
            else:
                skipped[name] = "another sleep cycle is working on it"
                say(f"  {name}: skipped, another sleep cycle holds it")
        await lock_conn.execute(sleep_sql.START_RUN, run_id, socket.gethostname(), list(steps), mine)
        say(f"sleep run {run_id}: {len(mine)} namespace(s), steps {', '.join(steps)} (as {role})")
        months = {name: [r["month"] for r in await lock_conn.fetch(sleep_sql.MONTHS, name)] for name in mine}
        runner = _Runner(settings, worker_dsn, run_id, use_ray, say, clock, _Control(lock_conn, run_id))
        if use_ray:
            say(f"  steps: {runner.room.why}")
        per_namespace = [s for s in steps if s != "maintain"]
        outcomes = await asyncio.gather(*(runner.namespace(n, per_namespace, months[n]) for n in mine))
        failed = [n for n, ok in zip(mine, outcomes, strict=True) if not ok]
        if "maintain" in steps:
            await runner.task("maintain", "", "")
        status = (
            "cancelled"
            if runner.control.cancelled
            else "done"
            if not failed and not runner.failures
            else ("failed" if len(failed) == len(mine) and mine else "partial")
        )
        totals: dict[str, dict[str, int]] = {}
        for task in runner.tasks:
            bucket = totals.setdefault(task["step"], {})
            for key, n in task.get("counts", {}).items():
                bucket[key] = bucket.get(key, 0) + n
        report = CycleReport(
            run_id,
            status,
            time.perf_counter() - started,
            mine,
            skipped,
            totals,
            runner.tasks,
            role,
            runner.room.why if use_ray else "",
            runner.withdrawn,
        )
        await runner.control.note(None)
        await lock_conn.execute(sleep_sql.END_RUN, run_id, status, jsonb(report.to_json()))
        say(f"sleep run {run_id}: {status} in {report.seconds:.1f} s")
        return report
    except BaseException:
        await lock_conn.execute(sleep_sql.FAIL_RUN, run_id)
        raise
    finally:
        await lock_conn.close()  # releases the namespace locks


class _Control:
    """The run's own row, read and written beside its steps: a cancel asked for, why it waits."""

    def __init__(self, conn: asyncpg.Connection, run_id: uuid.UUID) -> None:
        self.conn, self.run_id = conn, run_id
        self.cancelled = False
        self._lock = asyncio.Lock()  # one connection, many steps

    async def cancel_requested(self) -> bool:
        if not self.cancelled:
            async with self._lock:
                self.cancelled = bool(await self.conn.fetchval(sleep_sql.CANCEL_REQUESTED, self.run_id))
        return self.cancelled

    async def started(self, step: str, namespace: str, month: str) -> bool:
        async with self._lock:
            return bool(await self.conn.fetchval(sleep_sql.STEP_STARTED, self.run_id, step, namespace, month))

    async def note(self, text: str | None) -> None:
        async with self._lock:
            await self.conn.execute(sleep_sql.SET_NOTE, self.run_id, text)


class _Runner:
    def __init__(
        self,
        settings: Settings,
        dsn: str,
        run_id: uuid.UUID,
        use_ray: bool,
        say: Callable[[str], None],
        clock: Clock,
        control: _Control,
    ) -> None:
        self.settings, self.dsn, self.run_id, self.say, self.clock = settings, dsn, run_id, say, clock
        self.control = control
        self.tasks: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        self.withdrawn: list[dict[str, str]] = []
        self._remote = None
        self.room = Room(1.0, None, "")
        if use_ray:
            self._remote = _remote_step()
            self._settings_dict = settings_for_replicas(settings)
            self.room = step_room(settings.sleep_step_cpus, nodes_cpus())
        self._slots = asyncio.Semaphore(self.room.at_once) if self.room.at_once else None

    async def task(self, step: str, namespace: str, month: str) -> bool:
        if self._slots is None:
            return await self._task(step, namespace, month)
        async with self._slots:
            return await self._task(step, namespace, month)

    async def _task(self, step: str, namespace: str, month: str) -> bool:
        where = {"step": step, "namespace": namespace, "month": month}
        try:
            if await self.control.cancel_requested():
                raise StepWithdrawn
            if self._remote is not None:
                ref = self._remote.options(**self.room.options()).remote(
                    self._settings_dict, self.dsn, str(self.run_id), step, namespace, month, self.clock
                )
                done = await self._wait(ref, step, namespace, month)
            else:
                done = await execute_step(
                    self.settings, self.dsn, self.run_id, step, namespace, month, clock=self.clock
                )
        except StepWithdrawn:
            self.withdrawn.append(where)
            self.say(f"  {namespace or '*'} {step}{' ' + month if month else ''}: withdrawn (the run was cancelled)")
            return False
        except Exception as exc:  # noqa: BLE001 - recorded; the namespace's later steps are skipped
            cause = getattr(exc, "cause", None) or exc
            self.failures.append({**where, "error": str(cause)})
            self.tasks.append({**where, "error": str(cause)[:500]})
            self.say(f"  {namespace or '*'} {step}{' ' + month if month else ''}: FAILED: {cause}")
            log.error("sleep step failed", extra={**where, "error": str(cause)})
            return False
        self.tasks.append(done)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(done["counts"].items()) if v) or "nothing to do"
        self.say(f"  {namespace or '*'} {step}{' ' + month if month else ''}: {counts} ({done['seconds']:.2f} s)")
        return True

    async def _wait(self, ref: Any, step: str, namespace: str, month: str) -> dict[str, Any]:
        """The step's answer. While it has not started, the run says why it waits; if the run is
        cancelled meanwhile, the step is withdrawn (a step already running finishes: it is one unit)."""
        import ray  # heavy: only on Ray

        answer = asyncio.wrap_future(ref.future())
        waiting = False
        while True:
            finished, _ = await asyncio.wait({answer}, timeout=self.settings.sleep_wait_note_s)
            if finished:
                if waiting:
                    await self.control.note(None)
                return answer.result()
            if await self.control.started(step, namespace, month):
                if waiting:
                    waiting = False
                    await self.control.note(None)
                continue
            if await self.control.cancel_requested():
                answer.add_done_callback(lambda f: f.cancelled() or f.exception())  # its TaskCancelledError
                ray.cancel(ref)
                raise StepWithdrawn
            waiting = True
            await self.control.note(waiting_note(step, namespace, month, self.room, nodes_cpus()))

    async def namespace(self, namespace: str, steps: Sequence[str], months: list[str]) -> bool:
        for step in steps:
            if step in PER_MONTH:
                oks = await asyncio.gather(*(self.task(step, namespace, m) for m in months))
                ok = all(oks)
            else:
                ok = await self.task(step, namespace, "")
            if not ok:
                return False
        return True


__all__ = ["STEPS", "CycleReport", "check_steps", "execute_step", "run_cycle", "sleep_dsn"]
