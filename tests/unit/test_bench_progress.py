"""The bulk loader's progress: a bar redrawn in place on a terminal, plain lines in logs."""

import io

from cabrain.bench import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_and_lines_elsewhere(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    for done in (10, 50, 100):
        progress.bar("loaded memories", done, 100, False, " (5/s)")
    text = terminal.getvalue()
    assert text.count("\r") == 3 and text.endswith("100/100 (5/s)\n") and text.count("\n") == 1
    assert "[###############...............] 50/100" in text
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    progress.bar("loaded memories", 50, 100, False)
    progress.bar("loaded memories", 100, 100, True)  # quiet: nothing
    assert log.getvalue() == "  loaded memories 50/100\n"
