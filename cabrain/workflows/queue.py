"""The dispatch queue: tasks with a priority and a status (pending, picked, done, failed), safe for
many workers on one PostgreSQL.

A worker claims the most urgent pending task with ``FOR UPDATE SKIP LOCKED``, so two workers
never claim the same one; it runs it through :class:`~cabrain.workflows.dispatch.Dispatcher` and
keeps the result. A claim older than ``CABRAIN_WORKFLOW_LEASE_S`` (its worker died) goes back to
pending, until it has been tried ``CABRAIN_WORKFLOW_MAX_TRIES`` times; then it fails. Tasks are
queued for an agent with write access to the namespace, and read back by agents that can read it.

The functions below work on a connection the caller holds
(:class:`cabrain.workflows.facade.Workflows` owns them); a worker (:func:`work`) runs on the
dispatcher's engine.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import asyncpg

from cabrain.errors import CabrainError, InputError, NotFound
from cabrain.redact import redact
from cabrain.store import access
from cabrain.store import workflow_queue as sql
from cabrain.workflows.dispatch import DispatchResult, TaskRequest


class Dispatches(Protocol):
    """What runs a queued task: the :class:`cabrain.workflows.facade.Workflows` facade, whose gated
    ``dispatch`` checks the submitter's role and caps again when its task runs."""

    @property
    def engine(self) -> Any: ...

    @property
    def settings(self) -> Any: ...

    async def dispatch(self, agent: str, task: TaskRequest) -> DispatchResult: ...


log = logging.getLogger("cabrain.workflows")


def _view(row: asyncpg.Record) -> dict[str, Any]:
    out = dict(row)
    for key in ("request", "result"):
        if isinstance(out[key], str):
            out[key] = json.loads(out[key])
    for key in ("id", "task_id"):
        out[key] = None if out[key] is None else str(out[key])
    for key in ("picked_at", "finished_at", "created_at"):
        out[key] = None if out[key] is None else out[key].isoformat()
    return out


def queue_id(value: uuid.UUID | str) -> uuid.UUID:
    """``value`` as a queue id, or :class:`InputError`."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InputError(f"not a queue id: {value!r}") from None


def check_priority(priority: int) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not -1000 <= priority <= 1000:
        raise InputError(f"priority must be an integer from -1000 to 1000, got {priority!r}")


async def enqueue(
    conn: asyncpg.Connection,
    agent: str,
    request: TaskRequest,
    *,
    priority: int = 5,
    max_chars: int,
    scrub: bool = True,
) -> dict[str, Any]:
    """Queue ``request`` for ``agent`` (it needs write access to the task's namespace); with
    ``scrub``, without its secrets (it is stored, then sent)."""
    request = request.checked(max_chars, scrub=scrub)
    check_priority(priority)
    await access.require_writer(conn, agent, request.namespace)
    row = await conn.fetchrow(
        sql.ENQUEUE, uuid.uuid4(), request.namespace, agent, priority, json.dumps(request.to_json())
    )
    return _view(row)


async def get(conn: asyncpg.Connection, agent: str, queued: uuid.UUID | str) -> dict[str, Any]:
    """A queued task, for its submitter or an agent that may read its namespace's team memories;
    for any other agent it does not exist."""
    key = queue_id(queued)
    row = await conn.fetchrow(sql.GET, key)
    if row is None:
        raise NotFound(f"no queued task {key}")
    caller = await access.caller(conn, agent, row["namespace"])
    if not caller.agent_ok or not (caller.team_ok or row["submitted_by"] == agent):
        raise NotFound(f"no queued task {key}")  # what an agent may not read does not exist for it
    return _view(row)


async def counts(conn: asyncpg.Connection, namespace: str | None = None) -> dict[str, int]:
    rows = await conn.fetch(sql.COUNTS, namespace)
    return {
        status: next((r["n"] for r in rows if r["status"] == status), 0)
        for status in ("pending", "picked", "done", "failed")
    }


async def claim(conn: asyncpg.Connection, worker: str, *, lease_s: float, max_tries: int) -> dict[str, Any] | None:
    """The most urgent pending task, now picked by ``worker`` (None: none is pending); claims
    older than ``lease_s`` go back to pending (or fail after ``max_tries``) first."""
    expired = await conn.fetch(sql.EXPIRE, lease_s, max_tries)
    if expired:
        log.warning("claims expired", extra={"tasks": [str(r["id"]) for r in expired]})
    row = await conn.fetchrow(sql.CLAIM, worker)
    return None if row is None else _view(row)


async def run_one(dispatcher: Dispatches, worker: str, item: dict[str, Any]) -> dict[str, Any]:
    """Run a claimed task and keep its result (or its error)."""
    task_id, status, result, error = None, "done", None, None
    try:
        request = TaskRequest.from_json(item["request"])
        outcome = await dispatcher.dispatch(item["submitted_by"], request)
        task_id, result = outcome.task_id, outcome.to_json()
    except CabrainError as exc:
        status, error = "failed", str(exc)
    except Exception as exc:
        log.exception("queued task crashed", extra={"queue_id": item["id"]})
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    if error is not None and dispatcher.settings.redact_secrets:  # kept, and shown to the worker's operator
        error = redact(error)
    async with dispatcher.engine.pool.acquire() as conn:
        await conn.execute(
            sql.FINISH,
            uuid.UUID(item["id"]),
            worker,
            status,
            None if result is None else json.dumps(result),
            error,
            task_id,
        )
    return {"id": item["id"], "status": status, "error": error, "task_id": None if task_id is None else str(task_id)}


async def work(
    dispatcher: Dispatches,
    worker: str,
    *,
    stop: asyncio.Event | None = None,
    drain: bool = False,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Claim and run tasks until ``stop`` is set (or, with ``drain``, until none is pending);
    returns how many it ran."""
    s = dispatcher.settings
    say = progress or (lambda line: None)
    ran = 0
    while stop is None or not stop.is_set():
        async with dispatcher.engine.pool.acquire() as conn:
            item = await claim(conn, worker, lease_s=s.workflow_lease_s, max_tries=s.workflow_max_tries)
        if item is None:
            if drain:
                break
            try:
                await asyncio.wait_for((stop or asyncio.Event()).wait(), timeout=s.workflow_poll_s)
            except TimeoutError:
                pass
            continue
        done = await run_one(dispatcher, worker, item)
        ran += 1
        say(f"{worker}: {done['id']} {done['status']}{': ' + done['error'] if done['error'] else ''}")
    return ran
