"""A file's bytes as a :class:`~cabrain.connectors.base.Document`: converted to text
(:mod:`cabrain.connectors.convert`) and cut into parts (:mod:`cabrain.connectors.split`), for every
source that reads files (a folder, WebDAV). A file that holds no text, or one that cannot be read (a
corrupt PDF, a broken DOCX), becomes a document without parts - it holds no memory - and is counted
in ``skipped`` by reason, so one bad file never stops a sync."""

from __future__ import annotations

from datetime import datetime

from cabrain.connectors.base import Document, ItemRef
from cabrain.connectors.convert import to_text
from cabrain.connectors.split import split
from cabrain.errors import InputError
from cabrain.localfiles import ArchiveLimits, ArchiveTooLarge, check_declared

__all__ = ["file_document"]


def file_document(
    ref: ItemRef,
    data: bytes,
    name: str,
    *,
    mime: str | None = None,
    when: datetime | None,
    max_bytes: int,
    part_chars: int,
    skipped: dict[str, int],
    archive: ArchiveLimits | None = None,
) -> Document:
    """``data`` (the file ``name``) as the document of ``ref``, titled by its key."""
    try:
        if data.startswith(b"PK\x03\x04"):  # an office file is a ZIP: its members within the limits first
            check_declared(data, archive or ArchiveLimits(), name=name)
        converted = to_text(data, name, mime, max_bytes=max_bytes)
    except ArchiveTooLarge:
        skipped["too large"] = skipped.get("too large", 0) + 1
        return Document(ref, ref.key, (), valid_at=when)
    except InputError:
        skipped["unreadable"] = skipped.get("unreadable", 0) + 1
        return Document(ref, ref.key, (), valid_at=when)
    if converted is None:
        skipped["not text"] = skipped.get("not text", 0) + 1
        return Document(ref, ref.key, (), valid_at=when)
    parts = split(converted.text, markdown=converted.markdown, max_chars=part_chars, title=ref.key)
    return Document(ref, ref.key, tuple(parts), valid_at=when, metadata={"path": ref.key, "format": converted.format})
