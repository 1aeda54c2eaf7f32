"""Structured, quiet-by-default logging: one JSON object per line on stderr.

Events are short dotted names (``embedded_pg.start``) with their context in ``extra=``; the level
comes from ``CABRAIN_LOG_LEVEL`` (default WARNING, so a healthy command prints only its result).
Every string of a line (the event, its context, an exception's traceback) is passed through
:func:`cabrain.redact.redact` first: an error that quotes a model's answer or a server's reply
writes no key it held.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TextIO

from cabrain.redact import redact_deep

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        payload.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(redact_deep(payload), default=str, ensure_ascii=False)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (test capture, redirection)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def configure(level: str = "WARNING") -> None:
    """Install the JSON handler on the ``cabrain`` logger (idempotent)."""
    logger = logging.getLogger("cabrain")
    logger.setLevel(level)
    if not any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
    logger.propagate = False
