"""The shape a kind of task's answers take, as a JSON Schema a local model's server can hold its
answer to (constrained decoding: the ``constrained`` chain, :mod:`cabrain.workflows.chains`).

A small model often knows the answer and misses the form: its own keys for an invoice's fields, a
label followed by an explanation. The kind's frontier answers (its references) say what the form is:

- ``json``: the schema of the references' values: an object's keys (those in every reference are
  required, no others allowed), arrays by their items, strings, integers, numbers, booleans;
- ``label``: one of the labels the references gave, or the task lists ("one of: a, b, c").

Other task types have no schema (None). When learning from a reference, the schema comes from the
kind's *other* references (the answer being scored never shapes its own constraint), as it would when
a task of that kind is routed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

from cabrain.store import workflows as sql
from cabrain.workflows.scoring import label_of, load_json

MAX_DEPTH = 8
MAX_LABELS = 64
REFERENCES = 50  # a kind's shape comes from its latest references, at most this many
_LISTED = re.compile(r"\b(?:one of|among|from these|from the labels?)\s*:?\s*([^\n]+?)(?:\.(?:\s|$)|\n|$)", re.I)


def of_references(task_type: str, references: Sequence[str], description: str = "") -> dict[str, Any] | None:
    """The JSON Schema answers of ``task_type`` are held to, from the kind's ``references`` (and,
    for labels, those ``description`` lists); None when there is none to give."""
    if task_type == "json":
        values = []
        for text in references:
            try:
                values.append(load_json(text))
            except ValueError:
                continue
        return _schema(values, 0) if values else None
    if task_type == "label":
        labels = _unique([label_of(r) for r in references] + listed_labels(description))
        labels = [x for x in labels if x and len(x.split()) <= 4][:MAX_LABELS]
        return {"type": "string", "enum": labels} if labels else None
    return None


async def of_kind(
    conn: asyncpg.Connection, cluster_id: int | None, task_type: str, description: str, *, besides: Any = None
) -> dict[str, Any] | None:
    """The shape of the kind ``cluster_id`` from its current references (but task ``besides``'s)."""
    if task_type not in ("json", "label"):
        return None
    rows = await conn.fetch(sql.SHAPE_REFERENCES, cluster_id, besides, task_type, REFERENCES)
    return of_references(task_type, [r["output"] for r in rows], description)


def listed_labels(description: str) -> list[str]:
    """The labels a task lists after "one of:" (or "among"), lower-cased: "one of: billing, bug or
    shipping" -> billing, bug, shipping; none unless at least two are listed."""
    match = _LISTED.search(description)
    if not match:
        return []
    items = [x.strip(" \t\"'`*_()[]").casefold() for x in re.split(r",|/|;|\bor\b", match.group(1))]
    items = [x for x in items if x and len(x.split()) <= 3]
    return items if len(items) >= 2 else []


def answer_of(task_type: str, output: str) -> str:
    """A constrained answer as the task's type reads it: a label's JSON string unquoted."""
    if task_type == "label":
        try:
            value = json.loads(output)
        except ValueError:
            return output
        return value if isinstance(value, str) else output
    return output


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


_KINDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("boolean", bool),  # before integer: a bool is an int to Python
    ("integer", int),
    ("number", float),
    ("string", str),
    ("array", list),
    ("object", dict),
)


def _kind(value: Any) -> str:
    """A JSON value's type, as JSON Schema names it."""
    return next((name for name, types in _KINDS if isinstance(value, types)), "null")


def _schema(values: list[Any], depth: int) -> dict[str, Any]:
    """The narrowest schema every one of ``values`` fits (any value past MAX_DEPTH)."""
    if depth >= MAX_DEPTH or not values:
        return {}
    kinds = {_kind(v) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    if len(kinds) > 1:
        return {"anyOf": [_schema([v for v in values if _kind(v) in _group(k)], depth) for k in sorted(kinds)]}
    kind = kinds.pop()
    if kind == "object":
        keys = _unique(k for v in values for k in v)
        required = [k for k in keys if all(k in v for v in values)]
        return {
            "type": "object",
            "properties": {k: _schema([v[k] for v in values if k in v], depth + 1) for k in keys},
            "required": required,
            "additionalProperties": False,
        }
    if kind == "array":
        items = [x for v in values for x in v]
        return {"type": "array", "items": _schema(items, depth + 1)} if items else {"type": "array"}
    return {"type": kind}


def _group(kind: str) -> set[str]:
    return {"integer", "number"} if kind == "number" else {kind}


__all__ = ["answer_of", "listed_labels", "of_kind", "of_references"]
