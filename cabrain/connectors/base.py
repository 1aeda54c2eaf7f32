"""What every connector's source is: a listing of items with versions, and each item as text.

A **source** knows one place knowledge lives (a GitLab project, a WebDAV folder, a Drive folder, a
Vikunja instance, a local folder, a chat export) and nothing about CaBrain's store. The sync
(:mod:`cabrain.connectors.sync`) walks it in three stages, the way Brain v3 does:

- **raw**: :meth:`Source.scan` lists every item now at the source, each an :class:`ItemRef` with a
  *version* that changes whenever the item's content does (an ETag, ``updated_at``, a content hash).
  The listing is cheap: no item's content is read. Anything listed before and missing now was
  deleted at the source.
- **staged**: :meth:`Source.fetch` reads one changed item and converts it to text, as a
  :class:`Document` of :class:`Part` s: a file's sections, an issue's description and each comment,
  one chat message. Each part keeps its own author and time.
- **indexed**: the sync retains each part as a memory with provenance and remembers which memory
  holds which part, so that an edit revises only the parts that changed.

Before any of it, :meth:`Source.check` reaches the source once, when the connector is added.

Sources are synchronous (their client libraries are: python-gitlab, google-api-python-client,
webdav4); the sync runs them in a worker thread. They raise :class:`~cabrain.errors.SourceAuthError`
for a refused credential and :class:`~cabrain.errors.SourceError` (with the HTTP status) for any
other failure; :func:`cabrain.connectors.retry.calling` retries the transient ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol, runtime_checkable

from cabrain.egress import Egress
from cabrain.localfiles import ArchiveLimits

__all__ = ["Document", "ItemRef", "Part", "Source", "SourceSpec"]


@dataclass(frozen=True)
class ItemRef:
    """One item at the source, as its listing names it.

    ``key``: stable for the item's whole life at the source (a path, ``issues/12``, a Drive file id);
    ``version``: changes whenever what :meth:`Source.fetch` would return changes; ``url``: where a
    person finds the item (a web URL, or a path), kept as the memory's provenance; ``hint``: whatever
    the source wants back in :meth:`Source.fetch` (a file's MIME type, an issue's project id), never
    stored."""

    key: str
    version: str
    url: str
    hint: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Part:
    """One memory's worth of an item: a section of a file, an issue's description or one comment,
    one chat message.

    ``anchor`` names the part within its item and stays the same while the part is "the same part"
    (a heading path, ``note-345``, ``message``), so an edit revises that part's memory. ``valid_at``
    is when it was said or last changed at the source (None: the item's time, else now);
    ``speaker`` who wrote or said it; ``thread`` the conversation it belongs to (a chat channel, an
    issue), so conversation recall treats consecutive parts as turns."""

    anchor: str
    text: str
    valid_at: datetime | None = None
    speaker: str | None = None
    thread: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class Document:
    """An item converted to text: its parts, in order. ``parts`` may be empty (an empty file, a
    binary the converters do not read): the item then holds no memory."""

    ref: ItemRef
    title: str
    parts: tuple[Part, ...]
    valid_at: datetime | None = None  # the item's own time (updated at the source)
    metadata: Mapping[str, Any] = field(default_factory=dict)  # kept on each part's memory (labels, state ...)


@runtime_checkable
class Source(Protocol):
    """One place to read from. ``kind`` is the connector kind (``gitlab``, ``webdav`` ...) and the
    memories' ``source_kind``."""

    kind: ClassVar[str]

    def scan(self) -> Iterator[ItemRef]:
        """Every item at the source now, each once, in a stable order. Pages through the source's
        listing; raises :class:`~cabrain.errors.SourceError` / ``SourceAuthError``."""
        ...

    def fetch(self, ref: ItemRef) -> Document:
        """The item as text. An item gone since the scan raises ``SourceError`` with status 404."""
        ...

    def check(self) -> None:
        """Reach the source once, cheaply, the way a sync would (the folder opened, the export's
        first records parsed, one authenticated request), and raise what a sync would meet: a
        ``SourceAuthError`` for a refused credential, a ``SourceError`` (404: no such path, project
        or folder; 403: not readable; 422: not what the kind reads) whose hint names what to fix.
        Called when a connector is added, so a wrong path or token is found then, not at its first
        sync."""
        ...

    def close(self) -> None:
        """Release clients and files."""
        ...


@dataclass(frozen=True)
class SourceSpec:
    """What a connector kind needs to be built: its settings (``config``, a JSON object stored with
    the connector, never a secret) and its credential, read from the environment variable the config
    names (``token_env``) by the entry point that runs the sync, through ``egress`` (the policy its
    requests connect through, :mod:`cabrain.egress`; the default reaches public addresses only)."""

    kind: str
    config: Mapping[str, Any]
    secret: str | None = None
    max_file_bytes: int = 20_000_000  # a larger file is skipped (CABRAIN_CONNECTOR_MAX_FILE_BYTES)
    part_chars: int = 2000  # split's max_chars (CABRAIN_CONNECTOR_PART_CHARS)
    egress: Egress = field(default_factory=Egress, compare=False)
    # A local source's path must lie under one of these, and is read from there without following
    # links (CABRAIN_CONNECTOR_ROOTS); None: a path the operator's command line added, read as given.
    roots: tuple[str, ...] | None = None
    archive: ArchiveLimits = field(default_factory=ArchiveLimits)  # CABRAIN_ARCHIVE_*
