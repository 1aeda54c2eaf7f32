"""WhatsApp chat exports: each message of an exported chat as one item.

WhatsApp's "Export chat" writes a ``.txt`` (iOS zips it as ``_chat.txt``), one message per line in
the phone's locale, a message's further lines following it bare:

- Android: ``12/31/23, 9:41 PM - Name: text`` or ``31/12/2023, 21:41 - Name: text``;
- iOS: ``[31/12/2023, 21:41:05] Name: text`` or ``[12/31/23, 9:41:05 PM] Name: text``;

with dots or dashes in dates, two- or four-digit years, 12- or 24-hour clocks, a narrow no-break
space before AM/PM, and in Arabic exports Arabic-Indic digits, ``م``/``ص`` for PM/AM and the
direction marks WhatsApp puts around names and at line starts. Whether ``03/04`` is the 3rd of April
or March 4th is decided once per file from its own dates (a first field over 12: day first; a second
one: month first; neither: day first) unless the config's ``date_order`` says. Times carry no zone:
the config's ``timezone`` says where they were local.

What WhatsApp writes in place of a message holds nothing to remember, in any of the languages
it writes it in (English and Arabic here), on iOS and on Android. Each is skipped and counted in
:attr:`WhatsAppSource.skipped` by reason:

- ``system``: the encryption notice, joins, subject changes, security codes, "is a contact";
- ``attachment``: a file sent with the chat, ``<attached: 00000012-PHOTO-….jpg>`` /
  ``<المُرفق: …>`` (iOS) or ``IMG-20240101-WA0001.jpg (file attached)`` / ``(ملف مرفق)``
  (Android); a caption sent with it stays as the message;
- ``media``: a file left out of the export, ``<Media omitted>`` / ``<تم استبعاد الوسائط>``,
  ``image omitted`` / ``لم يتم إدراج الصورة``;
- ``call``: ``Missed voice call``, ``Video call, 12 min``, ``مكالمة صوتية فائتة``;
- ``deleted``: ``This message was deleted``, ``You deleted this message``, ``تم حذف هذه الرسالة``.

Matching ignores the direction marks (U+200E, U+200F) and Arabic diacritics WhatsApp puts in them.
An item's key is ``chat/local time/speaker/n``, ``n`` counting that speaker's messages in that
minute (or second), so a re-export with newer messages appended keeps every older key.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
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
    LinkRefused,
    is_folder,
    open_below,
    open_confined,
    open_file,
    path_of,
    read_fd,
    walk,
)

__all__ = ["KIND", "LOCAL", "WhatsAppSource", "build", "configure", "notice"]

KIND = "whatsapp"
LOCAL = True

_MARKS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_SPACES = re.compile("[\u00a0\u2007\u202f]")
_DATE = r"(?P<a>\d{1,4})[./-](?P<b>\d{1,2})[./-](?P<c>\d{1,4})\.?"
_TIME = r"(?P<h>\d{1,2})[:.](?P<mi>\d{2})(?:[:.](?P<s>\d{2}))?"
_AMPM = r"(?:\s*(?P<ampm>[AaPp]\.?\s?[Mm]\.?|ص|م))?"
_IOS = re.compile(rf"^\[{_DATE}[,،]?\s*{_TIME}{_AMPM}\]\s*(?P<rest>.*)$")
_ANDROID = re.compile(rf"^{_DATE}[,،]?\s*{_TIME}{_AMPM}\s+[-–]\s+(?P<rest>.*)$")
_NAMED = re.compile(r"^(?P<name>[^:]+?):(?:\s(?P<text>.*)|$)")
# a "name" that is a system line holding a colon (a subject with one in it)
_SYSTEM_NAME = re.compile(
    r"[\"“”«»]|\b(?:changed|created|added|removed|joined|left|deleted|pinned|turned)\b|غيّر|أنشأ|أضاف"
)
_ENCRYPTED = re.compile(
    r"^(?:Messages and calls are end-to-end encrypted|Messages to this (?:group|chat) are now secured"
    r"|الرسائل والمكالمات مشفرة|إن الرسائل التي ترسلها والمكالمات)",
    re.IGNORECASE,
)
# a named line that is WhatsApp speaking (iOS attributes those to the chat or a member, text marked with U+200E)
_SYSTEM_TEXT = re.compile(
    r"end-to-end encrypted|security code|joined using|created (?:group|this group)|is a contact"
    r"|changed (?:the|this group|their)|disappearing messages|مشفرة تمامًا|مشفّرة|رمز الأمان|رمز أمانك"
    r"|الرسائل المؤقتة",
    re.IGNORECASE,
)
# what a message's text is once folded (_fold): marks, Arabic diacritics and case set aside
_MEDIA = re.compile(
    r"<\s*(?:media omitted|تم استبعاد الوسائط|الوسائط محذوفة)\s*>|null"
    r"|(?:[^\n]*\b(?:image|video|audio|sticker|gif|document|contact card|photo|video note|voice message) omitted)"
    r"|(?:لم يتم إدراج (?:الصورة|الفيديوهات|الفيديو|المقاطع الصوتية|صورة gif|بطاقة جهة اتصال|المستند)|تم حذف الملصقات)"
)
_CALL = re.compile(
    r"(?:missed (?:group )?(?:voice|video) call|silenced (?:voice|video) call|missed call"
    r"|مكالمة (?:صوتية|فيديو)(?: جماعية)? فائتة|مكالمة فائتة)(?:\s*[,،].*)?"
    r"|(?:(?:group )?(?:voice|video) call|مكالمة (?:صوتية|فيديو)(?: جماعية)?)"
    r"(?:\s*[,،]\s*(?:\d+\s*(?:sec|min|hr|h|ثانية|ثوان|دقيقة|دقائق|ساعة)\b.*|no answer|answered on other device"
    r"|tap to call back|click to call back|لا يوجد رد|لم يتم الرد|تم الرد على جهاز آخر))?"
)
_BARE_CALL = re.compile(r"(?:group )?(?:voice|video) call|missed call|مكالمة (?:صوتية|فيديو)(?: جماعية)?|مكالمة فائتة")
_DELETED = re.compile(
    r"(?:this message was deleted|you deleted this message|تم حذف هذه الرسالة|لقد حذفت هذه الرسالة"
    r"|أنت حذفت هذه الرسالة|حذفت هذه الرسالة)\.?"
)
_ATTACHED_IOS = re.compile(r"<\s*(?:attached|المرفق|مرفق)\s*:\s*[^>]*>")
_ATTACHED_ANDROID = re.compile(r"\S.*\s\((?:file attached|ملف مرفق|الملف مرفق)\)")
_DIACRITICS = re.compile("[\u064b-\u065f\u0670\u0640]")  # Arabic harakat, superscript alef, tatweel
_EDITED = re.compile(r"\s*<(?:This message was edited|تم تعديل هذه الرسالة)>$")
_CHAT_NAME = re.compile(r"^(?:WhatsApp Chat with |WhatsApp Chat - |دردشة واتساب مع )(?P<name>.+)$", re.IGNORECASE)
_EXPORT_MEMBER = re.compile(r"^(?:_chat|WhatsApp Chat.*|دردشة واتساب.*)\.txt$", re.IGNORECASE)


def _check(config: dict[str, Any]) -> None:
    if config["date_order"] not in ("auto", "dmy", "mdy"):
        raise InputError(f"whatsapp connector: date_order must be auto, dmy or mdy, got {config['date_order']!r}")
    try:
        ZoneInfo(config["timezone"])
    except (ValueError, LookupError):
        raise InputError(
            "whatsapp connector: timezone must be an IANA time zone name such as Asia/Riyadh or UTC, "
            f"got {config['timezone']!r}"
        ) from None
    if config["chat"] is not None:
        config["chat"] = config["chat"].strip() or None


configure = checked(
    KIND,
    required={"path": str},
    optional={"timezone": (str, "UTC"), "date_order": (str, "auto"), "chat": (str, None)},
    check=_check,
)


@dataclass(frozen=True)
class Message:
    """One message as the export wrote it, with its item's key and version."""

    key: str
    chat: str
    speaker: str
    text: str
    at: datetime  # aware, in the config's timezone
    url: str
    version: str


