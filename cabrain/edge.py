"""The edge guard: values from outside checked before anything is counted or stored.

One set of rules for every value that comes in - a request's body, query and headers, a command
line's arguments, an MCP tool's arguments, an imported record, a channel's signed message:

- text holds no NUL and no lone surrogate (PostgreSQL's text and UTF-8 hold neither);
- a *name* (a namespace, an agent, a channel, ...: :data:`NAME_FIELDS`) is one line of at most
  :data:`MAX_NAME_CHARS` characters, without control characters or surrounding blanks (``re``'s ``$``
  matches before a final newline: ``"proj\\n"`` passed the name patterns);
- an integer fits 64 bits (every integer column is at most a ``bigint``), a float is finite;
- a text that is a date or a time (ISO 8601) lies within what PostgreSQL and Python both hold, with
  a day to spare for offsets and ``+1 day`` (0001-01-02 to 9999-12-30);
- JSON nests at most :data:`MAX_DEPTH` levels.

The HTTP API applies them to every request in one middleware (:mod:`cabrain.serve.edge_guard`), the
CLI to its parsed arguments, the MCP server to every tool's arguments, importers and channels to
every record before it is retained. Narrower limits of one field (a ``k``, a ``days``) are that
field's own, declared with it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import asyncpg

from cabrain.errors import InputError

MAX_DEPTH = 64
MAX_NAME_CHARS = 256
MAX_PARAM_CHARS = 8192  # a query parameter, a header, a command-line argument
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
INT64 = 2**63

# Fields that name something (where they are given as text): single-line, bounded, trimmed.
NAME_FIELDS = frozenset(
    {
        "name",
        "namespace",
        "namespaces",
        "agent",
        "agent_id",
        "id",
        "channel",
        "subscriber",
        "tracker",
        "notifier",
        "live_agent",
        "kind",
        "format",
        "secret_env",
        "verify_token_env",
        "api_key_env",
        "project",
        "op",
        "role",
        "status",
        "visibility",
        "network",
        "memory_type",
        "mode",
    }
)
# Fields whose inside is the caller's own free-form JSON: names are not looked for there.
FREE_FORM = frozenset({"metadata", "options", "config", "target", "params", "input", "arguments"})

_ISO = re.compile(
    r"[+-]?(?P<year>\d{4,})-\d{2}-\d{2}(?:[Tt ]\d{2}(?::?\d{2}(?::?\d{2}(?:[.,]\d+)?)?)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)
_INTEGER = re.compile(r"[+-]?\d+")


def check_datetime(value: datetime) -> datetime:
    """``value`` when PostgreSQL and Python hold it with a day to spare on either side."""
    try:
        utc = value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except (OverflowError, ValueError):
        raise InputError(f"{value.isoformat()} is outside the times CaBrain keeps") from None
    if not EARLIEST <= utc <= LATEST:
        raise InputError(f"{value.isoformat()} is outside the times CaBrain keeps (0001-01-02 to 9999-12-30)")
    return value


def check_moment(value: Any, where: str) -> datetime:
    """``value`` as a point in time the brain compares with its own: a datetime within what
    :func:`check_datetime` allows, aware (a naive one is taken as UTC, as a ``valid_at`` is)."""
    if not isinstance(value, datetime):
        raise InputError(f"{where} must be a date and time (ISO 8601, e.g. 2026-01-31T12:00:00Z), got {value!r}")
    try:
        check_datetime(value)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def check_text(value: str, where: str = "text") -> str:
    """``value`` when it holds no NUL and no lone surrogate, and is not a date out of range."""
    if "\x00" in value:
        raise InputError(f"{where} holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{where} holds a lone surrogate (not UTF-8)") from None
    if len(value) <= 64 and (found := _ISO.fullmatch(value)) is not None:
        _check_date_text(value, found, where)
    return value


def _check_date_text(value: str, found: re.Match[str], where: str) -> None:
    year = int(found.group("year"))
    if not 1 <= year <= 9999 or value.startswith(("+", "-")):
        raise InputError(f"{where}: {value!r} is outside the times CaBrain keeps (0001-01-02 to 9999-12-30)")
    try:
        parsed = datetime.fromisoformat(value.replace(",", ".").replace("z", "Z"))
    except ValueError:
        return  # not a real date (month 13): the field's own parser says so
    try:
        check_datetime(parsed)
    except InputError:
        raise InputError(f"{where}: {value!r} is outside the times CaBrain keeps (0001-01-02 to 9999-12-30)") from None


def check_name(value: str, where: str = "name") -> str:
    """``value`` when it is one trimmed line of at most MAX_NAME_CHARS characters."""
    check_text(value, where)
    if len(value) > MAX_NAME_CHARS:
        raise InputError(f"{where} is longer than {MAX_NAME_CHARS} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InputError(f"{where} holds a line break or another control character")
    if value != value.strip():
        raise InputError(f"{where} begins or ends with a blank")
    return value


def check_int(value: int, where: str = "number") -> int:
    if not -INT64 <= value < INT64:
        raise InputError(f"{where}: {value} does not fit 64 bits")
    return value


def check_value(value: Any, depth: int = 0, *, where: str = "value", names: bool = False) -> None:
    """Strings without NUL or lone surrogates (and dates in range), integers that fit 64 bits, finite
    floats, no deeper than MAX_DEPTH. ``names``: the fields of :data:`NAME_FIELDS` hold names."""
    if depth > MAX_DEPTH:
        raise InputError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        check_int(value, where)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"{where}: numbers are finite")
    elif isinstance(value, datetime):
        check_datetime(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            field = str(key)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise InputError(f"{where}: a key of an unexpected type")
            check_value(key, depth + 1, where=where)
            if len(field) > MAX_NAME_CHARS:
                raise InputError(f"{where}: a key is longer than {MAX_NAME_CHARS} characters")
            inner = field if where in ("value", "body") else f"{where}.{field}"
            if names and field in NAME_FIELDS:
                for text in _texts(item):
                    check_name(text, inner)
            check_value(item, depth + 1, where=inner, names=names and field not in FREE_FORM)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            check_value(item, depth + 1, where=where, names=names)


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        yield from (v for v in value if isinstance(v, str))


def check_param(name: str, value: str, where: str = "query") -> None:
    """One query parameter (or form field, header, command-line argument) as text: bounded, and
    an integer written in it fits 64 bits."""
    label = f"{where} {name!r}" if name else where
    check_text(name, label)
    check_text(value, label)
    if len(value) > MAX_PARAM_CHARS:
        raise InputError(f"{label} is longer than {MAX_PARAM_CHARS} characters")
    if _INTEGER.fullmatch(value.strip()) and len(value) < 4000:
        check_int(int(value), label)
    elif _INTEGER.fullmatch(value.strip()):
        raise InputError(f"{label}: {value[:20]}... does not fit 64 bits")
    if name in NAME_FIELDS:
        check_name(value, label)


def check_arguments(arguments: dict[str, Any], where: str = "argument") -> None:
    """A command line's parsed arguments (``vars(args)``): text as :func:`check_text`, integers that
    fit 64 bits, names (:data:`NAME_FIELDS`) as :func:`check_name`. Any length: a memory's text may be one."""
    for dest, value in arguments.items():
        label = f"{where} --{dest.replace('_', '-')}"
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str | int | float) and not isinstance(item, bool):
                check_value(item, where=label)
            if isinstance(item, str) and dest in NAME_FIELDS:
                check_name(item, label)


