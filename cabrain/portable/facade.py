"""The ``Portable`` facade: export, and import (CaBrain's own exports and other tools' memories).

Who may do what, enforced here for every surface (``agent`` None is the operator on the command
line, who may do anything the database lets it):

- **export** a namespace: its owner, or an admin;
- **import a CaBrain export**: an admin (it creates agents, namespaces and grants as they were);
- **import another tool's file** into a namespace: any agent that may write it; the memories are
  that agent's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO

from cabrain import importers
from cabrain.engine import Engine
from cabrain.errors import InputError
from cabrain.policy import Op
from cabrain.portable.export import ExportReport, export
from cabrain.portable.imports import ImportReport, import_parsed
from cabrain.portable.restore import RestoreReport, restore
from cabrain.store import access
from cabrain.types import Visibility

__all__ = ["FORMATS", "Portable"]

FORMATS = ("cabrain", *sorted(importers.FORMATS))

ALL_NAMESPACES = "SELECT name FROM namespaces ORDER BY name"


class Portable:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def export(
        self,
        agent: str | None,
        namespaces: Sequence[str],
        out: IO[str],
        *,
        with_embeddings: bool = False,
        progress: Callable[[str], None] = lambda line: None,
    ) -> ExportReport:
        if agent is not None:
            await self.engine.governor.check(agent, Op.EXPORT)
        async with self.engine.pool.acquire() as conn:
            if not namespaces:
                if agent is not None:
                    raise InputError("name the namespaces to export")
                namespaces = [r["name"] for r in await conn.fetch(ALL_NAMESPACES)]
            for name in namespaces:
                if agent is None:
                    if not (await access.caller(conn, "-", name)).namespace_exists:
                        raise InputError(f"namespace {name!r} does not exist")
                else:
                    (await access.caller(conn, agent, name)).require_owner()
        return await export(self.engine, namespaces, out, with_embeddings=with_embeddings, progress=progress)

    async def restore(
        self,
        agent: str | None,
        lines: Iterable[str],
        *,
        where: str = "the export",
        progress: Callable[[str], None] = lambda line: None,
    ) -> RestoreReport:
        if agent is not None:
            async with self.engine.pool.acquire() as conn:
                await access.require_admin(conn, agent)
        return await restore(self.engine, lines, where=where, progress=progress)

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
        progress: Callable[[str], None] = lambda line: None,
    ) -> ImportReport | RestoreReport:
        """Import ``path`` as ``fmt``. ``as_agent`` is whom the operator (``agent`` None) writes as."""
        if fmt == "cabrain":
            if namespace is not None:
                raise InputError("a CaBrain export names its own namespaces: leave out --namespace")
            try:
                with open(path, encoding="utf-8") as f:
                    return await self.restore(agent, f, where=str(path), progress=progress)
            except UnicodeDecodeError:
                raise InputError(f"{path} is not UTF-8 text: not a CaBrain export") from None
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        if fmt not in importers.FORMATS:
            raise InputError(f"unknown import format {fmt!r}", hint=f"use one of: {', '.join(FORMATS)}")
        if not namespace:
            raise InputError(f"importing {fmt} needs the namespace to import into (--namespace)")
        try:
            seen = Visibility(visibility)
        except ValueError:
            raise InputError(f"visibility must be private, team or global, got {visibility!r}") from None
        parsed = await asyncio.to_thread(importers.parse, fmt, path)
        return await import_parsed(
            self.engine, agent or as_agent, namespace, fmt, parsed, visibility=seen, decide=decide, progress=progress
        )
