"""The edge guard: values from outside checked before anything is counted or stored."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from cabrain.errors import InputError

MAX_DEPTH = 64
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def check_datetime(value: datetime) -> datetime:
    """``value`` when PostgreSQL and Python hold it with a day to spare on either side."""
    try:
        utc = value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except (OverflowError, ValueError):
        raise InputError(f"{value.isoformat()} is outside the times CaBrain keeps") from None
    if not EARLIEST <= utc <= LATEST:
        raise InputError(f"{value.isoformat()} is outside the times CaBrain keeps (0001-01-02 to 9999-12-30)")
    return value


def check_value(value: Any, depth: int = 0) -> None:
    """Strings without NUL or lone surrogates, integers that fit 64 bits, finite floats, no deeper
    than MAX_DEPTH."""
    if depth > MAX_DEPTH:
        raise InputError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        if "\x00" in value:
            raise InputError("text holds a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("text holds a lone surrogate (not UTF-8)") from None
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise InputError(f"{value} does not fit 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InputError("numbers are finite")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_value(key, depth + 1)
            check_value(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            check_value(item, depth + 1)
