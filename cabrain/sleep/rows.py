"""What the knowledge steps (:mod:`cabrain.sleep.consolidate`, :mod:`cabrain.sleep.dedup`,
:mod:`cabrain.sleep.reconsolidate`) share: readership groups, stored vectors, a current row's origin
(the current rows and the other statements they share live in :mod:`cabrain.store.sleep`).

Scoping is kept: memories are only clustered, merged or compared within one owner-and-visibility
group (:func:`readership_groups`: a private memory never feeds a fact another agent can read), and a
memory is only superseded by one at least as widely visible (``WIDTH``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import asyncpg
import numpy as np

from cabrain.write.decision.origin import Origin, origin_of

WIDTH = {"private": 0, "team": 1, "global": 2}


def vec(value: Any) -> np.ndarray:
    """A stored vector (pgvector's ``Vector``, or an array) as float32."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def readership_groups(rows: Sequence[asyncpg.Record]) -> dict[tuple[str | None, str], list[asyncpg.Record]]:
    """Rows by who can read them: (owner, visibility); only private rows are kept apart by owner."""
    out: dict[tuple[str | None, str], list[asyncpg.Record]] = defaultdict(list)
    for r in rows:
        out[(r["owner_agent_id"] if r["visibility"] == "private" else None, r["visibility"])].append(r)
    return out


__all__ = [
    "WIDTH",
    "readership_groups",
    "unit_rows",
    "vec",
]


def origin(row: Mapping[str, Any], record_kinds: Iterable[str]) -> Origin:
    """A ``CURRENT`` row's origin (:mod:`cabrain.store.sleep`): a turn's speaker, a record's identity (write.decision.origin)."""
    return origin_of(row["source_kind"], row["source_ref"], row["metadata"], record_kinds)
