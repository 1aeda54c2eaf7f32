"""The ``Connectors`` facade: adding, listing, syncing and removing connectors, for every face.

Made from an :class:`~cabrain.engine.Engine` like :class:`cabrain.brain.Brain`, plus what only an
entry point may read: the environment the credentials come from, and the folders local connectors
may read (``local_roots``; None for the operator's command line, which may read any path)::

    hub = Connectors(brain.engine, environ=os.environ, local_roots=settings.connector_roots)
    await hub.add("admin", "handbook", "folder", "team", {"path": "/srv/handbook"})
    report = await hub.sync("admin", "handbook", say=print)

Who may do what, declared on each method and enforced by the gate (:mod:`cabrain.gate`) for every
surface, with the grants checked in SQL (:mod:`cabrain.store.access`):

- **add**: an admin (a connector reads the host's files and environment and reaches the network
  from the server) that may write the namespace; the connector then writes as that admin. Its
  URLs pass the egress policy and its credential's name is one the operator allows
  (:mod:`cabrain.egress`), when it is added and on every request. Its source is reached once
  then (:meth:`~cabrain.connectors.base.Source.check`: the path, the credential, the project), so
  a wrong one fails the add, not the first sync; ``check=False`` adds one not reachable yet;
- **list / get / runs**: admins see every connector; another agent sees those writing to a
  namespace it may write;
- **sync**: an agent that may write the connector's namespace; the writes are the connector's
  agent's, checked as any retain is. A **dry run** (same callers) lists, fetches and compares as a
  sync does and writes nothing: no memory, no item, no run;
- **remove**: an admin, or the namespace's owner (whose role may sync). The memories stay; the
  connector stops.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from cabrain.connectors import checks, sources
from cabrain.connectors.base import ItemRef, Source, SourceSpec
from cabrain.connectors.preview import DryRunReport, preview
from cabrain.connectors.retry import Retry
from cabrain.connectors.sync import Counts, Sync
from cabrain.egress import Egress
from cabrain.engine import Engine
from cabrain.errors import (
    CabrainError,
    ConfigError,
    ConflictError,
    InputError,
    NotFound,
    SourceAuthError,
)
from cabrain.gate import Read, operation, system
from cabrain.localfiles import ArchiveLimits
from cabrain.policy import Op
from cabrain.progress import Progress, Say, as_progress
from cabrain.redact import redact
from cabrain.settings import Settings
from cabrain.store import access
from cabrain.store import connectors as sql
from cabrain.types import Visibility

__all__ = ["Connectors", "DryRunReport", "SyncReport"]

log = logging.getLogger("cabrain.connectors")

URL_KEYS = ("url", "api_url")  # the config keys that name a server a connector connects to

# Set in a local connector's config when the operator's command line added it (any path, read as
# given); a connector added through the API is read under CABRAIN_CONNECTOR_ROOTS. No kind's
# configure() takes this key, so no request can set it.
ANY_PATH = "any_path"

NAME_HINT = "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, at most 63"

# Runs the changed items of one sync in shards elsewhere (Ray tasks) and returns their counts.
FanOut = Callable[[sql.Connector, list[ItemRef]], Awaitable[Counts]]


@dataclass(frozen=True)
class SyncReport:
    run_id: uuid.UUID
    connector: str
    status: str  # done | failed
    counts: dict[str, int]
    seconds: float
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "run_id": str(self.run_id)}


class Connectors:
    """Every method is one operation on connectors, on behalf of one agent."""

    def __init__(
        self,
        engine: Engine,
        *,
        environ: Mapping[str, str] | None = None,
        local_roots: Sequence[str] | None = None,
        retry: Retry | None = None,
    ) -> None:
        self.engine = engine
        self.environ = dict(environ) if environ is not None else {}
        self.egress = Egress.of(engine.settings, self.environ)
        self.local_roots = None if local_roots is None else [Path(r).expanduser().resolve() for r in local_roots]
        s = engine.settings
        self.retry = retry or Retry(
            attempts=s.connector_retries, base_s=s.connector_retry_backoff_s, max_s=s.connector_retry_max_s
        )

    @property
    def settings(self) -> Settings:
        return self.engine.settings

    # --- the connectors themselves ---------------------------------------------------------------
    @operation(
        Op.ADMIN,
        namespace="namespace",
        admin=True,
        http="POST /v1/connectors",
        client="add_connector",
        cli="connectors add",
    )
    async def add(
        self,
        agent: str,
        name: str,
        kind: str,
        namespace: str,
        config: Mapping[str, Any],
        *,
        visibility: str = "team",
        every_s: int | None = None,
        check: bool = True,
    ) -> sql.Connector:
        """Register a connector (a source synced into a namespace the agent may write); its credentials are kept as references, never as text. Its source is reached first (the path, the credential, the project or folder) and a wrong one refused with what to fix; ``check`` false skips that, for a source not reachable yet."""
        if not isinstance(name, str) or not sql_name(name):
            raise InputError(f"connector name {name!r} is not valid: {NAME_HINT}")
        try:
            Visibility(visibility)
        except ValueError:
            raise InputError(f"visibility must be private, team or global, got {visibility!r}") from None
        if every_s is not None and every_s < 60:
            raise InputError(f"a schedule must be every 60 s or more, got {every_s}")
        checked = sources.configure(kind, config)
        for key, value in checked.items():  # where it sends, and the credential it sends: the operator's to allow
            if key.endswith("_env") and value is not None:
                self.egress.check_secret(value, f"a {kind} connector's {key}")
            elif key in URL_KEYS and value is not None:
                self.egress.check_url(value, f"a {kind} connector's {key}")
        if sources.is_local(kind):
            checks.local_path(kind, checked, self.local_roots)
            if self.local_roots is None:  # the operator's command line: read the path as given
                checked[ANY_PATH] = True
        if check:
            async with self.engine.pool.acquire() as conn:  # refused before the source is reached
                await access.require_writer(conn, agent, namespace)
                await _name_free(conn, name)
            what = f"connector {name!r}'s credential"
            await checks.reach(name, lambda retry: self._build(kind, checked, what, retry), self.retry)
        now = self.engine.clock()
        async with self.engine.pool.acquire() as conn, conn.transaction():
            await access.require_writer(conn, agent, namespace)
            await _name_free(conn, name)
            return await sql.insert(
                conn,
                {
                    "id": uuid.uuid4(),
                    "name": name,
                    "kind": kind,
                    "namespace": namespace,
                    "visibility": visibility,
                    "agent_id": agent,
                    "config": checked,
                    "every_s": every_s,
                    "next_sync_at": now if every_s else None,
                    "created_at": now,
                },
            )

    @operation(Op.READ, reads=Read.OWN, http="GET /v1/connectors", client="connectors", cli="connectors list")
    async def listing(self, agent: str) -> list[sql.Connector]:
        """The agent's connectors (an admin's: everyone's)."""
        async with self.engine.pool.acquire() as conn:
            found = await sql.every(conn)
            if await access.is_admin(conn, agent):
                return found
            out = []
            for connector in found:
                if (await access.caller(conn, agent, connector.namespace)).can_write:
                    out.append(connector)
            return out

    @operation(
        Op.READ,
        reads=Read.OWN,
        http="GET /v1/connectors/{name}",
        client="connector",
        cli=("connectors show", "connectors runs"),
    )
    async def get(self, agent: str, name: str) -> sql.Connector:
        """One of the agent's connectors (an admin's: any), with its last sync."""
        async with self.engine.pool.acquire() as conn:
            return await self._visible(conn, agent, name)

    async def _visible(self, conn: Any, agent: str, name: str) -> sql.Connector:
        connector = await sql.by_name(conn, name)
        if connector is None or not (await access.caller(conn, agent, connector.namespace)).can_write:
            raise NotFound(f"connector {name!r} does not exist or is not visible to {agent!r}")
        return connector

    @operation(Op.SYNC, http="DELETE /v1/connectors/{name}", client="remove_connector", cli="connectors remove")
    async def remove(self, agent: str, name: str) -> sql.Connector:
        """Remove a connector; what it synced stays. True if there was one."""
        async with self.engine.pool.acquire() as conn, conn.transaction():
            connector = await self._visible(conn, agent, name)
            (await access.caller(conn, agent, connector.namespace)).require_owner()
            await sql.remove(conn, connector.id, self.engine.clock())
        return connector

    @operation(
        Op.READ,
        reads=Read.OWN,
        http="GET /v1/connectors/{name}/runs",
        client="connector_runs",
        cli=("connectors show", "connectors runs"),
    )
    async def runs(self, agent: str, name: str, *, limit: int = 20) -> list[dict[str, Any]]:
        """A connector's sync runs, newest first."""
        if not 1 <= limit <= 500:
            raise InputError(f"limit must be between 1 and 500, got {limit}")
        async with self.engine.pool.acquire() as conn:
            connector = await self._visible(conn, agent, name)
            return await sql.runs(conn, connector.id, limit)

    @operation(
        Op.READ,
        reads=Read.OWN,
        http="GET /v1/connectors/{name}/runs/{run_id}",
        client="connector_run",
        cli="connectors sync",
    )
    async def run(self, agent: str, name: str, run_id: uuid.UUID) -> dict[str, Any]:
        """One sync run of a connector: its status, counts and progress."""
        async with self.engine.pool.acquire() as conn:
            connector = await self._visible(conn, agent, name)
            found = await sql.run(conn, run_id)
        if found is None or found["connector_id"] != str(connector.id):
            raise NotFound(f"connector {name!r} has no run {run_id}")
        return found

    # --- syncing -------------------------------------------------------------------------------------
    @operation(Op.SYNC, http="POST /v1/connectors/{name}/sync", client="sync_connector", cli="connectors sync")
    async def start_sync(
        self, agent: str, name: str, *, spawn: Callable[[Awaitable[SyncReport], uuid.UUID], None]
    ) -> uuid.UUID:
        """Let a sync of ``name`` through now (404 for a connector the agent may not write) and
        ``spawn`` it in the background; its run (``connector_runs``) tells how it goes."""
        async with self.engine.pool.acquire() as conn:
            connector = await self._visible(conn, agent, name)
            await access.require_writer(conn, agent, connector.namespace)
        run_id, started = uuid.uuid4(), asyncio.Event()
        spawn(self.sync(agent, name, run_id=run_id, started=started), run_id)
        await started.wait()  # the run is recorded (or the sync refused) before its id is given out
        return run_id

    @system("a connector's credential, read for a sync or a tracker already let through")
    def credential(self, connector: sql.Connector) -> str | None:
        """The connector's credential, read from the variable (or secrets file) its config names, if
        the egress policy allows that name (:meth:`cabrain.egress.Egress.secret`)."""
        return self._secret(connector.config, f"connector {connector.name!r}'s credential")

    def _secret(self, config: Mapping[str, Any], what: str) -> str | None:
        env = config.get("token_env")
        if not env:
            return None
        try:
            return self.egress.secret(env, what)
        except ConfigError as exc:
            raise SourceAuthError(exc.message, hint=exc.hint) from None

    @system("a connector's source, for a sync already let through")
    def source(self, connector: sql.Connector) -> Source:
        """The connector's source, with its credential from the environment."""
        return self._build(connector.kind, connector.config, f"connector {connector.name!r}'s credential", self.retry)

    def _build(self, kind: str, config: Mapping[str, Any], what: str, retry: Retry) -> Source:
        s = self.settings
        spec = SourceSpec(
            kind,
            {k: v for k, v in config.items() if k != ANY_PATH},
            self._secret(config, what),
            max_file_bytes=s.connector_max_file_bytes,
            part_chars=s.connector_part_chars,
            egress=self.egress,
            roots=self._roots(config),
            archive=ArchiveLimits.from_settings(s),
        )
        return sources.build(spec, retry)

    @system("the folders a local connector's sync may read, for a sync already let through")
    def read_roots(self, connector: sql.Connector) -> tuple[str, ...] | None:
        """Where a local connector's files are read from, checked per file at read time: the path an
        operator's command line added as given (None), any other under ``CABRAIN_CONNECTOR_ROOTS``
        as they are now (a folder swapped for a link, or a root removed since, is refused)."""
        return self._roots(connector.config)

    def _roots(self, config: Mapping[str, Any]) -> tuple[str, ...] | None:
        if config.get(ANY_PATH) is True:
            return None
        roots = self.local_roots if self.local_roots is not None else self.settings.connector_roots
        return tuple(str(r) for r in roots)

    @operation(Op.SYNC, http="POST /v1/connectors/{name}/dry-run", client="dry_run_connector", cli="connectors sync")
    async def dry_run(self, agent: str, name: str, *, say: Say | None = None) -> DryRunReport:
        """What a sync of ``name`` would do now, writing nothing (no memory, no item, no run): the source listed and compared with what the connector holds, the new and changed items fetched and converted, and the parts that would be added, revised, kept and forgotten, the items deleted at the source and what the source skipped, by reason."""
        async with self.engine.pool.acquire() as conn:
            connector = await self._visible(conn, agent, name)
            await access.require_writer(conn, agent, connector.namespace)
        started = self.engine.clock()
        source = self.source(connector)
        try:
            found = await preview(Sync(self.engine, connector, source, say=say, batch=self.settings.connector_batch))
        finally:
            source.close()
        return DryRunReport(name, found, (self.engine.clock() - started).total_seconds())

    @operation(Op.SYNC)
    async def sync(
        self,
        agent: str,
        name: str,
        *,
        say: Say | None = None,
        fan_out: FanOut | None = None,
        run_id: uuid.UUID | None = None,
        started: asyncio.Event | None = None,
    ) -> SyncReport:
        """Sync one connector now: resume what an interrupted sync staged, list the source, fetch and
        index what changed (in Ray tasks when ``fan_out`` is given and there is enough of it), forget
        what is gone. A refused credential stops the connector (status ``stopped``) until a sync
        succeeds; any other failure marks it ``failed``. Either way the run records what it did."""
        try:
            return await self._sync_now(agent, name, as_progress(say), fan_out, run_id or uuid.uuid4(), started)
        finally:
            if started is not None:  # set once the run is recorded; here too when it never was
                started.set()

    async def _sync_now(
        self,
        agent: str,
        name: str,
        say: Progress,
        fan_out: FanOut | None,
        run_id: uuid.UUID,
        started: asyncio.Event | None,
    ) -> SyncReport:
        clock = self.engine.clock
        async with self.engine.pool.acquire() as conn:
            connector = await self._visible(conn, agent, name)
            await access.require_writer(conn, agent, connector.namespace)
        counts = Counts()
        started_at = clock()
        async with self.engine.pool.acquire() as lock_conn:
            if not await lock_conn.fetchval(sql.LOCK, sql.LOCK_CLASS, str(connector.id)):
                raise ConflictError(f"connector {name!r} is being synced already", hint="wait for that sync to end")
            try:
                stale = await sql.start_run(lock_conn, run_id, connector.id, started_at, socket.gethostname())
                if started is not None:
                    started.set()
                if stale:
                    say(f"{name}: {len(stale)} earlier run(s) were interrupted; resuming")
                status, error = "done", None
                try:
                    source = self.source(connector)
                    try:
                        await self._sync(connector, source, counts, say, fan_out, lock_conn, run_id)
                    finally:
                        source.close()
                except BaseException as exc:
                    status = "failed"
                    error = redact(exc.message if isinstance(exc, CabrainError) else f"{type(exc).__name__}: {exc}")
                    if isinstance(exc, SourceAuthError):  # stopped until a sync succeeds
                        await sql.set_status(lock_conn, connector.id, "stopped", error)
                    else:
                        await self._failed(lock_conn, connector, error)
                    raise
                finally:
                    finished = clock()
                    await sql.finish_run(lock_conn, run_id, finished, status, counts.to_json(), error)
                    log.info("connector sync", extra={"connector": name, "status": status, **counts.to_json()})
            finally:
                await lock_conn.fetchval(sql.UNLOCK, sql.LOCK_CLASS, str(connector.id))
        seconds = (clock() - started_at).total_seconds()
        return SyncReport(run_id, name, status, counts.to_json(), seconds, error)

    async def _failed(self, conn: Any, connector: sql.Connector, message: str) -> None:
        retry_at = self.engine.clock() + timedelta(seconds=connector.every_s) if connector.every_s else None
        await sql.set_status(conn, connector.id, "failed", message, next_at=retry_at)

    async def _sync(
        self,
        connector: sql.Connector,
        source: Source,
        counts: Counts,
        say: Progress,
        fan_out: FanOut | None,
        conn: Any,
        run_id: uuid.UUID,
    ) -> None:
        sync = Sync(self.engine, connector, source, say=say, batch=self.settings.connector_batch)
        resumed = await sync.resume(counts)
        if resumed:
            say(f"{connector.name}: indexed {resumed} item(s) an interrupted sync had staged")
        plan = await sync.plan()
        counts.add(plan.counts)
        await sql.progress(conn, run_id, counts.to_json())
        if fan_out is not None and len(plan.changed) > self.settings.connector_fan_out_items:
            counts.add(await fan_out(connector, plan.changed))
        else:
            await sync.apply(plan.changed, counts)
        await sync.delete(plan.gone, counts)
        now = self.engine.clock()
        await sql.set_status(
            conn,
            connector.id,
            "ok",
            None,
            synced_at=now,
            next_at=now + timedelta(seconds=connector.every_s) if connector.every_s else None,
            cursor={"listed_at": now.isoformat(), "items": plan.counts.listed, "run": str(run_id)},
        )
        say(
            f"{connector.name}: {counts.listed} listed, {counts.unchanged} unchanged, {counts.indexed} indexed "
            f"({counts.added} added, {counts.revised} revised, {counts.duplicates} duplicates), "
            f"{counts.deleted} deleted, {counts.forgotten} forgotten"
        )
        if counts.decisions_line():
            say(f"{connector.name}: {counts.decisions_line()}")
        if counts.skipped_line():  # what the source held that is no memory: said, so nothing vanishes unseen
            say(f"{connector.name}: {counts.skipped_line()}")

    @system("one shard of a sync already let through (a Ray task)")
    async def apply_shard(self, connector: sql.Connector, refs: list[ItemRef]) -> Counts:
        """One shard of a fanned-out sync (a Ray task): fetch, stage and index ``refs``. The sync that
        planned it holds the connector's lock."""
        source = self.source(connector)
        try:
            return await Sync(self.engine, connector, source, batch=self.settings.connector_batch).apply(refs)
        finally:
            source.close()

    @system("the replicas' scheduler: which connectors are due")
    async def due(self) -> list[sql.Connector]:
        """The operator's: connectors whose schedule says a sync is due now."""
        async with self.engine.pool.acquire() as conn:
            return await sql.due(conn, self.engine.clock())


async def _name_free(conn: Any, name: str) -> None:
    if await sql.by_name(conn, name) is not None:
        raise ConflictError(f"a connector named {name!r} exists", hint="pick another name, or remove that one")


def sql_name(name: str) -> bool:
    return re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,62}", name) is not None
