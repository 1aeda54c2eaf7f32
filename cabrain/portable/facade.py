"""The ``Portable`` facade: export, and import (CaBrain's own exports and other tools' memories).

Who may do what, declared on each method for the gate (:mod:`cabrain.gate`; ``agent`` None is the
operator on the command line, who may do anything the database lets it):

- **export** a namespace: its owner, or an admin; what it holds is what that agent may read
  (another agent's private memories are left out);
- **import a CaBrain export**: an admin, under the API's namespace and consent rules
  (:mod:`cabrain.portable.checks`), checked whole before anything is written;
- **import another tool's file** into a namespace: any agent whose role may retain and that may
  write it; the memories are that agent's, and its caps apply.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO

from cabrain import edge, importers
from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.gate import Read, operation
from cabrain.localfiles import ArchiveLimits
from cabrain.policy import Op
from cabrain.portable.export import ExportReport, export
from cabrain.portable.imports import ImportReport, import_parsed
from cabrain.portable.restore import RestoreReport, restore
from cabrain.progress import Say, as_progress
from cabrain.store import access
from cabrain.store import portable as sql
from cabrain.types import Visibility

__all__ = ["FORMATS", "Portable"]

FORMATS = ("cabrain", *sorted(importers.FORMATS))


class Portable:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @operation(Op.EXPORT, operator=True, reads=Read.MEMORIES, http="GET /v1/export", client="export", cli="export")
    async def export(
        self,
        agent: str | None,
        namespaces: Sequence[str],
        out: IO[str],
        *,
        with_embeddings: bool = False,
        progress: Callable[[str], None] = lambda line: None,
    ) -> ExportReport:
        """Stream the namespaces the agent may read as CaBrain's portable JSON Lines export (hot and cold tier, history and judgments).

        Read from a replica of the hot tier when one may serve it (:meth:`Engine.reading`)."""
        return await self.engine.reading(
            lambda: self._export(agent, namespaces, out, with_embeddings=with_embeddings, progress=progress),
            again=False,  # what was written to ``out`` stays written: a lost replica is an error here
        )

    async def _export(
        self,
        agent: str | None,
        namespaces: Sequence[str],
        out: IO[str],
        *,
        with_embeddings: bool,
        progress: Callable[[str], None],
    ) -> ExportReport:
        async with self.engine.read_pool().acquire() as conn:
            if not namespaces:
                if agent is not None:
                    raise InputError("name the namespaces to export")
                namespaces = [r["name"] for r in await conn.fetch(sql.ALL_NAMESPACES)]
            for name in namespaces:
                if agent is None:
                    if not (await access.caller(conn, "-", name)).namespace_exists:
                        raise InputError(f"namespace {name!r} does not exist")
                else:
                    (await access.caller(conn, agent, name)).require_owner()
        return await export(
            self.engine, namespaces, out, agent=agent, with_embeddings=with_embeddings, progress=progress
        )

    @operation(Op.ADMIN, operator=True, admin=True)
    async def restore(
        self,
        agent: str | None,
        lines: Iterable[str],
        *,
        where: str = "the export",
        progress: Say | None = None,
    ) -> RestoreReport:
        return await restore(self.engine, lines, agent=agent, where=where, progress=as_progress(progress))

    @operation(
        Op.RETAIN, namespace="namespace", operator=True, http="POST /v1/import", client="import_file", cli="import"
    )
    async def import_file(
        self,
        agent: str | None,
        fmt: str,
        path: Path,
        namespace: str | None,
        *,
        visibility: str = "team",
        decide: bool = True,
        as_agent: str = "admin",
        source: str | None = None,
        origin: str | None = None,
        mirror: bool = False,
        dry_run: bool = False,
        progress: Say | None = None,
    ) -> ImportReport | RestoreReport:
        """Import ``path`` as ``fmt``. ``as_agent`` is whom the operator (``agent`` None) writes as;
        ``source`` names the source the records' keys are scoped by (default: the file's real path);
        ``origin`` is where an uploaded file is at its origin (the path the client read it from: what
        messages call it, and the default source); ``mirror`` forgets the records
        the source no longer holds; ``dry_run`` says what would be done and writes nothing."""
        if fmt == "cabrain":
            if namespace is not None:
                raise InputError("a CaBrain export names its own namespaces: leave out --namespace")
            if mirror or dry_run:
                raise InputError("--mirror and --dry-run are for other tools' files, not a CaBrain export")
            try:
                with open(path, encoding="utf-8") as f:
                    return await self.restore(agent, f, where=origin or str(path), progress=progress)
            except UnicodeDecodeError:
                raise InputError(f"{origin or path} is not UTF-8 text: not a CaBrain export") from None
            except OSError as exc:
                raise InputError(f"cannot read {origin or path}: {exc.strerror or exc}") from None
        if fmt not in importers.FORMATS:
            raise InputError(f"unknown import format {fmt!r}", hint=f"use one of: {', '.join(FORMATS)}")
        if not namespace:
            raise InputError(f"importing {fmt} needs the namespace to import into (--namespace)")
        try:
            seen = Visibility(visibility)
        except ValueError:
            raise InputError(f"visibility must be private, team or global, got {visibility!r}") from None
        if source is not None and not source.strip():
            raise InputError("--source names the source: give a name, or leave it out for the file's path")
        limits = ArchiveLimits.from_settings(self.engine.settings)
        try:
            parsed = await asyncio.to_thread(functools.partial(importers.parse, fmt, path, limits=limits))
        except InputError as exc:
            if origin is None:
                raise
            raise InputError(
                exc.message.replace(str(path), origin).replace(str(path.parent), "the upload"),
                hint=exc.hint,
                fix=exc.fix,
            ) from None
        for number, record in enumerate(parsed.records, 1):  # the edge guard, on every record before any is written
            try:
                edge.check_value(dataclasses.asdict(record), where="the record")
            except InputError as exc:
                raise InputError(f"{fmt} record {number} ({record.ref or record.key}): {exc.message}") from None
        return await import_parsed(
            self.engine,
            agent or as_agent,
            namespace,
            fmt,
            parsed,
            source=source.strip() if source is not None else origin or str(Path(path).resolve()),
            named=source is not None,
            visibility=seen,
            decide=decide,
            mirror=mirror,
            dry_run=dry_run,
            progress=progress,
        )
