"""Conversation context on the write path: the turns before a turn, indexed with it.

A memory that is a turn of a conversation names its sitting in ``metadata.thread`` (a chat thread,
a Claude Code session, a meeting). Turns are numbered in the order they are retained
(``memories.thread_turn``), and each new turn is keyword-indexed with the text of the
``CABRAIN_THREAD_CONTEXT_TURNS`` turns before it: an answer ("Three times a week") is found by the
words of the question it answers ("How often do you work out?"). The memory itself stays the turn;
only what it can be found by grows.

Only turns by the same writer with the same visibility, current and hot, lend their words: a
memory is never findable by words its readers may not read, and no agent can plant words in
another agent's memories. The namespace's writer lock (held by every write transaction) makes the
numbering race-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from cabrain.errors import InputError
from cabrain.search import speakers
from cabrain.store import memories as sql

MAX_FIELD_CHARS = 200


HINTS = {
    "thread": "name the conversation the memory belongs to: a chat thread, a session id, a meeting",
    "speaker": "name who said it: a person, an agent, user or assistant",
}


def _field(metadata: Mapping[str, Any], name: str, where: str = "") -> str | None:
    value = metadata.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_FIELD_CHARS:
        raise InputError(
            f"{where}metadata.{name} must be a non-empty string of at most {MAX_FIELD_CHARS} characters",
            hint=HINTS[name],
        )
    return value


def thread_of(metadata: Mapping[str, Any]) -> str | None:
    """The memory's thread, checked: a non-empty string of at most 200 characters, or None."""
    return _field(metadata, "thread")


def check(metadata: Mapping[str, Any], where: str) -> None:
    """Refuse a malformed ``metadata.thread`` or ``metadata.speaker`` (before any write)."""
    _field(metadata, "thread", f"{where}: ")
    _field(metadata, "speaker", f"{where}: ")


@dataclass
class _Thread:
    next_turn: int
    # its latest turns as (owner, visibility, content), oldest first
    recent: list[tuple[str | None, str, str]] = field(default_factory=list)


class ThreadContext:
    """The threads one write transaction touches: each one's next turn number and latest turns,
    read once from the store and then kept as the transaction writes."""

    def __init__(self, conn: asyncpg.Connection, *, turns: int, chars: int) -> None:
        self.conn, self.turns, self.chars = conn, turns, chars
        self._threads: dict[tuple[str, str], _Thread] = {}
        self._keep = max(turns * 4, 8)  # other writers' turns may sit between one writer's

    async def _load(self, namespace: str, thread: str) -> _Thread:
        key = (namespace, thread)
        state = self._threads.get(key)
        if state is None:
            rows = await self.conn.fetch(sql.LATEST_TURNS, namespace, thread, self._keep)
            state = _Thread(next_turn=(rows[0]["thread_turn"] + 1) if rows else 1)
            state.recent = [(r["owner_agent_id"], r["visibility"], r["content"]) for r in reversed(rows) if r["usable"]]
            self._threads[key] = state
        return state

    async def place(
        self, namespace: str, owner: str, visibility: str, metadata: Mapping[str, Any], content: str
    ) -> tuple[str, int | None]:
        """A new memory's place in its thread: the context it is indexed with and its turn number
        (``("", None)`` when it belongs to no thread). Call once per stored memory, in order."""
        thread = thread_of(metadata)
        if thread is None:
            return "", None
        state = await self._load(namespace, thread)
        turn = state.next_turn
        state.next_turn += 1
        context = ""
        if self.turns:
            before = [c for o, v, c in state.recent if o == owner and v == visibility][-self.turns :]
            per_turn = max(self.chars // self.turns, 1)
            context = "\n".join(c[:per_turn] for c in before)
        state.recent.append((owner, visibility, content))
        del state.recent[: -self._keep]
        return context, turn

    async def written(self, rows: list[dict[str, Any]]) -> None:
        """New memories were inserted (``insert_memories`` rows): count their speakers."""
        await speakers.record(
            self.conn,
            [
                (r["namespace"], r["owner_agent_id"], r["visibility"], r["metadata"]["speaker"])
                for r in rows
                if isinstance(r["metadata"].get("speaker"), str)
            ],
        )
