"""Namespace names, and who may create which (schema 0009 enforces the same in PostgreSQL).

A namespace is created by the first agent that asks for its name, and that agent owns it. Names
that start with ``@<agent id>/`` are *personal*: only that agent can create them, so nobody can take
one first. Capture binds the names it derives from a project (``github.com/acme/api``) to the
capturing agent this way (``@claude-code/github.com/acme/api``).

Standard library only: imported by faces that must start fast.
"""

from __future__ import annotations

import re

MAX_CHARS = 200
PATTERN = r"^(@[A-Za-z0-9][A-Za-z0-9._@-]{0,127}/)?[A-Za-z0-9][A-Za-z0-9._:/@-]*$"
NAME_RE = re.compile(PATTERN)
HINT = (
    "1-200 characters: letters, digits and . _ : / @ - starting with a letter or digit; "
    "or a personal namespace: '@<your agent id>/' followed by such a name"
)


def is_valid(name: object) -> bool:
    return isinstance(name, str) and len(name) <= MAX_CHARS and NAME_RE.fullmatch(name) is not None


def personal_owner(name: str) -> str | None:
    """The agent a personal namespace (``@alice/notes``) belongs to; None for any other name."""
    if not name.startswith("@") or "/" not in name:
        return None
    return name[1:].split("/", 1)[0]


def personal(agent: str, name: str) -> str:
    """``name`` bound to ``agent``: ``@agent/name`` (cut to the longest name allowed)."""
    prefix = f"@{agent}/"
    return (prefix + name)[:MAX_CHARS].rstrip("/.-")
