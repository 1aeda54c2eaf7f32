"""The live agent: the chat-facing agent with the least power of any.

It acts as an agent of role ``live`` (:mod:`cabrain.policy`), so the server, not a prompt, bounds
it: it can recall in its scope and file issues, and nothing else. For each new message of a
channel it answers:

- ``approve <action>`` / ``deny <action>`` from one of the channel's ``options.approvers`` (platform
  user ids): decides a pending action (a held forget, share, correction), and says so in the thread;
- a problem report (by the channel's ``options.file_issues``: ``all`` messages, those starting
  with ``options.prefix`` (``/issue``, the default), or those the configured chat model calls a
  problem report): recalls what the brain knows about it, files an issue through the channel's
  tracker (a GitLab or Vikunja connector) with that context and links to its memories, and tells
  the thread the issue's link.

:meth:`LiveAgent.watch` then asks the tracker, every ``live_watch_s``, whether each filed issue got
a merge request; the first time one appears its link is pushed to the thread that reported it.
Replies travel as events through the outbox (:mod:`cabrain.notify.outbox`): once each, retried.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

from cabrain import actions
from cabrain.channels.facade import Channels
from cabrain.channels.inbound import ChatMessage
from cabrain.errors import CabrainError, ConfigError
from cabrain.providers.llm import LLMError
from cabrain.redact import redact
from cabrain.store import channels as sql
from cabrain.store import notify as notify_sql
from cabrain.types import RecallQuery

log = logging.getLogger(__name__)

DECIDE = re.compile(r"^\s*(approve|deny)\s+([0-9a-fA-F-]{8,36})\s*$")
TRIAGE_PROMPT = (
    "A message from a team chat. Is it a report of a problem that should become an issue in the team's "
    'tracker? Answer JSON {"issue": true|false, "title": "<a short issue title>"}.'
)
CONTEXT_HITS = 5


class LiveAgent:
    def __init__(self, channels: Channels) -> None:
        self.channels = channels
        self.brain = channels.brain
        self.engine = channels.engine

    # --- a new message --------------------------------------------------------------------------
    async def handle(self, channel: dict[str, Any], message: ChatMessage, memory_ids: list[uuid.UUID]) -> None:
        """Answer one new message of ``channel`` (already retained as ``memory_ids``)."""
        options = channel["options"]
        command = DECIDE.match(message.text)
        if command is not None and message.speaker_id in options.get("approvers", []):
            await self._decide(channel, message, command.group(1) == "approve", command.group(2))
            return
        agent, tracker = channel["live_agent"], channel["tracker"]
        if agent is None or tracker is None:
            return
        message = replace(message, text=redact(message.text))  # it leaves for a tracker and a model
        title = await self._triage(options, message.text)
        if title is None:
            return
        try:
            await self._file(channel, message, memory_ids, agent, tracker, title)
        except CabrainError as exc:  # refused by policy, the tracker down after its retries: the thread hears
            log.warning("live agent could not file an issue", extra={"channel": channel["name"], "error": str(exc)})
            await self.reply(channel, message.thread, message.reply_to, f"I could not file an issue: {exc.message}")

    async def _triage(self, options: dict[str, Any], text: str) -> str | None:
        """The issue title for ``text``, or None when it is not a problem report."""
        mode = options.get("file_issues", "prefix")
        first = text.strip().splitlines()[0] if text.strip() else ""
        if mode == "all":
            return first
        if mode == "prefix":
            prefix = options.get("prefix", "/issue")
            return first[len(prefix) :].strip() or None if first.startswith(prefix) else None
        if mode == "model":
            chat = self.engine.chat
            if chat is None:
                raise ConfigError("the channel files issues by a chat model's triage, and none is configured")
            try:
                verdict = json.loads(await chat.complete(TRIAGE_PROMPT, text[:4000]))
            except (LLMError, ValueError):
                return None
            if isinstance(verdict, dict) and verdict.get("issue") is True:
                return str(verdict.get("title") or first)
            return None
        raise ConfigError(f"unknown options.file_issues {mode!r}: all, prefix or model")

    async def _file(
        self,
        channel: dict[str, Any],
        message: ChatMessage,
        own: list[uuid.UUID],
        agent: str,
        tracker: str,
        title: str,
    ) -> None:
        recalled = await self.brain.recall(agent, RecallQuery(message.text, channel["namespace"], k=CONTEXT_HITS + 1))
        hits = [h for h in recalled.hits if h.memory.id not in own][:CONTEXT_HITS]
        base = self.engine.settings.public_url
        lines = [
            f"Reported in {channel['kind']} channel `{channel['name']}` by {message.speaker} "
            f"at {message.sent_at.isoformat()}:",
            "",
            *[f"> {line}" for line in message.text.splitlines()],
            "",
        ]
        if hits:
            lines.append("What CaBrain remembers about it:")
            for hit in hits:
                where = f"{base.rstrip('/')}/console/memories/{hit.memory.id}" if base else f"memory {hit.memory.id}"
                text = " ".join(hit.memory.content.split())
                lines.append(f"- {text[:300]}{'…' if len(text) > 300 else ''} ({where})")
        labels = options_labels(channel["options"])
        issue = await self.channels.file_issue(
            agent,
            tracker,
            title[:200],
            "\n".join(lines),
            labels=labels,
            key=f"{channel['name']}:{message.event_id}",
        )
        memory_ids = [*own, *[h.memory.id for h in hits]]
        now = self.engine.clock()
        async with self.engine.pool.acquire() as conn:
            await sql.insert_issue(
                conn,
                {
                    "id": uuid.uuid4(),
                    "channel": channel["name"],
                    "thread": message.thread,
                    "reply_to": message.reply_to,
                    "tracker": tracker,
                    "kind": issue.kind,
                    "project": issue.project,
                    "ref": issue.ref,
                    "url": issue.url,
                    "title": issue.title,
                    "filed_by": agent,
                    "memory_ids": memory_ids,
                    "created_at": now,
                },
            )
        log.info("live agent filed an issue", extra={"channel": channel["name"], "url": issue.url})
        await self.reply(
            channel,
            message.thread,
            message.reply_to,
            f"Filed {issue.url} ({issue.title}). I will post here when it gets a merge request.",
            kind="issue_filed",
            finding=f"issue_filed:{tracker}:{issue.ref}",
            memory_ids=memory_ids,
            links=[issue.url],
        )

    async def _decide(self, channel: dict[str, Any], message: ChatMessage, approve: bool, ref: str) -> None:
        found = await actions.pending_by_prefix(self.engine, ref)
        if len(found) != 1:
            text = f"No single pending action starts with {ref}." if found else f"No pending action {ref}."
            await self.reply(channel, message.thread, message.reply_to, text)
            return
        try:
            action = await self.channels.decide_from_chat(
                channel["name"], message.speaker_id, found[0], approve=approve
            )
            text = f"Action {action['id']} {action['status']}" + (
                f": {action['error']}" if action.get("error") else "."
            )
        except CabrainError as exc:
            text = f"Action {found[0]}: {exc.message}"
        await self.reply(channel, message.thread, message.reply_to, text)

    # --- telling a thread -----------------------------------------------------------------------
    async def reply(
        self,
        channel: dict[str, Any],
        thread: str,
        reply_to: dict[str, Any],
        text: str,
        *,
        kind: str = "reply",
        finding: str | None = None,
        memory_ids: list[uuid.UUID] | None = None,
        links: list[str] | None = None,
    ) -> uuid.UUID:
        """Queue ``text`` for ``thread`` of ``channel`` (sent by the outbox, through the channel's notifier)."""
        async with self.engine.pool.acquire() as conn:
            return await notify_sql.insert_event(
                conn,
                kind,
                channel["namespace"],
                finding or f"{kind}:{uuid.uuid4()}",
                now=self.engine.clock(),
                importance=1.0,
                title=text.splitlines()[0][:200],
                body=text,
                memory_ids=memory_ids,
                data={
                    "channel": channel["name"],
                    "thread": thread,
                    "reply_to": reply_to,
                    "notifier": channel["notifier"],
                    "links": links or [],
                },
            )

    # --- merge requests -------------------------------------------------------------------------
    async def watch(self, *, batch: int = 20) -> int:
        """Ask the trackers whether filed issues got a merge request; tell the threads of those that
        did. How many issues were checked."""
        now = self.engine.clock()
        due = now - timedelta(seconds=self.engine.settings.live_watch_s)
        async with self.engine.pool.acquire() as conn, conn.transaction():
            rows = [dict(r) for r in await conn.fetch(sql.OPEN_ISSUES, due, batch)]
            for row in rows:  # claimed: another replica skips them until the next round
                await conn.execute(sql.CHECKED, row["id"], now)
        for row in rows:
            try:
                links = await self.channels.links(row["filed_by"], row["tracker"], row["ref"])
            except CabrainError as exc:
                log.info("live agent could not check an issue", extra={"url": row["url"], "error": str(exc)})
                continue
            if not links:
                continue
            channel = await self.channels.get(row["channel"])
            reply_to = row["reply_to"] if isinstance(row["reply_to"], dict) else json.loads(row["reply_to"])
            found = [{"ref": link.ref, "url": link.url, "title": link.title, "state": link.state} for link in links]
            async with self.engine.pool.acquire() as conn:
                await conn.execute(sql.LINKED, row["id"], self.engine.clock(), json.dumps(found))
            text = "\n".join(
                [f"{row['title']} ({row['url']}) has a merge request:"]
                + [f"- {link.title} ({link.state}): {link.url}" for link in links]
            )
            await self.reply(
                channel,
                row["thread"],
                reply_to,
                text,
                kind="issue_linked",
                finding=f"issue_linked:{row['tracker']}:{row['ref']}",
                memory_ids=list(row["memory_ids"]),
                links=[link.url for link in links],
            )
        return len(rows)


def options_labels(options: dict[str, Any]) -> list[str]:
    labels = options.get("labels", ["from-chat"])
    return [str(label) for label in labels] if isinstance(labels, list) else ["from-chat"]


__all__ = ["LiveAgent"]
