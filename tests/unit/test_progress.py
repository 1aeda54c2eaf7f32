"""Progress of long work: lines with rate and time left to a line callable, bars on a terminal,
silence when quiet or not on a terminal."""

from __future__ import annotations

import io

from cabrain.progress import Bars, Events, Lines, Progress, as_progress, for_terminal


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_count_is_said_at_most_every_few_seconds_with_its_rate_and_time_left() -> None:
    said: list[str] = []
    clock = Clock()
    progress = Lines(said.append, every_s=5.0, clock=clock)
    with progress.track("importing letta", total=100, unit="records") as tracker:
        for _ in range(10):
            clock.now += 1.0
            tracker.advance(5)
    assert said[0] == "importing letta: 25/100 records (5.0/s, about 15 s left)"
    assert said[1] == "importing letta: 50/100 records (5.0/s, about 10 s left)"
    assert said[-1] == "importing letta: 50/100 records (5.0/s, 10 s in all)"
    assert len(said) == 3


def test_events_for_a_page_come_at_once_then_at_most_every_quarter_second_and_at_the_end() -> None:
    events: list[dict] = []
    clock = Clock()
    progress = Events(events.append, clock=clock)
    progress("checking the export")
    with progress.track("importing mem0", total=10, unit="records") as tracker:
        for _ in range(10):
            clock.now += 0.1
            tracker.advance()
    assert events[0] == {"line": "checking the export"}
    counts = events[1:]
    assert counts[0] == {"what": "importing mem0", "done": 0, "total": 10, "unit": "records", "final": False}
    assert [e["done"] for e in counts] == [0, 3, 6, 9, 10]  # each 0.3 s apart (not 0.2), then the end
    assert counts[-1]["final"] and not any(e["final"] for e in counts[:-1])


def test_short_work_says_nothing_and_lines_pass_through() -> None:
    said: list[str] = []
    progress = as_progress(said.append)
    progress("listed 3 items")
    with progress.track("syncing", total=3) as tracker:
        tracker.update(3)
    assert said == ["listed 3 items"]


def test_a_count_of_unknown_size_has_no_time_left() -> None:
    said: list[str] = []
    clock = Clock()
    progress = Lines(said.append, every_s=1.0, clock=clock)
    tracker = progress.track("exporting", unit="memories")
    clock.now = 2.0
    tracker.update(4000)
    assert said == ["exporting: 4,000 memories (2,000.0/s)"]


def test_quiet_and_not_a_terminal_show_no_counts() -> None:
    assert type(as_progress(None)) is Progress
    assert type(for_terminal(quiet=True)) is Progress
    pipe = io.StringIO()
    progress = for_terminal(stream=pipe)
    progress("a line worth saying")
    with progress.track("importing", total=10) as tracker:
        tracker.advance(10)
    assert pipe.getvalue() == "a line worth saying\n"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_with_rate_and_time_left() -> None:
    screen = Tty()
    progress = for_terminal(stream=screen)
    assert isinstance(progress, Bars)
    with progress:
        progress("starting")
        with progress.track("importing mem0", total=4, unit="records") as tracker:
            tracker.advance(4)
    out = screen.getvalue()
    assert "starting" in out
    assert "importing mem0" in out and "4/4" in out and "records/s" in out
