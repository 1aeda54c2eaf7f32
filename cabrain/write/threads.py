"""Conversations on the write path: each turn's sitting, and the turns before it, indexed with it.

A memory is a turn of a conversation when it names its ``metadata.thread`` (a chat, a channel, a
Claude Code session, a meeting) or, with no thread, its ``metadata.speaker``: then the conversation
is its writer's turns without a thread (an importer or agent loading a chat with no thread ids).
Turns are numbered in the order they are retained (``memories.thread_turn``).

A conversation's turns fall into sittings: the turns people exchanged at one go. Sources rarely say
where one ends (a WhatsApp or Slack export, a live channel give every message its own time and the
whole chat one thread), so unless a turn names its ``metadata.sitting`` the write path finds it: a
turn joins the sitting of the turn before it in time (in its conversation) when the gap between
them is at most ``CABRAIN_SITTING_GAP_S`` (default 30 minutes), and otherwise starts a sitting of
its own, or joins the turn just after it within the gap (a turn that arrives late). A conversation's
first sitting is named by its thread (a thread that is one sitting keeps its name), a later one by
the thread and the time it began (``~writer`` stands for the thread of a writer's turns). The found
sitting is written to the memory's ``metadata.sitting``.

Each new turn is keyword-indexed with the text of the ``CABRAIN_THREAD_CONTEXT_TURNS`` turns before
it in its sitting: an answer ("Three times a week") is found by the words of the question it
answers ("How often do you work out?"). The memory itself stays the turn; only what it can be
found by grows. Only turns by the same writer with the same visibility, current and hot, lend their
words: a memory is never findable by words its readers may not read, and no agent can plant words
in another agent's memories. The namespace's writer lock (held by every write transaction) makes
the numbering race-free.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from cabrain.errors import InputError
from cabrain.search import speakers
from cabrain.store import memories as sql

MAX_FIELD_CHARS = 200


HINTS = {
    "thread": "name the conversation the memory belongs to: a chat thread, a session id, a meeting",
    "speaker": "name who said it: a person, an agent, user or assistant",
    "sitting": "name the sitting the turn belongs to (the turns exchanged at one go), or leave it out to have it "
    "found from the turns' times",
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
    """Refuse a malformed ``metadata.thread``, ``metadata.speaker`` or ``metadata.sitting`` (before any
    write)."""
    for name in HINTS:
        _field(metadata, name, f"{where}: ")


@dataclass(frozen=True)
class Place:
    """A new memory's place in its conversation."""

    context: str = ""  # the turns before it in its sitting, indexed with it
    turn: int | None = None  # its number in its conversation (None: not a turn)
    sitting: str | None = None  # its sitting (given or found; None: not a turn)


@dataclass
class _Turn:
    at: datetime
    turn: int
    sitting: str | None
    owner: str | None
    visibility: str
    content: str
    usable: bool  # current and hot: may lend its words

    @property
    def key(self) -> tuple[datetime, int]:
        return self.at, self.turn


@dataclass
class _Conversation:
    label: str  # what its found sittings are named by
    next_turn: int
    turns: list[_Turn] = field(default_factory=list)  # in time, then turn order
    since: datetime | None = None  # every turn at or after this is in turns (None: every turn)

    def add(self, turn: _Turn) -> None:
        if all(t.turn != turn.turn for t in self.turns):
            bisect.insort(self.turns, turn, key=lambda t: t.key)


def _row_turn(row: Mapping[str, Any], thread: str | None) -> _Turn:
    return _Turn(
        row["valid_at"],
        row["thread_turn"],
        row["sitting"] or thread,  # a turn kept before sittings were found: its thread was its sitting
        row["owner_agent_id"],
        row["visibility"],
        row["content"],
        row["usable"],
    )


class ThreadContext:
    """The conversations one write transaction touches: each one's next turn number and latest turns,
    read once from the store and then kept as the transaction writes."""

    def __init__(self, conn: asyncpg.Connection, *, turns: int, chars: int, gap_s: float) -> None:
        self.conn, self.turns, self.chars = conn, turns, chars
        self.gap = timedelta(seconds=gap_s)
        self._conversations: dict[tuple[str, str, str], _Conversation] = {}
        self._keep = max(turns * 4, 8)  # other writers' turns may sit between one writer's

    async def _load(self, namespace: str, form: str, name: str) -> _Conversation:
        key = (namespace, form, name)
        conversation = self._conversations.get(key)
        if conversation is None:
            last = await self.conn.fetchval(sql.LAST_TURN[form], namespace, name)
            rows = await self.conn.fetch(sql.LATEST_TURNS[form], namespace, name, self._keep, None)
            thread = name if form == "thread" else None
            conversation = _Conversation(
                label=name if form == "thread" else f"~{name}",
                next_turn=(last or 0) + 1,
                since=rows[-1]["valid_at"] if len(rows) == self._keep else None,
            )
            for row in rows:
                conversation.add(_row_turn(row, thread))
            self._conversations[key] = conversation
        return conversation

    async def _before(self, namespace: str, form: str, name: str, c: _Conversation, at: datetime) -> list[_Turn]:
        """The conversation's turns at or before ``at`` that this transaction knows, reading the
        store for those older than what it holds."""
        if c.since is not None and at < c.since:
            rows = await self.conn.fetch(sql.LATEST_TURNS[form], namespace, name, self._keep, at)
            for row in rows:
                c.add(_row_turn(row, name if form == "thread" else None))
        return [t for t in c.turns if t.at <= at]

    async def place(
        self,
        namespace: str,
        owner: str,
        visibility: str,
        metadata: Mapping[str, Any],
        content: str,
        at: datetime,
    ) -> Place:
        """A new memory's place in its conversation: its turn number, its sitting (the one its
        metadata gives, or the one found from time) and the context it is indexed with. Call once
        per stored memory, in the order they are written."""
        thread = thread_of(metadata)
        given = _field(metadata, "sitting")
        if thread is not None:
            form, name = "thread", thread
        elif _field(metadata, "speaker") is not None:
            form, name = "writer", owner
        else:
            return Place(sitting=given)
        c = await self._load(namespace, form, name)
        turn, sitting = c.next_turn, given
        c.next_turn += 1
        before = await self._before(namespace, form, name, c, at)
        if sitting is None:
            sitting = self._found(c, before, at)
        context = ""
        if self.turns:
            mine = [  # a forgotten, superseded or demoted turn still marks time, but lends no words
                t.content
                for t in before
                if t.usable and t.sitting == sitting and t.owner == owner and t.visibility == visibility
            ]
            mine = mine[-self.turns :]
            per_turn = max(self.chars // self.turns, 1)
            context = "\n".join(text[:per_turn] for text in mine)
        c.add(_Turn(at, turn, sitting, owner, visibility, content, True))
        return Place(context, turn, sitting)

    def _found(self, c: _Conversation, before: list[_Turn], at: datetime) -> str:
        """The sitting of a turn at ``at`` that names none: the previous turn's when it is within the
        gap, else the next turn's when that one is (a turn that arrived late), else a new one."""
        if before and at - before[-1].at <= self.gap and before[-1].sitting:
            return before[-1].sitting
        after = next((t for t in c.turns if t.at > at), None)
        if after is not None and after.at - at <= self.gap and after.sitting:
            return after.sitting
        if c.since is None and not before and all(t.sitting != c.label for t in c.turns):
            return c.label  # the conversation's first sitting is named by it (a thread that is one sitting)
        return f"{c.label[: MAX_FIELD_CHARS - 21]}@{at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"

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
