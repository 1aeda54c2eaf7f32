"""When the sleep scheduler runs, and that a failed run does not end the schedule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cabrain.sleep.schedule import Scheduler, next_run, parse_at

AT = parse_at("03:00")


def test_daily_runs_go_to_the_next_time_of_day_in_utc() -> None:
    assert next_run(datetime(2026, 11, 30, 2, 59, tzinfo=UTC), at=AT) == datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
    assert next_run(datetime(2026, 11, 30, 3, 0, tzinfo=UTC), at=AT) == datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    assert next_run(datetime(2026, 12, 31, 23, 0, tzinfo=UTC), at=AT) == datetime(2027, 1, 1, 3, 0, tzinfo=UTC)
    cairo = datetime(2026, 11, 30, 4, 30, tzinfo=UTC).astimezone(__import__("zoneinfo").ZoneInfo("Africa/Cairo"))
    assert next_run(cairo, at=AT) == datetime(2026, 12, 1, 3, 0, tzinfo=UTC)  # 06:30 in Cairo is 04:30 UTC


def test_interval_runs_never_overlap() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    every = timedelta(hours=1)
    assert next_run(now, every=every) == now  # the first at once
    assert next_run(now, every=every, last=now - timedelta(minutes=10)) == now + timedelta(minutes=50)
    assert next_run(now, every=every, last=now - timedelta(hours=3)) == now  # a long run: the next at once


def test_a_failed_run_is_counted_and_the_schedule_goes_on() -> None:
    calls = []

    def once() -> str:
        calls.append(len(calls))
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        return "ok"

    lines: list[str] = []
    scheduler = Scheduler(once, every=timedelta(seconds=0.01), max_runs=3, say=lines.append)
    assert scheduler.loop() == 1
    assert calls == [0, 1, 2] and "sleep run failed: the database went away" in lines


def test_stop_ends_the_wait_at_once() -> None:
    scheduler = Scheduler(lambda: "ok", at=AT, clock=lambda: datetime(2026, 11, 30, 3, 1, tzinfo=UTC))
    scheduler.stop()
    assert scheduler.loop() == 0 and scheduler.runs == 0
    with pytest.raises(ValueError):
        Scheduler(lambda: "ok")
