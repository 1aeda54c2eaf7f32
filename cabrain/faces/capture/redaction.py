"""Redaction as capture does it: on top of :mod:`cabrain.redact` (the shared redactor), values cut
to a length for a memory or a context line. Standard library only (the hook's path).

Everything an event yields is redacted whole before anything cuts it short (a token cut in half
no longer looks like a token); the service redacts again what it stores.
"""

from __future__ import annotations

import json
import re

from cabrain.redact import PRIVATE, redact

TYPE_CHECKING = False  # typing itself costs the hook a few milliseconds to import
if TYPE_CHECKING:
    from typing import Any

REDACT_WINDOW = 65536  # characters of one value redacted (and kept) at most


def clean(value: Any, n: int) -> str:
    """``value`` (text, or anything JSON-able) redacted, whitespace folded, cut to ``n`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > REDACT_WINDOW:
        rest = text[REDACT_WINDOW:]
        if "private" in rest.lower() and _stray_close(rest):
            return PRIVATE  # a closing tag past the window hides everything before it
        text = text[:REDACT_WINDOW]
    return _short(redact(text), n)


def _stray_close(text: str) -> bool:
    return re.search(r"<\s*/\s*private\b", text, re.IGNORECASE) is not None


def _short(value: Any, n: int = 160) -> str:  # only ever on redacted text (see clean)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
