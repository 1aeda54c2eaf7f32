"""SQL with named parameters, for statements built from shared fragments.

asyncpg takes positional parameters (``$1``, ``$2``...). A fragment shared by several statements
(the access check and the recall filter of :mod:`cabrain.store.access`) cannot know which
positions the statement around it uses, so shared fragments and the statements that include them
name their parameters instead (``:namespace``, ``:agent``, ``:limit``) and :class:`Statement`
numbers them once, at import time::

    NEAREST = Statement(f"SELECT id FROM memories m WHERE {RECALL_FILTER} LIMIT :limit")
    rows = await conn.fetch(NEAREST.sql, *NEAREST.args(**filters.params(), limit=10))

A name is ``:`` then a lower-case identifier not preceded by ``:`` or a word character, so casts
(``::uuid``), times in literals (``'12:30'``) and ``$n`` are left alone. :meth:`Statement.args`
refuses a missing or an unknown name, so a statement and its call cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NAME = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
POSITIONAL = re.compile(r"\$\d")


class Statement:
    """One SQL statement with named parameters, compiled to asyncpg's positional form."""

    __slots__ = ("names", "sql")

    def __init__(self, text: str) -> None:
        if POSITIONAL.search(text):
            raise ValueError("a Statement names its parameters (:name); it cannot also use $n")
        names: list[str] = []

        def number(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"

        self.sql = NAME.sub(number, text)
        self.names = tuple(names)

    def args(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> tuple[Any, ...]:
        """The positional arguments for :attr:`sql`, from ``values`` and ``named`` (named win)."""
        given = {**values, **named} if values else named
        missing = [n for n in self.names if n not in given]
        unknown = [n for n in given if n not in self.names]
        if missing or unknown:
            raise TypeError(f"statement parameters: missing {missing}, unknown {unknown}; it takes {list(self.names)}")
        return tuple(given[n] for n in self.names)

    def __repr__(self) -> str:
        return f"Statement({self.names})"
