"""Calls to a source, retried the way its failures ask.

A rate limit (429) and a server error (5xx) or a lost connection are retried with exponential
backoff and full jitter, waiting at least what ``Retry-After`` asked; a refused credential
(:class:`~cabrain.errors.SourceAuthError`) and any other 4xx fail at once. Sources wrap each request
they make in :meth:`Retry.call`, so a listing's tenth page is retried alone, not the listing.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from cabrain.errors import SourceError

__all__ = ["Retry", "retry_after"]

T = TypeVar("T")
log = logging.getLogger("cabrain.connectors")


@dataclass(frozen=True)
class Retry:
    """``attempts`` tries in all; waits ``base_s * 2**n`` (jittered, capped at ``max_s``) between
    them. ``sleep`` and ``jitter`` are injectable so tests neither wait nor guess."""

    attempts: int = 5
    base_s: float = 0.5
    max_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    jitter: Callable[[float], float] = field(default=lambda cap: random.uniform(0, cap), compare=False)

    def delay(self, attempt: int, error: SourceError) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 1)."""
        wait = self.jitter(min(self.max_s, self.base_s * 2 ** (attempt - 1)))
        if error.retry_after is not None:
            wait = max(wait, min(error.retry_after, self.max_s * 4))
        return wait

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()``, tried again while it raises a transient :class:`SourceError`; ``what`` names the
        call in the log and the final error."""
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except SourceError as exc:
                if not exc.transient or attempt == self.attempts:
                    if exc.transient:
                        raise SourceError(
                            f"{exc.message if exc.message.startswith(what) else f'{what}: {exc.message}'}"
                            f" (gave up after {attempt} tries)",
                            hint=exc.hint,
                            status_code=exc.status_code,
                        ) from exc
                    raise
                wait = self.delay(attempt, exc)
                log.info(
                    "source retry",
                    extra={"call": what, "attempt": attempt, "status": exc.status_code, "wait_s": round(wait, 3)},
                )
                self.sleep(wait)
        raise AssertionError("unreachable")


def retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header's seconds (a number; an HTTP date is read as "soon": 1 s)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return 1.0