@dataclass
class _Line:
    """A message's header line and the lines that continue it."""

    number: int
    fields: tuple[str, str, str]  # the date's three fields as written
    hour: int
    minute: int
    second: int | None
    ampm: str | None
    rest: str  # after the header: "Name: text" or a system line
    marked: bool  # the text after "Name: " began with U+200E or U+200F (iOS: WhatsApp speaking)
    more: list[str] = field(default_factory=list)


class WhatsAppSource:
    """The messages of one chat export, or of every export in a folder (each its own chat)."""

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
        self.date_order: str = config["date_order"]
        self.chat: str | None = config.get("chat")
        self.retry = retry
        self.skipped: dict[str, int] = {}
        self._messages: list[Message] | None = None
        self._by_key: dict[str, Message] = {}

    def scan(self) -> Iterator[ItemRef]:
        for message in self._load():
            yield ItemRef(
                key=message.key,
                version=message.version,
                url=message.url,
                hint={"chat": message.chat, "speaker": message.speaker, "text": message.text, "at": message.at},
            )

    def fetch(self, ref: ItemRef) -> Document:
        hint = ref.hint
        if all(k in hint for k in ("chat", "speaker", "text", "at")):
            chat, speaker, text, at = hint["chat"], hint["speaker"], hint["text"], hint["at"]
        else:
            self._load()
            message = self._by_key.get(ref.key)
            if message is None:
                raise SourceError(f"whatsapp: no message {ref.key} in {self.path} any more", status_code=404)
            chat, speaker, text, at = message.chat, message.speaker, message.text, message.at
        part = Part(anchor="message", text=text, valid_at=at, speaker=speaker, thread=chat)
        return Document(ref=ref, title=chat, parts=(part,), valid_at=at)

    def close(self) -> None:
        self._messages = None
        self._by_key = {}

    def check(self) -> None:
        """The export (or each in the folder) is there, readable and a chat: read as each sync reads it, not kept."""
        self._read()

    def _load(self) -> list[Message]:
        """Every message of the export, oldest first, read once until :meth:`close`."""
        if self._messages is None:
            self._messages = self.retry.call(f"whatsapp: read {self.path}", self._read)
            self._by_key = {m.key: m for m in self._messages}
        return self._messages

    def _read(self) -> list[Message]:
        if not os.path.lexists(self.path):
            raise SourceError(
                f"whatsapp: {self.path} does not exist",
                hint="point the connector's path at an exported chat (.txt or .zip) or a folder of them",
                status_code=404,
            )
        self.skipped = {}
        try:
            files = self._exports()
            if self.chat is not None and len(files) > 1:
                raise SourceError(
                    f"whatsapp: chat names one chat, but {self.path} holds {len(files)} exports",
                    hint="drop chat from the config (each export is named after its file) or point path at one file",
                    status_code=422,
                )
            messages: list[Message] = []
            taken: set[str] = set()
            for where, name, text in files:
                chat = self.chat or name
                n = 2
                while chat in taken:
                    chat, n = f"{self.chat or name} ({n})", n + 1
                taken.add(chat)
                messages.extend(self._parse(where, chat, text))
        except PermissionError as exc:
            raise SourceError(
                f"whatsapp: cannot read {exc.filename or self.path}: permission denied", status_code=403
            ) from exc
        except zipfile.BadZipFile as exc:
            raise SourceError(f"whatsapp: {self.path} is not a readable zip: {exc}", status_code=422) from exc
        except OSError as exc:
            raise SourceError(f"whatsapp: cannot read {self.path}: {exc}") from exc
        messages.sort(key=lambda m: m.at)  # stable: a chat's own order is kept within a minute
        return messages

    def _exports(self) -> list[tuple[str, str, str]]:
        """Each export as (where, chat name, text): the file itself, or every export in the folder;
        the path reached without a link (under the roots when given), nothing in it followed."""
        fd = open_confined(self.path, self.roots)
        if not is_folder(fd):
            found = self._export(self.path, fd)
            if found is None:
                raise SourceError(f"whatsapp: {self.path} is a zip without a chat export (_chat.txt)", status_code=422)
            return [found]
        out: list[tuple[str, str, str]] = []
        try:
            names = sorted(name for _, _, files in _top(walk(fd)) for name in files)
            for name in names:
                child = self.path / name
                if child.suffix.lower() not in (".txt", ".zip"):
                    continue
                try:
                    found = self._export(child, open_below(fd, name, shown=str(child)))
                except (zipfile.BadZipFile, LinkRefused):
                    found = None
                if found is not None and _headers(found[2]):
                    out.append(found)
                else:
                    self.skipped["files"] = self.skipped.get("files", 0) + 1
        finally:
            os.close(fd)
        if not out:
            raise SourceError(
                f"whatsapp: {self.path} holds no WhatsApp chat export (.txt or .zip)",
                hint="export a chat from WhatsApp (More > Export chat) into that folder",
                status_code=422,
            )
        return out

    def _export(self, path: Path, fd: int) -> tuple[str, str, str] | None:
        """A .txt's text, or the chat export inside a .zip (None: the zip holds none), from ``fd``
        (which it closes)."""
        if path.suffix.lower() != ".zip":
            try:
                data = read_fd(fd, self.limits.max_member_bytes)
            finally:
                os.close(fd)
            if len(data) > self.limits.max_member_bytes:
                raise ArchiveTooLarge(f"whatsapp: {path} is over {self.limits.max_member_bytes:,} bytes")
            return str(path), _chat_name(path.stem), _decode(data)
        archive = Archive(open_file(fd), self.limits, name=str(path))  # owns fd from here, closed either way
        with archive:
            members = [n for n in archive.namelist() if _EXPORT_MEMBER.match(n.rsplit("/", 1)[-1])]
            if not members:
                return None
            members.sort(key=lambda n: (not n.endswith("_chat.txt"), n))
            member = members[0]
            stem = member.rsplit("/", 1)[-1][:-4]
            name = _chat_name(path.stem if stem == "_chat" else stem)
            return str(path), name, _decode(archive.read(member))

    def _parse(self, where: str, chat: str, text: str) -> list[Message]:
        """The file's messages, skipping system lines, media and deleted ones."""
        lines = _headers(text)
        if not lines:
            raise SourceError(
                f"whatsapp: {where} is not a WhatsApp chat export: no line starts like "
                "'31/12/2023, 21:41 - Name: text' or '[31/12/2023, 21:41:05] Name: text'",
                status_code=422,
            )
        order = self.date_order if self.date_order != "auto" else _date_order(where, lines)
        seen: dict[tuple[datetime, str], int] = {}
        out: list[Message] = []
        for line in lines:
            local = _local_time(where, line, order)
            named = _NAMED.match(line.rest)
            if named is None or _SYSTEM_NAME.search(named["name"]):
                self._skip("system")
                continue
            speaker = named["name"].strip()
            body = "\n".join([named["text"] or "", *line.more]).strip()
            body = _EDITED.sub("", body).strip()
            if _ENCRYPTED.match(body) or (line.marked and _SYSTEM_TEXT.search(body)):
                self._skip("system")
                continue
            n = seen.get((local, speaker), 0)
            seen[(local, speaker)] = n + 1  # counted before media and deleted ones: a later deletion keeps n
            why, body = notice(body, marked=line.marked)
            if why is not None:
                self._skip(why)
                continue
            at = local.replace(tzinfo=self.zone)
            key = f"{chat}/{local.isoformat()}/{speaker}/{n}"
            stamp = "\x1f".join([body, speaker, at.isoformat()])
            version = hashlib.sha256(stamp.encode()).hexdigest()
            out.append(Message(key, chat, speaker, body, at, f"{where}#{key}", version))
        return out

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def notice(body: str, *, marked: bool = False) -> tuple[str | None, str]:
    """What a message's text is: ``(None, text)`` for a message to keep (an attachment's caption
    without the attachment), else ``(reason, "")`` for what WhatsApp writes in a message's place
    (``attachment``, ``media``, ``call``, ``deleted``). ``marked``: the text began with U+200E
    (iOS marks what WhatsApp writes that way; a bare "Voice call" counts as a call only then)."""
    folded = _fold(body)
    if _DELETED.fullmatch(folded):
        return "deleted", ""
    if _CALL.fullmatch(folded) and (marked or not _BARE_CALL.fullmatch(folded)):
        return "call", ""
    if _MEDIA.fullmatch(folded):
        return "media", ""
    kept, attached = [], False
    for line in body.split("\n"):
        one = _fold(line)
        if _ATTACHED_IOS.search(one) or _ATTACHED_ANDROID.fullmatch(one):
            attached = True  # the line names the file (and what iOS says of it: "• 2 pages")
        else:
            kept.append(line)
    text = "\n".join(kept).strip()
    if attached and not text:
        return "attachment", ""
    if not text:
        return "media", ""
    return None, text


