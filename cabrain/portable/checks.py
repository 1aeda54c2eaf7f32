"""A CaBrain export checked whole before anything of it is written (:mod:`cabrain.portable.restore`).

Every record is read once first (:func:`whole`, streaming: a file of any size): it is JSON, of a
known type, with its fields of the types the tables take (ids, times within what PostgreSQL and
Python hold, finite numbers, strings without NUL or lone surrogates, no deeper than the edge
allows), its memories in the namespaces its header names; it ends with its end record, whose counts
are those read and whose digest (:class:`cabrain.portable.export.Digest`, in exports that have one)
is that of the lines read. A file that fails any of it (cut short anywhere, a line changed, counts
that do not add up) is refused with one error and nothing written.

An import made for an agent (an admin over the API) obeys the namespace and consent rules of the
API besides (:class:`Plan`):

- it creates no namespace for anyone but the importing agent: a namespace it creates is the
  importer's, as ``POST /v1/namespaces`` makes it, and a personal name (``@other/...``) of another
  agent is refused;
- it writes no memory as another agent: another agent's memory is written as the importer's, with
  who wrote it kept in ``metadata.imported_owner``;
- it writes into no existing namespace another agent owns (it would put words in that agent's
  namespace, under names the agent's capture trusts);
- a grant comes back as an offer: only its grantee accepts it (unless the grantee is the importer);
- an agent it creates keeps its role and caps from the export (never admin); an agent that exists
  here is left as it is, so an import never widens anyone's power.

The operator's import on the database (``cabrain import cabrain FILE``) restores everything as it
was.
"""

from __future__ import annotations

import json
import math
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from cabrain import edge, namespaces
from cabrain.errors import AccessDenied, InputError
from cabrain.policy import Role
from cabrain.portable.export import FORMAT, SAY_EVERY, Digest
from cabrain.progress import Say, as_progress
from cabrain.store import portable as sql
from cabrain.types import MemoryType, Network, Visibility

__all__ = ["Plan", "Whole", "chained", "plan", "records", "rereadable", "when", "whole"]

TYPES = ("agent", "namespace", "grant", "entity", "memory", "mention", "link", "judgment", "action", "end")
ACTION_STATUSES = ("pending", "approved", "denied", "expired", "done", "failed")


@dataclass
class Whole:
    """What reading a whole export found: its header, the namespaces it names, its records counted
    by type, and the digest of its lines (as :class:`Digest` makes it, whether or not the export
    keeps one: the import's second reading must find the same)."""

    header: dict[str, Any]
    namespaces: list[str]
    counts: dict[str, int]
    digest: str


@dataclass
class Plan:
    """What a checked export will write, and how an agent's import changes it."""

    header: dict[str, Any]
    counts: dict[str, int]
    digest: str
    agent: str | None  # the importing agent (None: the operator)
    namespaces: list[str] = field(default_factory=list)
    existing: set[str] = field(default_factory=set)  # namespaces here already

    def namespace_owner(self, recorded: str | None) -> str | None:
        return recorded if self.agent is None else self.agent

    def accepted_at(self, grantee: str, recorded: datetime | None) -> datetime | None:
        return recorded if self.agent is None or grantee == self.agent else None

    def memory(self, record: dict[str, Any]) -> dict[str, Any]:
        """A memory record as this import writes it: over the API nobody writes as another agent, so
        another agent's memory becomes the importer's, its author kept in ``metadata.imported_owner``."""
        owner = record.get("owner_agent_id")
        if self.agent is None or owner == self.agent:
            return record
        metadata = {**(record.get("metadata") or {}), "imported_owner": owner}
        return {**record, "owner_agent_id": self.agent, "metadata": metadata}


AGAIN = "export it again (a whole file ends with its end record)"
NOTHING = "nothing of it was written"


