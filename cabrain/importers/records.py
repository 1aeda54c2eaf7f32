"""What an importer makes of another memory tool's contents: records, and a count of what it left out.

An :class:`ImportRecord` is one memory as the source held it, already mapped onto CaBrain's
vocabulary (network, memory type, author, thread) but not yet retained. Its ``key`` is stable: a
second parse of the same source yields the same keys, so an import run twice revises instead of
duplicating. :class:`Parsed` is what a format's ``parse`` returns: the records in source order and,
for everything read but not made a record, how many and why (``{"empty": 2}``).

The helpers below are the few things every format needs: reading the file with errors that name it
(:func:`read_bytes`, :func:`load_json`), times normalised to aware UTC (:func:`utc`), a short
content hash for sources without ids (:func:`digest`) and lists that some sources keep as JSON text
(:func:`strings`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from cabrain.errors import InputError
from cabrain.types import MemoryType, Network

__all__ = ["ImportRecord", "Parsed", "digest", "load_json", "read_bytes", "strings", "utc"]

_NETWORKS = frozenset(n.value for n in Network)
_MEMORY_TYPES = frozenset(t.value for t in MemoryType)


@dataclass(frozen=True)
class ImportRecord:
    """One memory read from another tool, ready to retain.

    ``key`` is the record's stable id in its source (the source's own id, else a hash of its content
    and place); ``valid_at`` when the source says it was made or last updated (aware, UTC);
    ``author`` the user or agent the source names; ``thread`` the session or conversation the source
    groups it under; ``metadata`` the source's extra fields worth keeping (categories, tags, labels);
    ``ref`` where it came from, for a person (``mem0:<id>``, ``CLAUDE.md#Setup / Database``).

    ``scope`` is what the key is unique within. By default a scope is within the file read (a
    claude-mem database's project, a folder's file), so two files never share keys; with
    ``own_scope`` it names the source on its own (a Letta agent, a mem0 user), so the same record
    read again from a newer export of that source is the same record. ``group`` gathers records whose
    keys change with their text (a section's bullets): on a re-import a group's records gone from
    the source are paired with its new ones, as revisions.
    """

    key: str
    content: str
    valid_at: datetime | None = None
    author: str | None = None
    network: str = "experience"  # a cabrain.types.Network value
    memory_type: str = "semantic"  # a cabrain.types.MemoryType value
    thread: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    ref: str = ""
    scope: str = ""
    own_scope: bool = False
    group: str | None = None

    def __post_init__(self) -> None:
        if self.network not in _NETWORKS:
            raise ValueError(f"unknown network {self.network!r}")
        if self.memory_type not in _MEMORY_TYPES:
            raise ValueError(f"unknown memory type {self.memory_type!r}")
        if self.valid_at is not None and self.valid_at.tzinfo is None:
            raise ValueError("valid_at must be timezone-aware")


@dataclass
class Parsed:
    """A parse's result: the records, and how many items were left out for each reason."""

    records: list[ImportRecord] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    _keys: set[tuple[bool, str, str]] = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._keys = {(r.own_scope, r.scope, r.key) for r in self.records}

    def add(self, record: ImportRecord) -> None:
        """Keep ``record``, unless an earlier one has its key in its scope (the first wins; the later
        is counted)."""
        key = (record.own_scope, record.scope, record.key)
        if key in self._keys:
            self.skip("duplicate key")
            return
        self._keys.add(key)
        self.records.append(record)

    def skip(self, reason: str, count: int = 1) -> None:
        """Count ``count`` items left out for ``reason`` (a count of 0 leaves no trace)."""
        if count > 0:
            self.skipped[reason] = self.skipped.get(reason, 0) + count


# --- reading -----------------------------------------------------------------------------------------


def read_bytes(path: Path) -> bytes:
    """The file's bytes, or an :class:`InputError` that names it."""
    if not path.exists():
        raise InputError(f"{path}: no such file", hint="check the path")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a file", hint="give the export file itself")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def load_json(path: Path, data: bytes | None = None) -> Any:
    """The file (or ``data`` read from it) as JSON, or an :class:`InputError` naming the file and the
    place where it stops being JSON."""
    raw = read_bytes(path) if data is None else data
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})", hint="give the JSON export file") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            hint="give the file exactly as the tool exported it",
        ) from exc


# --- values ------------------------------------------------------------------------------------------

_MS_FROM = 100_000_000_000  # epoch numbers above this are milliseconds (1973 in ms, year 5138 in seconds)


def utc(value: Any) -> datetime | None:
    """``value`` as an aware UTC datetime: an ISO 8601 string (``Z``, an offset such as ``-07:00``,
    or none, read as UTC), epoch seconds or milliseconds, a datetime or a date. None for anything
    else, an empty value included."""
    if isinstance(value, bool) or value is None or value == "":
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) >= _MS_FROM else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return utc(int(text))
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    return None


def digest(*parts: str) -> str:
    """A short, stable hash of ``parts`` (16 hex digits), for keys of records the source gives no id."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def strings(value: Any) -> list[str]:
    """A list of non-empty strings from a list, a JSON array kept as text (as SQLite columns keep
    them), or a single string."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return strings(json.loads(text))
            except json.JSONDecodeError:
                pass
        return [text] if text else []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    return [str(value)]