def _fold(text: str) -> str:
    """``text`` as the notices are matched: without direction marks and Arabic diacritics, spaces
    made plain, case folded."""
    return _SPACES.sub(" ", _DIACRITICS.sub("", _MARKS.sub("", text))).strip().casefold()


def build(spec: SourceSpec, retry: Retry) -> WhatsAppSource:
    """The source for ``spec`` (its config checked again; an export needs no credential)."""
    return WhatsAppSource(configure(spec.config), retry, roots=spec.roots, limits=spec.archive)


def _top(listing: Iterator[tuple[str, list[str], list[str]]]) -> Iterator[tuple[str, list[str], list[str]]]:
    """The top folder of a :func:`~cabrain.localfiles.walk` only."""
    for folder, dirs, files in listing:
        dirs[:] = []
        yield folder, dirs, files


def _decode(data: bytes) -> str:
    return data.decode("utf-8-sig", errors="replace")


def _chat_name(stem: str) -> str:
    """``WhatsApp Chat with Team Alpha`` -> ``Team Alpha``; any other name stays as it is."""
    match = _CHAT_NAME.match(stem.strip())
    return match["name"].strip() if match else stem.strip()


def _headers(text: str) -> list[_Line]:
    """The export's messages as header lines, each with the lines that continue it; [] if no line
    is a WhatsApp header (the file is not an export)."""
    out: list[_Line] = []
    for number, raw in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        clean = _SPACES.sub(" ", _MARKS.sub("", raw))
        match = _IOS.match(clean) or _ANDROID.match(clean)
        if match is None:
            if out:
                out[-1].more.append(clean)
            continue
        colon = raw.find(": ")
        out.append(
            _Line(
                number=number,
                fields=(match["a"], match["b"], match["c"]),
                hour=int(match["h"]),
                minute=int(match["mi"]),
                second=int(match["s"]) if match["s"] else None,
                ampm=match["ampm"],
                rest=match["rest"],
                marked=colon >= 0 and raw[colon + 2 : colon + 3] in ("\u200e", "\u200f"),
            )
        )
    return out


