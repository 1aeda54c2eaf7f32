"""A dry run of a sync (``cabrain connectors sync --dry-run``, ``POST /v1/connectors/{name}/dry-run``):
what a sync would do now, found the way the sync finds it and with nothing written.

The source is listed and compared with the items the connector holds (:meth:`Sync.plan
<cabrain.connectors.sync.Sync.plan>`); each new or changed item is fetched and converted as a sync
stages it (:meth:`~cabrain.connectors.sync.Sync.pending`), and its parts compared with the parts
held by the rule indexing follows (:func:`~cabrain.connectors.sync.fate`): kept, revised or added;
a part gone from its item, and every part of an item gone from the source, is forgotten. No memory,
no ``connector_items`` row and no sync run is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cabrain.connectors.sync import Counts, Sync, fate, owned
from cabrain.store import connectors as sql

__all__ = ["DryRunReport", "Preview", "preview"]


@dataclass
class Preview:
    """What a sync would do. ``counts`` as a sync's (``skipped`` among them, by reason), but
    ``added`` is the parts that would go to the write decisions as new (a duplicate of a memory
    already held is then merged, not added); the lists name the parts (``key#anchor``) and the items
    deleted at the source, the first ``SHOWN`` of each."""

    counts: Counts = field(default_factory=Counts)
    added: list[str] = field(default_factory=list)
    revised: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)  # parts gone from a changed item, each part of a deleted one
    deleted: list[str] = field(default_factory=list)  # items gone from the source

    SHOWN: ClassVar[int] = 100

    def name(self, what: list[str], key: str, anchor: str | None = None) -> None:
        if len(what) < self.SHOWN:
            what.append(f"{key}#{anchor}" if anchor else key)

    def item(self, key: str, held: list[dict[str, Any]], pending: dict[str, Any], current: set[uuid.UUID]) -> None:
        """One new or changed item: its staged parts (``pending``) against the parts ``held``."""
        counts = self.counts
        old = {p["anchor"]: p for p in held}
        for part in pending["parts"]:
            found = fate(old.pop(part["anchor"], None), part, current)
            if found == "kept":
                counts.kept += 1
            elif found == "revised":
                counts.revised += 1
                self.name(self.revised, key, part["anchor"])
            else:
                counts.added += 1
                self.name(self.added, key, part["anchor"])
        self.forget(key, old.values(), current)
        if not pending["parts"]:
            counts.empty += 1
        counts.indexed += 1

    def forget(self, key: str, parts: Any, current: set[uuid.UUID]) -> None:
        for part in parts:
            if any(m in current for m in owned([part])):
                self.counts.forgotten += 1
                self.name(self.forgotten, key, part["anchor"])

    def to_json(self) -> dict[str, Any]:
        return {
            "counts": self.counts.to_json(),
            "added": list(self.added),
            "revised": list(self.revised),
            "forgotten": list(self.forgotten),
            "deleted": list(self.deleted),
        }


@dataclass(frozen=True)
class DryRunReport:
    """What a sync of ``connector`` would do now, and how long finding out took."""

    connector: str
    preview: Preview
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "status": "done",
            "dry_run": True,
            "seconds": self.seconds,
            **self.preview.to_json(),
        }


async def preview(sync: Sync) -> Preview:
    """What ``sync`` would do now, writing nothing; its progress as the sync's (the listing, then
    the items fetched)."""
    plan = await sync.plan()
    out = Preview(counts=plan.counts)
    with sync.progress.track(f"{sync.connector.name}: fetching", len(plan.changed)) as fetching:
        for start in range(0, len(plan.changed), sync.batch):
            chunk = plan.changed[start : start + sync.batch]
            docs = await sync.fetch(chunk, out.counts)
            held, current = await _held(sync, [d.ref.key for d in docs])
            for doc in docs:
                state = held.get(doc.ref.key)
                out.item(doc.ref.key, state.parts if state is not None else [], sync.pending(doc), current)
            fetching.advance(len(chunk))
    held, current = await _held(sync, plan.gone)
    for key in plan.gone:
        state = held.get(key)
        if state is not None and state.stage != "deleted":
            out.forget(key, state.parts, current)
            out.counts.deleted += 1
            out.name(out.deleted, key)
    return out


async def _held(sync: Sync, keys: Sequence[str]) -> tuple[dict[str, sql.ItemState], set[uuid.UUID]]:
    """The items held under ``keys``, and which of the memories they wrote are current."""
    if not keys:
        return {}, set()
    async with sync.engine.pool.acquire() as conn:
        held = await sql.some_items(conn, sync.connector.id, keys)
        mine = [m for state in held.values() for m in owned(state.parts)]
        current = {r["id"] for r in await conn.fetch(sql.CURRENT, mine)} if mine else set()
    return held, current
