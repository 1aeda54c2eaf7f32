"""Importers: another memory tool's contents, read as records CaBrain can retain (``cabrain import``).

Each format is a module with ``FORMAT`` (its name on the command line) and ``parse(path) -> Parsed``
(:mod:`cabrain.importers.records`); it only reads, and raises :class:`~cabrain.errors.InputError`
naming the file for input it cannot read. :data:`FORMATS` names the module of each format, imported
when it is used:

    mem0         Memory.get_all() / MemoryClient.get_all() JSON, OpenMemory's backup (mem0.py)
    claude-mem   the claude-mem plugin's JSON export, or its SQLite database itself (claude_mem.py)
    letta        a Letta Agent File (.af): memory blocks, archival passages (letta.py)
    markdown     CLAUDE.md, AGENTS.md, MEMORY.md, SOUL.md, .cursorrules ... a file or a folder (markdown.py)
"""

from __future__ import annotations

import importlib
from pathlib import Path

from cabrain.errors import InputError
from cabrain.importers.records import ImportRecord, Parsed
from cabrain.localfiles import ArchiveLimits

__all__ = ["FORMATS", "ImportRecord", "Parsed", "parse"]

FORMATS: dict[str, str] = {
    "mem0": "cabrain.importers.mem0",
    "claude-mem": "cabrain.importers.claude_mem",
    "letta": "cabrain.importers.letta",
    "markdown": "cabrain.importers.markdown",
}
"""Each format's name to the module that parses it."""


def parse(fmt: str, path: Path, *, limits: ArchiveLimits | None = None) -> Parsed:
    """Read ``path`` as format ``fmt``: the records it holds and what was left out. A format that
    reads archives (``ARCHIVES = True``: a zip, a gzip) reads them within ``limits``
    (``CABRAIN_ARCHIVE_*``; unset: the defaults)."""
    module = FORMATS.get(fmt)
    if module is None:
        raise InputError(f"unknown import format {fmt!r}", hint=f"use one of: {', '.join(sorted(FORMATS))}")
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder", hint="check the path")
    reader = importlib.import_module(module)
    if getattr(reader, "ARCHIVES", False):
        with_limits: Parsed = reader.parse(path, limits=limits or ArchiveLimits())
        return with_limits
    parsed: Parsed = reader.parse(path)
    return parsed