def _date_order(where: str, lines: list[_Line]) -> str:
    """``ymd``, ``dmy`` or ``mdy`` for the whole file, from its dates' evidence (none: ``dmy``)."""
    short = [line.fields for line in lines if len(line.fields[0]) <= 2]  # year-first dates say nothing
    day_first = any(int(first) > 12 for first, _, _ in short)
    month_first = any(int(second) > 12 for _, second, _ in short)
    if day_first and month_first:
        raise SourceError(
            f"whatsapp: {where} mixes day-first and month-first dates",
            hint='set "date_order" to "dmy" or "mdy" in the connector config',
            status_code=422,
        )
    return "mdy" if month_first else "dmy"


def _local_time(where: str, line: _Line, order: str) -> datetime:
    """The header's time as written (naive, local)."""
    a, b, c = (int(f) for f in line.fields)
    if len(line.fields[0]) == 4:
        year, month, day = a, b, c
    else:
        day, month = (a, b) if order == "dmy" else (b, a)
        year = c + 2000 if len(line.fields[2]) <= 2 else c
    hour = line.hour
    if line.ampm:
        pm = line.ampm[0] in "Pp" or line.ampm == "م"
        hour = hour % 12 + (12 if pm else 0)
    try:
        return datetime(year, month, day, hour, line.minute, line.second or 0)
    except ValueError as exc:
        raise SourceError(
            f"whatsapp: {where} line {line.number}: {'/'.join(line.fields)} is not a date in {order} order ({exc})",
            hint='set "date_order" in the connector config to the order the export uses',
            status_code=422,
        ) from exc