def records(lines: Iterable[str], where: str, digest: Digest | None = None) -> Iterator[dict[str, Any]]:
    """The export's records, each checked to be a JSON object with a type and to pass the edge; every
    line before the end record added to ``digest``."""
    rest = iter(lines)
    for number, line in enumerate(rest, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if not any(later.strip() for later in rest):
                raise InputError(
                    f"{where} ends in the middle of line {number}: the export was cut short ({NOTHING})", hint=AGAIN
                ) from None
            raise InputError(f"{where} line {number} is not JSON: {exc.msg} ({NOTHING})", hint=AGAIN) from None
        except RecursionError:
            raise InputError(f"{where} line {number} is nested too deeply ({NOTHING})") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise InputError(f"{where} line {number} is not a CaBrain export record ({NOTHING})")
        try:
            edge.check_value(record)
        except InputError as exc:
            raise InputError(f"{where} line {number}: {exc.message} ({NOTHING})") from None
        if digest is not None and record["type"] != "end":
            digest.add(line)
        yield record


def when(value: Any) -> datetime | None:
    """A time of the export (ISO 8601 text), within what PostgreSQL and Python hold."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a time")
    found = datetime.fromisoformat(value)
    if found.tzinfo is None:
        found = found.replace(tzinfo=UTC)
    edge.check_datetime(found)
    return found


def _uuid(value: Any) -> None:
    uuid.UUID(str(value))


def _text(value: Any, *, empty: bool = False) -> None:
    if not isinstance(value, str) or (not empty and not value):
        raise ValueError(f"{value!r} is not text")


def _maybe(check: Any, value: Any) -> None:
    if value is not None:
        check(value)


def _number(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")


def _fields(kind: str, r: dict[str, Any]) -> None:
    """The record's fields have the types their tables take (ValueError, KeyError otherwise)."""
    if kind == "agent":
        _text(r["id"])
        when(r["created_at"])
        when(r.get("disabled_at"))
        Role(r.get("role") or "member")
        caps = r.get("caps") or {}
        if not isinstance(caps, dict) or not all(isinstance(v, int) and 0 <= v < 2**62 for v in caps.values()):
            raise ValueError("caps are a count per kind")
    elif kind == "namespace":
        if not namespaces.is_valid(r["name"]):
            raise ValueError(f"{r['name']!r} is not a namespace name")
        _text(r["owner_agent_id"])
        when(r["created_at"])
        if not isinstance(r.get("metadata") or {}, dict):
            raise ValueError("a namespace's metadata is an object")
    elif kind == "grant":
        _text(r["agent_id"])
        _text(r["namespace"])
        _maybe(_text, r.get("granted_by"))
        if not isinstance(r["can_read"], bool) or not isinstance(r["can_write"], bool):
            raise ValueError("can_read and can_write are true or false")
        when(r["granted_at"])
        when(r.get("accepted_at"))
    elif kind == "entity":
        _uuid(r["id"])
        _text(r["namespace"])
        _text(r["key"])
    elif kind == "memory":
        _uuid(r["id"])
        _text(r["namespace"])
        _text(r["content"])
        _maybe(_text, r.get("owner_agent_id"))
        Visibility(r["visibility"]), Network(r["network"]), MemoryType(r["memory_type"])
        _number(r["importance"])
        if when(r["valid_at"]) is None:
            raise ValueError("a memory has a valid_at")
        for name in ("created_at", "invalid_at", "last_accessed_at", "consolidated_at", "decayed_at", "forgotten_at"):
            when(r.get(name))
        _maybe(_uuid, r.get("superseded_by"))
        if not isinstance(r.get("metadata") or {}, dict):
            raise ValueError("a memory's metadata is an object")
        _maybe(_text, r.get("embedding"))
    elif kind == "mention":
        _uuid(r["memory_id"])
        _uuid(r["entity_id"])
    elif kind == "link":
        _uuid(r["memory_id"])
        _uuid(r["source_id"])
        _text(r["relation"])
    elif kind == "judgment":
        _uuid(r["id"])
        _text(r["namespace"])
        for memory in r["memory_ids"]:
            _uuid(memory)
    elif kind == "action":
        _uuid(r["id"])
        _text(r["agent_id"])
        _text(r["op"])
        _maybe(_text, r.get("namespace"))
        if r["status"] not in ACTION_STATUSES or not isinstance(r.get("args") or {}, dict):
            raise ValueError("not a held action")
        when(r["requested_at"])
        when(r["expires_at"])
        when(r.get("decided_at"))


def whole(lines: Iterable[str], where: str, progress: Say | None = None) -> Whole:
    """Read the whole export once and check it (module docstring): :class:`InputError` at its first
    fault. Reads line by line, holding only the counts: a file of any size."""
    digest = Digest()
    stream = records(lines, where, digest)
    header = next(stream, None)
    if header is None or header.get("type") != "cabrain-export":
        raise InputError(f"{where} is not a CaBrain export (its first line is no cabrain-export header)")
    if header.get("format") != FORMAT:
        raise InputError(f"{where} is export format {header.get('format')!r}; this CaBrain reads format {FORMAT}")
    named = header.get("namespaces") or []
    if not isinstance(named, list) or not all(namespaces.is_valid(n) for n in named):
        raise InputError(f"{where}'s header names no valid namespaces")
    counts: dict[str, int] = {}
    ended: dict[str, Any] | None = None
    number = 1
    with as_progress(progress).track("checking the export", unit="records") as tracker:
        for number, record in enumerate(stream, 2):
            kind = record["type"]
            if ended is not None:
                raise InputError(f"{where} has records after its end record ({NOTHING})", hint=AGAIN)
            if kind not in TYPES:
                raise InputError(f"{where} has a record of unknown type {kind!r} ({NOTHING})")
            if number % SAY_EVERY == 0:
                tracker.update(number)
            if kind == "end":
                ended = record
                continue
            counts[kind] = counts.get(kind, 0) + 1
            try:
                _fields(kind, record)
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"{where} record {number} ({kind}) is not valid: {exc} ({NOTHING})") from None
            if kind in ("memory", "namespace", "entity", "judgment") and (
                record.get("namespace", record.get("name")) not in named
            ):
                raise InputError(
                    f"{where} record {number} ({kind}) is of a namespace its header does not name ({NOTHING})"
                )
        tracker.update(number)
    if ended is None:
        raise InputError(f"{where} ends before its end record: the export was cut short ({NOTHING})", hint=AGAIN)
    said, sha = ended.get("counts"), ended.get("sha256")
    if not isinstance(said, dict) or not (sha is None or isinstance(sha, str)):
        raise InputError(f"{where}'s end record is not one CaBrain writes ({NOTHING})", hint=AGAIN)
    expected = {k: v for k, v in said.items() if k != "cabrain-export"}
    if expected != counts:
        raise InputError(
            f"{where} holds {_counted(counts)} but its end record says {_counted(expected)}: it was cut or altered "
            f"({NOTHING})",
            hint=AGAIN,
        )
    if sha is not None and sha != digest.hexdigest():
        raise InputError(
            f"{where}'s lines are not those its end record's digest was made of: a line was changed or lost ({NOTHING})",
            hint=AGAIN + '; a file edited on purpose is imported once "sha256" is taken out of its end record',
        )
    return Whole(header, list(named), counts, digest.hexdigest())


