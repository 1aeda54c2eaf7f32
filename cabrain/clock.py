"""What time it is, as a value code can be handed.

Code whose behaviour depends on "now" (how old a memory is, which months need partitions, when a
memory without a ``valid_at`` happened) takes a ``clock``: a function that returns an aware
datetime, :func:`utc_now` by default. SQL gets the clock's value as a parameter instead of calling
``now()`` for such decisions, so a test (or a replay) can run the whole brain as of any date.
Timestamps that only record when something happened (``created_at`` defaults, ``finished_at``)
keep the database's clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def utc_today(clock: Clock = utc_now) -> date:
    """The clock's date in UTC (memory partitions are UTC months)."""
    return clock().astimezone(UTC).date()


__all__ = ["Clock", "utc_now", "utc_today"]
