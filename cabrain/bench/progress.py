"""Progress on stderr while a benchmark runs (nothing with ``quiet``)."""

from __future__ import annotations

import sys


def say(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def bar(label: str, done: int, total: int, quiet: bool, extra: str = "") -> None:
    """A progress bar redrawn in place on a terminal; one line per step otherwise (logs)."""
    if quiet:
        return
    line = f"  {label} {done}/{total}{extra}"
    if sys.stderr.isatty():
        filled = int(30 * done / max(total, 1))
        end = "\n" if done >= total else ""
        print(
            f"\r  {label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}{extra}",
            end=end,
            file=sys.stderr,
            flush=True,
        )
    else:
        print(line, file=sys.stderr, flush=True)