def _counted(counts: dict[str, Any]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "nothing"


async def plan(conn: asyncpg.Connection, read: Whole, *, agent: str | None, where: str) -> Plan:
    """The plan of an export read whole (:func:`whole`) for ``agent`` (None: the operator), checked
    against what is here: :class:`AccessDenied` before anything is written."""
    named = read.namespaces
    made = Plan(read.header, read.counts, read.digest, agent, list(named))
    owners = {r["name"]: r["owner_agent_id"] for r in await conn.fetch(sql.OWNERS, list(named))}
    made.existing = set(owners)
    if agent is not None:
        for name in named:
            personal = namespaces.personal_owner(name)
            if personal is not None and personal != agent:
                raise AccessDenied(
                    f"{where} holds {name!r}, agent {personal!r}'s personal namespace: only that agent creates it",
                    hint="leave it out of the export, or import it as the operator on the server (cabrain import)",
                )
            if name in owners and owners[name] != agent:
                raise AccessDenied(
                    f"{where} would write into namespace {name!r}, which agent {owners[name]!r} owns here",
                    hint="import into namespaces you own (or that do not exist yet), or as the operator on the server",
                )
    return made


def rereadable(lines: Iterable[str]) -> Callable[[], Iterable[str]]:
    """The lines, to be read twice (checked whole, then written): a list as it is, a file from its
    start each time, anything else spooled to a private temporary file first."""
    if isinstance(lines, list | tuple):
        return lambda: lines
    seek = getattr(lines, "seek", None)
    if callable(seek) and getattr(lines, "seekable", lambda: False)():
        start = lines.tell()  # type: ignore[attr-defined]

        def again() -> Iterable[str]:
            seek(start)
            return lines

        return again
    spool = tempfile.TemporaryFile("w+", encoding="utf-8")
    for line in lines:
        spool.write(line if line.endswith("\n") else line + "\n")
    return rereadable(spool)


def chained(
    first: dict[str, Any] | None, rest: Iterator[dict[str, Any]], counts: dict[str, int]
) -> Iterator[dict[str, Any]]:
    """``first`` then ``rest``, counting the memories as they pass (the caller counted ``first``'s
    predecessor)."""
    for record in [first] if first is not None else []:
        if record["type"] == "memory":
            counts["memory"] = counts.get("memory", 0) + 1
        yield record
    for record in rest:
        if record["type"] == "memory":
            counts["memory"] = counts.get("memory", 0) + 1
        yield record
