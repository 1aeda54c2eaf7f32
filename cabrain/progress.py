"""Progress of long work (an import, a sync, an export, a backup): a bar with its rate and the time
left on a terminal, nothing when stderr is not one.

Work that takes long takes a ``progress`` argument: a :class:`Progress`, or any callable that takes a
line (a test's ``list.append``, a log), which :func:`as_progress` wraps so the same work reports to
both. It says two things:

- ``progress(line)``: a line worth saying once ("listed 1,204 items: 31 changed");
- ``progress.track(what, total, unit)``: a count of work that advances, shown as a bar on a terminal
  (rich), as a line with rate and time left at most every ``every_s`` to a line callable, as
  events to a page (:class:`Events`: the console's import streams them), and not at all when quiet.

:func:`for_terminal` is what a command line uses: bars on a terminal, silence otherwise (a cron job's
log gets the command's summary, not a line every few seconds).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any, TypeAlias

__all__ = ["Bars", "Events", "Lines", "Progress", "Say", "Tracker", "as_progress", "for_terminal"]


class Tracker:
    """One count of work under way; this base counts and shows nothing."""

    def __init__(self, total: int | None = None) -> None:
        self.total = total
        self.done = 0

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._show(final=False)

    def update(self, done: int, total: int | None = None) -> None:
        """Set where the work is (and, when it became known, how much there is)."""
        self.done = done
        if total is not None:
            self.total = total
        self._show(final=False)

    def close(self) -> None:
        self._show(final=True)

    def _show(self, *, final: bool) -> None:
        return None

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Progress:
    """Where progress goes. This base is silent: lines and counts are dropped."""

    def __call__(self, line: str) -> None:
        return None

    def track(self, what: str, total: int | None = None, unit: str = "items") -> Tracker:
        return Tracker(total)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        return None


Say: TypeAlias = Progress | Callable[[str], None]
"""What a ``progress`` argument may be."""


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class _LineTracker(Tracker):
    def __init__(self, out: Lines, what: str, total: int | None, unit: str) -> None:
        super().__init__(total)
        self.out, self.what, self.unit = out, what, unit
        self.started = self.said = out.clock()

    def _show(self, *, final: bool) -> None:
        now = self.out.clock()
        if not final and now - self.said < self.out.every_s:
            return
        if final and self.said == self.started and now - self.started < self.out.every_s:
            return  # short work: the caller's summary says it all
        self.said = now
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        line = f"{self.what}: {self.done:,}" + (f"/{self.total:,}" if self.total is not None else "")
        line += f" {self.unit} ({rate:,.1f}/s"
        if not final and self.total is not None and rate > 0 and self.done < self.total:
            line += f", about {_duration((self.total - self.done) / rate)} left"
        line += f", {_duration(elapsed)} in all)" if final else ")"
        self.out.say(line)


class Lines(Progress):
    """Progress as lines to ``say``: each line as it comes, each count at most every ``every_s``
    seconds with its rate and the time left (and once more at its end, when it took that long)."""

    def __init__(
        self, say: Callable[[str], None], *, every_s: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.say, self.every_s, self.clock = say, every_s, clock

    def __call__(self, line: str) -> None:
        self.say(line)

    def track(self, what: str, total: int | None = None, unit: str = "items") -> Tracker:
        return _LineTracker(self, what, total, unit)


class _EventTracker(Tracker):
    def __init__(self, out: Events, what: str, total: int | None, unit: str) -> None:
        super().__init__(total)
        self.out, self.what, self.unit = out, what, unit
        self.said: float | None = None

    def _show(self, *, final: bool) -> None:
        now = self.out.clock()
        if not final and self.said is not None and now - self.said < self.out.every_s:
            return
        self.said = now
        self.out.emit({"what": self.what, "done": self.done, "total": self.total, "unit": self.unit, "final": final})


class Events(Progress):
    """Progress as events (dicts) to ``emit``, for a page that draws them: ``{"line": ...}`` for each
    line, and ``{"what", "done", "total", "unit", "final"}`` for a count: its first update at once,
    then at most every ``every_s`` seconds, and its end."""

    def __init__(
        self,
        emit: Callable[[dict[str, Any]], None],
        *,
        every_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit, self.every_s, self.clock = emit, every_s, clock

    def __call__(self, line: str) -> None:
        self.emit({"line": line})

    def track(self, what: str, total: int | None = None, unit: str = "items") -> Tracker:
        tracker = _EventTracker(self, what, total, unit)
        tracker.update(0)
        return tracker


def as_progress(progress: Say | None) -> Progress:
    """``progress`` as a :class:`Progress`: itself, a line callable wrapped in :class:`Lines`, or
    silence for None."""
    if progress is None:
        return Progress()
    if isinstance(progress, Progress):
        return progress
    return Lines(progress)


class _BarTracker(Tracker):
    def __init__(self, bars: Any, task: Any, total: int | None) -> None:
        super().__init__(total)
        self.bars, self.task = bars, task

    def _show(self, *, final: bool) -> None:
        self.bars.update(self.task, completed=self.done, total=self.total)
        if final:
            self.bars.stop_task(self.task)


class Bars(Progress):
    """Bars on a terminal (rich): what, a bar, done of total, the rate and the time left. Lines are
    printed above the bars. Use as a context manager: the bars are drawn between enter and exit."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        from rich.console import Console  # lazy: the command line's start-up time
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress
        from rich.text import Text

        class Rate(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                unit = task.fields.get("unit", "items")
                return Text(f"{speed:,.1f} {unit}/s" if speed else f"- {unit}/s")

        self.console = Console(file=stream or sys.stderr)
        self.bars = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            Rate(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )

    def __call__(self, line: str) -> None:
        self.bars.console.print(line, markup=False, highlight=False)

    def track(self, what: str, total: int | None = None, unit: str = "items") -> Tracker:
        task = self.bars.add_task(what, total=total, unit=unit)
        return _BarTracker(self.bars, task, total)

    def __enter__(self) -> Bars:
        self.bars.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.bars.stop()


def for_terminal(quiet: bool = False, stream: IO[str] | None = None) -> Progress:
    """A command line's progress: nothing when ``quiet``; bars when ``stream`` (stderr) is a
    terminal; otherwise its lines only, and no counts (quiet in a log or a pipe)."""
    stream = stream or sys.stderr
    if quiet:
        return Progress()
    if stream.isatty():
        return Bars(stream)

    class _LinesOnly(Progress):
        def __call__(self, line: str) -> None:
            print(line, file=stream, flush=True)

    return _LinesOnly()
