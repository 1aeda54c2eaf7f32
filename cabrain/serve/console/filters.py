"""Reading the console's filter fields (query strings) into CaBrain's types, with clear errors.

A bad value raises :class:`FieldError`, which names its field: the page is then shown again
without it, its form keeping what was typed (:mod:`cabrain.serve.console.routing`)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

from cabrain import edge
from cabrain.errors import InputError
from cabrain.store.browse import BrowseFilters
from cabrain.types import MemoryType, Network, RecallMode

NETWORKS = [n.value for n in Network]
MEMORY_TYPES = [t.value for t in MemoryType]
MODES = [m.value for m in RecallMode]


class FieldError(InputError):
    """A filter field's value is not one the page can use."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def field(params: Any, name: str) -> str:
    value = params.get(name)
    return value.strip() if isinstance(value, str) else ""


def choice(params: Any, name: str, allowed: list[str]) -> str:
    value = field(params, name)
    if value and value not in allowed:
        raise FieldError(name, f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return value


def day(params: Any, name: str, *, end: bool = False) -> datetime | None:
    """A date (``YYYY-MM-DD``, the day's start in UTC; ``end``: the next day's start) or a full ISO time."""
    value = field(params, name)
    if not value:
        return None
    try:
        if len(value) == 10:
            parsed = datetime.combine(datetime.fromisoformat(value).date(), time(), tzinfo=UTC)
            return _kept(name, parsed + timedelta(days=1) if end else parsed)
        parsed = datetime.fromisoformat(value)
    except (ValueError, OverflowError):
        raise FieldError(name, f"{name}: {value!r} is not a date (YYYY-MM-DD) CaBrain keeps") from None
    return _kept(name, parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))


def number(params: Any, name: str, *, low: float, high: float, integer: bool = False) -> float | None:
    value = field(params, name)
    if not value:
        return None
    try:
        parsed = int(value) if integer else float(value)
    except ValueError:
        raise FieldError(name, f"{name}: {value!r} is not a {'whole ' if integer else ''}number") from None
    if not low <= parsed <= high:
        raise FieldError(name, f"{name} must be between {low:g} and {high:g}, got {value}")
    return parsed


def _kept(name: str, moment: datetime) -> datetime:
    """``moment``, when CaBrain can keep it (:func:`cabrain.edge.check_datetime`)."""
    try:
        return edge.check_datetime(moment)
    except InputError as exc:
        raise FieldError(name, f"{name}: {exc.message}") from None


def flag(params: Any, name: str) -> bool:
    return field(params, name) in {"1", "on", "true", "yes"}


def browse_filters(params: Any) -> BrowseFilters:
    network, memory_type, source_kind = (
        choice(params, "network", NETWORKS),
        choice(params, "memory_type", MEMORY_TYPES),
        field(params, "source_kind"),
    )
    return BrowseFilters(
        networks=(Network(network),) if network else (),
        memory_types=(MemoryType(memory_type),) if memory_type else (),
        source_kinds=(source_kind,) if source_kind else (),
        valid_from=day(params, "from"),
        valid_to=day(params, "to", end=True),
        min_importance=number(params, "min_importance", low=0, high=1),
        history=flag(params, "history"),
        as_of=as_of(params),
    )


def as_of(params: Any) -> datetime | None:
    """The ``as_of`` field: a moment (naive: UTC), or a date meaning the end of that day (UTC)."""
    return day(params, "as_of", end=True)


def form_values(params: Any, names: list[str]) -> dict[str, str]:
    """The fields as given, to fill the form again."""
    return {name: field(params, name) for name in names}
