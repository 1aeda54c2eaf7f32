"""Running the sleep cycle on a schedule: ``cabrain sleep --schedule`` and ``cabrain.jobs.sleep_scheduler``
(and workflow learning: ``cabrain workflows learn --every``).

A long-running loop: wait until the next run time (daily at ``CABRAIN_SLEEP_AT``, HH:MM UTC, or
every ``--every`` seconds), run one cycle, log its summary, repeat. A run that fails is logged and
the loop goes on; a run that outlasts the interval delays the next one (runs never overlap; two
schedulers on one cluster are kept apart per namespace by the cycle's own lock). SIGTERM and
SIGINT stop it between runs, or end the wait at once.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime, time, timedelta

log = logging.getLogger(__name__)


def parse_at(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes), tzinfo=UTC)


def next_run(
    now: datetime, *, at: time | None = None, every: timedelta | None = None, last: datetime | None = None
) -> datetime:
    """The next moment a cycle should start: ``every`` after the last start (at once if none), or
    the next ``at`` (UTC) strictly after ``now``."""
    if every is not None:
        return now if last is None else max(now, last + every)
    assert at is not None
    today = datetime.combine(now.astimezone(UTC).date(), at.replace(tzinfo=None), tzinfo=UTC)
    return today if today > now else today + timedelta(days=1)


class Scheduler:
    """Runs ``run_once()`` at each scheduled moment until stopped or ``max_runs`` are done."""

    def __init__(
        self,
        run_once: Callable[[], str],
        *,
        at: time | None = None,
        every: timedelta | None = None,
        max_runs: int | None = None,
        say: Callable[[str], None] = lambda line: None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        label: str = "sleep run",
    ) -> None:
        if (at is None) == (every is None):
            raise ValueError("give exactly one of at and every")
        self.run_once, self.at, self.every, self.max_runs = run_once, at, every, max_runs
        self.say, self.clock, self.label = say, clock, label
        self.stopped = threading.Event()
        self.runs = 0
        self.failures = 0

    def stop(self, *_: object) -> None:
        self.stopped.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and Ctrl-C end the loop after the run in progress (only the main thread may set
        handlers: a loop run from another thread is stopped through :meth:`stop`)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.stop)

    def loop(self) -> int:
        """Run until stopped; returns the number of runs that failed."""
        last = None
        while not self.stopped.is_set() and (self.max_runs is None or self.runs < self.max_runs):
            due = next_run(self.clock(), at=self.at, every=self.every, last=last)
            wait = (due - self.clock()).total_seconds()
            if wait > 0:
                self.say(f"next {self.label} at {due.isoformat(timespec='seconds')}")
                if self.stopped.wait(wait):
                    break
            last = self.clock()
            self.runs += 1
            try:
                self.say(self.run_once())
            except Exception as exc:  # noqa: BLE001 - one failed run must not end the schedule
                self.failures += 1
                self.say(f"{self.label} failed: {exc}")
                log.error("scheduled run failed", extra={"what": self.label, "error": str(exc), "run": self.runs})
        return self.failures


__all__ = ["Scheduler", "next_run", "parse_at"]