def check_path(path: str) -> None:
    """A request's path (its parameters are names and ids): no control characters."""
    check_text(path, "the path")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise InputError("the path holds a line break or another control character")


def bad_value(exc: BaseException) -> InputError | None:
    """The edge guard's last line: an error that only a bad value causes (the database refusing a
    value - a NUL, an out-of-range number or date, bad UTF-8 -, Python's date arithmetic overflowing,
    JSON nested past the interpreter's depth), found anywhere in ``exc``'s chain, as the 400 it
    should have been. Anything else: ``None`` (a 500)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, asyncpg.DataError):
            return InputError(f"a value was refused by the database: {current}".split("\n")[0][:300])
        if isinstance(current, OverflowError | UnicodeEncodeError | RecursionError):
            return InputError(
                f"a value is out of range: {type(current).__name__}", hint="see /openapi.json for each field's range"
            )
        current = current.__cause__ or current.__context__
    return None


def load_json(body: bytes | str, where: str = "the request body") -> Any:
    """``body`` parsed as JSON and checked (:func:`check_value`, names included)."""
    try:
        value = json.loads(body)
    except RecursionError:
        raise InputError(f"{where} is nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError):
        raise InputError(f"{where} is not valid JSON", hint="send a JSON object") from None
    check_value(value, where="body", names=True)
    return value


__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_DEPTH",
    "MAX_NAME_CHARS",
    "NAME_FIELDS",
    "bad_value",
    "check_arguments",
    "check_datetime",
    "check_int",
    "check_moment",
    "check_name",
    "check_param",
    "check_path",
    "check_text",
    "check_value",
    "load_json",
]
