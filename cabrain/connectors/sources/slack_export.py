"""Slack workspace exports: each message of every channel in the export as one item.

Slack's export is a ZIP (read as it is, nothing extracted) or that ZIP unpacked into a folder:
``users.json`` (who is who), ``channels.json`` and, where the export has them, ``groups.json``
(private channels), ``mpims.json`` (group DMs) and ``dms.json``; and per conversation a folder of
``YYYY-MM-DD.json`` days, each a JSON list of messages (``user``, ``text``, ``ts``, ``thread_ts``,
``subtype`` ...). A channel's folder is its name; a DM's is its id.

A message's key is ``channel/ts``; its speaker the author's display name from ``users.json`` (else
the name the message carries); its thread ``#channel``, or ``#channel/thread_ts`` for a reply in a
thread. Mentions, channel links and links read as a person would see them (``<@U1>`` -> ``@Ana``,
``<https://x|label>`` -> ``label (https://x)``). What a message says is its text, then its
attachments' (an integration's post, a bot's alert or a shared message often has all of it there:
each attachment's pretext, title, text and fields, its fallback only when those say nothing), else
its blocks', else a text file's preview; a post without a person speaks as its bot, or the author or
service its attachment names. Joins, topic changes and the like, deleted messages and messages with
nothing to read (a file alone) are skipped and counted in :attr:`SlackExportSource.skipped` by
reason (``system``, ``deleted``, ``file``, ``empty`` ...).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from cabrain.connectors.base import Document, ItemRef, Part, SourceSpec
from cabrain.connectors.config import checked
from cabrain.connectors.retry import Retry
from cabrain.errors import InputError, SourceError
from cabrain.localfiles import (
    Archive,
    ArchiveLimits,
    ArchiveTooLarge,
    is_folder,
    open_confined,
    open_file,
    path_of,
    read_below,
    walk,
)

__all__ = ["KIND", "LOCAL", "SlackExportSource", "build", "configure"]

KIND = "slack-export"
LOCAL = True

_SYSTEM = frozenset(
    {
        "channel_join",
        "channel_leave",
        "channel_topic",
        "channel_purpose",
        "channel_name",
        "channel_archive",
        "channel_unarchive",
        "channel_convert_to_private",
        "group_join",
        "group_leave",
        "group_topic",
        "group_purpose",
        "group_name",
        "group_archive",
        "group_unarchive",
        "bot_add",
        "bot_remove",
        "pinned_item",
        "unpinned_item",
    }
)
_LISTS = ("channels.json", "groups.json", "mpims.json", "dms.json")
_BROADCASTS = frozenset({"here", "channel", "everyone"})
_DAY = re.compile(r"^(?P<folder>[^/]+)/\d{4}-\d{2}-\d{2}\.json$")
_TS = re.compile(r"^(?P<s>\d+)(?:\.(?P<f>\d+))?$")
_TOKEN = re.compile(r"<([^<>\s][^<>]*)>")


def _check(config: dict[str, Any]) -> None:
    try:
        ZoneInfo(config["timezone"])
    except (ValueError, LookupError):
        raise InputError(
            "slack-export connector: timezone must be an IANA time zone name such as Asia/Riyadh or UTC, "
            f"got {config['timezone']!r}"
        ) from None


configure = checked(KIND, required={"path": str}, optional={"timezone": (str, "UTC")}, check=_check)


@dataclass(frozen=True)
class Message:
    """One message of the export, as the item it becomes."""

    key: str
    title: str  # the conversation: "#general", or a DM's members
    thread: str
    speaker: str
    text: str
    at: datetime  # aware, in the config's timezone
    order: tuple[int, int, str]  # seconds, microseconds, channel: the scan's order
    url: str
    version: str


@dataclass(frozen=True)
class _Conversation:
    folder: str  # the export's folder of its days
    label: str  # in keys and threads
    title: str


class _Export:
    """The export's files by their path under its root, from a ZIP or a folder: the path reached
    without a link (under ``roots`` when given), a folder's files read without following links, a
    ZIP's members within the archive limits."""

    def __init__(self, path: Path, roots: Sequence[str] | None, limits: ArchiveLimits) -> None:
        self.archive: Archive | None = None
        self.folder: int | None = None
        fd = open_confined(path, roots)
        if is_folder(fd):
            self.folder = fd
            names = [f"{d}/{f}" if d else f for d, _, files in walk(fd) for f in files if f.endswith(".json")]
        else:
            self.archive = Archive(open_file(fd), limits, name=str(path))  # owns fd from here, closed either way
            names = [n for n in self.archive.namelist() if n.endswith(".json")]
        self.path = path
        self.limits = limits
        lists = [n for n in names if n.rsplit("/", 1)[-1] in ("channels.json", "users.json")]
        root = min((n.rsplit("/", 1)[0] + "/" if "/" in n else "" for n in lists), key=len, default="")
        self.root = root
        self.names = sorted(n[len(root) :] for n in names if n.startswith(root))
        self._known = set(self.names)

    def read(self, name: str) -> Any:
        """A JSON file of the export, parsed; None where the export lacks it."""
        if name not in self._known:
            return None
        full = self.root + name
        try:
            if self.archive is not None:
                data = self.archive.read(full)
            else:
                assert self.folder is not None
                data = read_below(
                    self.folder, full, max_bytes=self.limits.max_member_bytes, shown=str(self.path / full)
                )
                if len(data) > self.limits.max_member_bytes:
                    raise ArchiveTooLarge(f"{self.path / full} is over {self.limits.max_member_bytes:,} bytes")
            return json.loads(data.decode("utf-8-sig"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise SourceError(f"slack-export: {self.path}: {full} is not valid JSON ({exc})", status_code=422) from exc

    def close(self) -> None:
        if self.archive is not None:
            self.archive.close()
        if self.folder is not None:
            os.close(self.folder)
            self.folder = None


class SlackExportSource:
    """The messages of one Slack workspace export, every channel and conversation in it."""

    kind: ClassVar[str] = KIND

    def __init__(
        self,
        config: Mapping[str, Any],
        retry: Retry,
        *,
        roots: Sequence[str] | None = None,
        limits: ArchiveLimits | None = None,
    ) -> None:
        self.path = path_of(config["path"])
        self.roots = roots
        self.limits = limits or ArchiveLimits()
        self.zone = ZoneInfo(config["timezone"])
        self.retry = retry
        self.skipped: dict[str, int] = {}
        self._messages: list[Message] | None = None
        self._by_key: dict[str, Message] = {}
        self._users: dict[str, str] = {}
        self._channels: dict[str, str] = {}

    def scan(self) -> Iterator[ItemRef]:
        for m in self._load():
            hint = {"title": m.title, "thread": m.thread, "speaker": m.speaker, "text": m.text, "at": m.at}
            yield ItemRef(key=m.key, version=m.version, url=m.url, hint=hint)

    def fetch(self, ref: ItemRef) -> Document:
        hint = ref.hint
        if all(k in hint for k in ("title", "thread", "speaker", "text", "at")):
            title, thread, speaker, text, at = hint["title"], hint["thread"], hint["speaker"], hint["text"], hint["at"]
        else:
            self._load()
            m = self._by_key.get(ref.key)
            if m is None:
                raise SourceError(f"slack-export: no message {ref.key} in {self.path} any more", status_code=404)
            title, thread, speaker, text, at = m.title, m.thread, m.speaker, m.text, m.at
        part = Part(anchor="message", text=text, valid_at=at, speaker=speaker, thread=thread)
        return Document(ref=ref, title=title, parts=(part,), valid_at=at)

    def close(self) -> None:
        self._messages = None
        self._by_key = {}

    def check(self) -> None:
        """The export is there, readable and a Slack export: read as each sync reads it, not kept."""
        self._read()

    def _load(self) -> list[Message]:
        """Every message of the export, oldest first, read once until :meth:`close`."""
        if self._messages is None:
            self._messages = self.retry.call(f"slack-export: read {self.path}", self._read)
            self._by_key = {m.key: m for m in self._messages}
        return self._messages

    def _read(self) -> list[Message]:
        if not os.path.lexists(self.path):
            raise SourceError(
                f"slack-export: {self.path} does not exist",
                hint="point the connector's path at the workspace export's ZIP, or the folder it unpacks to",
                status_code=404,
            )
        self.skipped = {}
        try:
            export = _Export(self.path, self.roots, self.limits)
        except zipfile.BadZipFile as exc:
            raise SourceError(f"slack-export: {self.path} is not a ZIP or a folder ({exc})", status_code=422) from exc
        except PermissionError as exc:
            raise SourceError(f"slack-export: cannot read {self.path}: permission denied", status_code=403) from exc
        except OSError as exc:
            raise SourceError(f"slack-export: cannot read {self.path}: {exc}") from exc
        try:
            days: dict[str, list[str]] = {}
            for name in export.names:
                match = _DAY.match(name)
                if match is not None:
                    days.setdefault(match["folder"], []).append(name)
            messages: list[Message] = []
            seen: set[str] = set()
            for conversation in self._conversations(export, days):
                for day in days.get(conversation.folder, []):
                    for raw in _listed(export, day):
                        message = self._message(conversation, raw)
                        if message is not None and message.key in seen:
                            self._skip("duplicate")
                        elif message is not None:
                            seen.add(message.key)
                            messages.append(message)
        except PermissionError as exc:
            raise SourceError(f"slack-export: cannot read {self.path}: permission denied", status_code=403) from exc
        except OSError as exc:
            raise SourceError(f"slack-export: cannot read {self.path}: {exc}") from exc
        finally:
            export.close()
        messages.sort(key=lambda m: m.order)
        return messages

    def _conversations(self, export: _Export, days: Mapping[str, list[str]]) -> list[_Conversation]:
        """The export's conversations, from its lists, and any other folder of days it holds."""
        users = export.read("users.json") or []
        self._users = {u["id"]: _user_name(u) for u in users if isinstance(u, dict) and u.get("id")}
        out: dict[str, _Conversation] = {}
        self._channels = {}
        for listing in _LISTS:
            for entry in export.read(listing) or []:
                folder = str(entry.get("name") or entry.get("id") or "") if isinstance(entry, dict) else ""
                if not folder:
                    continue
                if listing in ("channels.json", "groups.json"):
                    title = f"#{folder}"
                    self._channels[str(entry.get("id") or folder)] = folder
                else:  # a DM (its folder is its id) or a group DM: titled by its members
                    members = [self._users.get(u, u) for u in entry.get("members") or []]
                    title = f"Direct messages: {', '.join(members) or folder}"
                out.setdefault(folder, _Conversation(folder=folder, label=folder, title=title))
        for folder in days:
            out.setdefault(folder, _Conversation(folder=folder, label=folder, title=f"#{folder}"))
        if not out:
            raise SourceError(
                f"slack-export: {self.path} is not a Slack export: no channels.json and no channel folders of "
                "YYYY-MM-DD.json days",
                hint="export the workspace from Slack (Settings > Import/Export Data) and point path at the ZIP",
                status_code=422,
            )
        return sorted(out.values(), key=lambda c: c.folder)

    def _message(self, conversation: _Conversation, raw: Any) -> Message | None:
        """The item one message of a day file becomes; None (counted) for what holds nothing."""
        if not isinstance(raw, dict) or raw.get("type", "message") != "message":
            self._skip("other")
            return None
        subtype = raw.get("subtype")
        if subtype in _SYSTEM:
            self._skip("system")
            return None
        if subtype == "tombstone":
            self._skip("deleted")
            return None
        stamp = _TS.match(str(raw.get("ts", "")))
        if stamp is None:
            self._skip("invalid")
            return None
        text = self._text(raw)
        if not text:
            self._skip("file" if raw.get("files") else "empty")
            return None
        ts = stamp[0]
        fraction = int((stamp["f"] or "0")[:6].ljust(6, "0"))
        at = (datetime.fromtimestamp(int(stamp["s"]), UTC) + timedelta(microseconds=fraction)).astimezone(self.zone)
        thread_ts = str(raw.get("thread_ts") or ts)
        thread = f"#{conversation.label}" if thread_ts == ts else f"#{conversation.label}/{thread_ts}"
        speaker = self._speaker(raw)
        key = f"{conversation.label}/{ts}"
        version = hashlib.sha256("\x1f".join([text, speaker, at.isoformat()]).encode()).hexdigest()
        return Message(
            key=key,
            title=conversation.title,
            thread=thread,
            speaker=speaker,
            text=text,
            at=at,
            order=(int(stamp["s"]), fraction, conversation.label),
            url=f"slack-export://{conversation.label}/{ts}",
            version=version,
        )

    def _text(self, raw: Mapping[str, Any]) -> str:
        """What the message says as a person reads it: its text, then each attachment's (an
        integration's post often has all of it there), else its blocks', else a text file's preview."""
        text = self._readable(str(raw.get("text") or "")).strip()
        parts = [text] if text else []
        for attachment in _dicts(raw.get("attachments")):
            said = self._attachment(attachment)
            if said and not any(said in p for p in parts):  # an unfurl repeating the message says it once
                parts.append(said)
        if not parts:
            parts += [t for t in (self._readable(b).strip() for b in _blocks(raw.get("blocks"))) if t]
        if not parts:
            for file in _dicts(raw.get("files")):
                preview = _string(file.get("preview_plain_text")) or _string(file.get("preview"))
                if preview:
                    parts.append("\n".join(p for p in (_string(file.get("title")), preview) if p))
        return "\n".join(parts).strip()

    def _attachment(self, attachment: Mapping[str, Any]) -> str:
        """An attachment's words: pretext, title, text and fields; its fallback only when those say
        nothing (the fallback is their plain-text summary)."""
        lines = []
        for key in ("pretext", "title", "text"):
            said = self._readable(_string(attachment.get(key))).strip()
            link = _string(attachment.get("title_link")) if key == "title" else ""
            if said:
                lines.append(f"{said} ({link})" if link and link != said else said)
        for field in _dicts(attachment.get("fields")):
            title = self._readable(_string(field.get("title"))).strip()
            value = self._readable(_string(field.get("value"))).strip()
            if title or value:
                lines.append(f"{title}: {value}" if title and value else title or value)
        if not lines:
            fallback = self._readable(_string(attachment.get("fallback"))).strip()
            if fallback:
                lines.append(fallback)
        return "\n".join(lines)

    def _speaker(self, raw: Mapping[str, Any]) -> str:
        """The users.json name of the author, else the profile the message carries, else the bot's
        name, else (an integration's post, which has no user) the author or service its attachment
        names, else the id."""
        user = raw.get("user")
        if user and user in self._users:
            return self._users[user]
        profile = raw.get("user_profile") or {}
        bot = raw.get("bot_profile") or {}
        attached = [
            name for a in _dicts(raw.get("attachments")) for name in (a.get("author_name"), a.get("service_name"))
        ]
        for name in (
            profile.get("display_name"),
            profile.get("real_name"),
            raw.get("username"),
            bot.get("name"),
            *attached,
            user,
            raw.get("bot_id"),
        ):
            if isinstance(name, str) and name.strip():
                return name.strip()
        return "unknown"

    def _readable(self, text: str) -> str:
        """Slack's markup as a person reads it: mentions by name, links with their label, and
        ``&amp;`` ``&lt;`` ``&gt;`` unescaped."""
        text = _TOKEN.sub(lambda m: self._token(m[1]), text)
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    def _token(self, token: str) -> str:
        target, _, label = token.partition("|")
        if target.startswith("@"):
            name = self._users.get(target[1:]) or label.lstrip("@") or target[1:]
            return f"@{name}"
        if target.startswith("#"):
            return f"#{label or self._channels.get(target[1:], target[1:])}"
        if target.startswith("!"):
            word = target[1:].split("^", 1)[0]
            if word in _BROADCASTS or not label:
                return f"@{word}"
            return label  # <!subteam^S1|@team>, <!date^...|fallback>
        if target.startswith("mailto:") and (not label or label == target[7:]):
            return target[7:]
        if not label or label == target:
            return target
        return f"{label} ({target})"

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def build(spec: SourceSpec, retry: Retry) -> SlackExportSource:
    """The source for ``spec`` (its config checked again; an export needs no credential)."""
    return SlackExportSource(configure(spec.config), retry, roots=spec.roots, limits=spec.archive)


def _user_name(user: Mapping[str, Any]) -> str:
    """A users.json entry's name as Slack shows it: display name, else real name, else handle."""
    profile = user.get("profile") or {}
    for name in (profile.get("display_name"), user.get("real_name"), profile.get("real_name"), user.get("name")):
        if isinstance(name, str) and name.strip():
            return name.strip()
    return str(user["id"])


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a JSON list (an export's ``attachments``, ``fields``, ``files``); [] for anything else."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _blocks(blocks: Any) -> Iterator[str]:
    """The text of Block Kit blocks, a block at a time: sections and their fields, headers,
    context lines and rich text (mentions and links in Slack's markup, as :meth:`_readable` reads
    it); images, dividers and actions say nothing."""
    for block in _dicts(blocks):
        kind = block.get("type")
        if kind in ("section", "header"):
            text = block.get("text")
            said = [_string(text.get("text")) if isinstance(text, dict) else ""]
            said += [_string(f.get("text")) for f in _dicts(block.get("fields"))]
            yield "\n".join(s for s in said if s)
        elif kind == "context":
            yield " ".join(_string(e.get("text")) for e in _dicts(block.get("elements")) if e.get("text"))
        elif kind == "rich_text":
            yield "\n".join(_rich(e) for e in _dicts(block.get("elements")))


def _rich(element: Mapping[str, Any]) -> str:
    """A rich text element as Slack's markup: text as it is, a link, a user or a channel as its token."""
    kind = element.get("type")
    if kind == "text":
        return _string(element.get("text"))
    if kind == "link":
        url, label = _string(element.get("url")), _string(element.get("text"))
        return f"<{url}|{label}>" if label else f"<{url}>"
    if kind == "user":
        return f"<@{_string(element.get('user_id'))}>"
    if kind == "channel":
        return f"<#{_string(element.get('channel_id'))}>"
    if kind == "broadcast":
        return f"<!{_string(element.get('range'))}>"
    if kind == "rich_text_list":
        return "\n".join(f"- {_rich(e)}" for e in _dicts(element.get("elements")))
    return "".join(_rich(e) for e in _dicts(element.get("elements")))  # sections, quotes, code


def _listed(export: _Export, name: str) -> list[Any]:
    """A day file's messages (a JSON list), or SourceError 422 naming the file."""
    data = export.read(name)
    if not isinstance(data, list):
        raise SourceError(
            f"slack-export: {export.path}: {export.root}{name} is not a list of messages", status_code=422
        )
    return data
