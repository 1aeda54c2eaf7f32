"""Reading the host's files without following links, and archives within limits.

Every file a connector (a folder, a Slack or WhatsApp export) or an importer reads is opened here:

- :func:`open_confined` opens the path a connector names. Given ``roots`` (the folders connectors
  added through the API may read, ``CABRAIN_CONNECTOR_ROOTS``), the path must lie under one of them
  *as written*, and it is opened one component at a time from that root with ``O_NOFOLLOW``: a link
  anywhere below the root (the folder itself swapped for a link after it was added, a folder or a
  file inside it) is refused at read time, not only when the connector was added. Without roots
  (the operator's command line, which may name any path) the path itself is opened as given and
  only what lies below it is read without following links.
- :func:`open_below` / :func:`read_below` / :func:`walk` read what lies under an open folder, every
  component with ``O_NOFOLLOW`` and only regular files: a link to ``CABRAIN_HOME/ray/auth_token``
  or ``/etc/passwd`` planted in a shared folder is never read.
- :class:`Archive` reads a ZIP with limits on its member count, each member's unpacked size, the
  total unpacked and the compression ratio (``CABRAIN_ARCHIVE_*``), counting the bytes as they are
  unpacked, so a header that lies about a member's size cannot get past them; :func:`gunzip` does
  the same for a gzip stream. Over a limit: :class:`ArchiveTooLarge` (413), nothing more read.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import stat
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cabrain.errors import ArchiveTooLarge

__all__ = [
    "Archive",
    "ArchiveLimits",
    "ArchiveTooLarge",
    "LinkRefused",
    "gunzip",
    "open_below",
    "open_confined",
    "read_below",
    "walk",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted in the folder must not hang the read
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK
_CHUNK = 1 << 20


class LinkRefused(PermissionError):
    """A path that goes through a symbolic link (or is not a plain file or folder), or lies outside
    the folders a connector may read: refused, never followed."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(errno.EACCES, f"{path}: {why}", path)
        self.why = why

    def __str__(self) -> str:
        return f"{self.filename}: {self.why}"


# --- opening without links --------------------------------------------------------------------------


def _components(rel: str) -> list[str]:
    parts = [p for p in rel.replace(os.sep, "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise LinkRefused(rel, "a path with '..' is not read")
    return parts


def _refusal(dir_fd: int, name: str, shown: str, exc: OSError) -> OSError:
    """Why opening ``name`` under ``dir_fd`` failed: a link (refused) or the error itself."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return exc
    if stat.S_ISLNK(st.st_mode):
        return LinkRefused(shown, "is a symbolic link, which is never followed")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return LinkRefused(shown, "is not a folder")
    return exc


def open_below(dir_fd: int, rel: str, *, folder: bool = False, shown: str | None = None) -> int:
    """A descriptor of ``rel`` under the open folder ``dir_fd``, every component opened with
    ``O_NOFOLLOW``: a plain file (or, with ``folder``, a folder), else :class:`LinkRefused`."""
    shown = shown or rel
    fd = os.dup(dir_fd)
    try:
        parts = _components(rel)
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            flags = _DIR_FLAGS if (folder or not last) else _FILE_FLAGS
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError as exc:
                raise _refusal(fd, name, shown, exc) from None
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if folder and not stat.S_ISDIR(st.st_mode):
            raise LinkRefused(shown, "is not a folder")
        if not folder and not stat.S_ISREG(st.st_mode):
            raise LinkRefused(shown, "is not a plain file")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _root_forms(root: str | Path) -> tuple[str, list[str]]:
    """A root as the folder to open (its real path: the operator's own links are followed there)
    and the forms a connector's path may name it by (as written, and real)."""
    written = os.path.abspath(os.path.expanduser(str(root)))
    real = os.path.realpath(written)
    return real, sorted({written, real}, key=len, reverse=True)


def open_confined(path: str | Path, roots: Sequence[str | Path] | None, *, folder: bool | None = None) -> int:
    """A descriptor of the file or folder ``path`` (``folder``: which it must be; None: either).

    With ``roots``, ``path`` must lie under one of them as written, and is opened from that root
    one component at a time without following links; a path outside every root, or reached through
    a link, raises :class:`LinkRefused`. Without ``roots`` (the operator's own path) ``path`` is
    opened as given."""
    written = os.path.abspath(os.path.expanduser(str(path)))
    if roots is None:
        flags = os.O_RDONLY | _CLOEXEC | _NONBLOCK | (_DIRECTORY if folder else 0)
        fd = os.open(written, flags)
        return _checked_kind(fd, written, folder)
    for root in roots:
        real, forms = _root_forms(root)
        for form in forms:
            if written == form or written.startswith(form.rstrip("/") + "/"):
                rel = written[len(form) :]
                root_fd = os.open(real, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
                try:
                    if not _components(rel):
                        return _checked_kind(os.dup(root_fd), written, folder)
                    if folder is None:
                        try:
                            return open_below(root_fd, rel, shown=written)
                        except LinkRefused as exc:
                            if exc.why != "is not a plain file":
                                raise
                        return open_below(root_fd, rel, folder=True, shown=written)
                    return open_below(root_fd, rel, folder=folder, shown=written)
                finally:
                    os.close(root_fd)
    shown = ", ".join(str(r) for r in roots) or "none is set"
    raise LinkRefused(written, f"lies outside the folders connectors may read (CABRAIN_CONNECTOR_ROOTS: {shown})")


def _checked_kind(fd: int, shown: str, folder: bool | None) -> int:
    mode = os.fstat(fd).st_mode
    ok = (
        stat.S_ISDIR(mode) or stat.S_ISREG(mode)
        if folder is None
        else (stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode))
    )
    if not ok:
        os.close(fd)
        raise LinkRefused(shown, "is not a folder" if folder else "is not a plain file")
    return fd


def is_folder(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)


def read_fd(fd: int, max_bytes: int | None = None) -> bytes:
    """Everything left in ``fd`` (at most ``max_bytes`` + 1 bytes: a caller sees it is over)."""
    chunks: list[bytes] = []
    got = 0
    while True:
        want = _CHUNK if max_bytes is None else min(_CHUNK, max_bytes + 1 - got)
        if want <= 0:
            break
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_below(dir_fd: int, rel: str, *, max_bytes: int | None = None, shown: str | None = None) -> bytes:
    """The bytes of the plain file ``rel`` under ``dir_fd``, read without following links."""
    fd = open_below(dir_fd, rel, shown=shown)
    try:
        return read_fd(fd, max_bytes)
    finally:
        os.close(fd)


def stat_below(dir_fd: int, rel: str) -> os.stat_result | None:
    """The plain file ``rel``'s stat, reached without links; None when it is not one (a link, a
    folder, a device, gone)."""
    try:
        fd = open_below(dir_fd, rel)
    except OSError:
        return None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def walk(dir_fd: int, left_out: Callable[[str], None] | None = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk`` of the open folder, without following links: ``(folder, subfolders, files)``
    with the folder relative ("" for the top); subfolders may be pruned in place; only plain files
    and real folders are listed (links of either kind are left out, and named to ``left_out``)."""
    for top, dirs, files, fd in os.fwalk(".", dir_fd=dir_fd, follow_symlinks=False):
        rel = "" if top == "." else top[2:] if top.startswith("./") else top
        real_dirs = [d for d in dirs if _kind(fd, d) == "dir"]
        if left_out is not None:
            for name in [d for d in dirs if d not in real_dirs] + [f for f in files if _kind(fd, f) != "file"]:
                left_out(f"{rel}/{name}" if rel else name)
        dirs[:] = real_dirs
        yield rel, dirs, [f for f in files if _kind(fd, f) == "file"]


def _kind(dir_fd: int, name: str) -> str:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return "gone"
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def open_file(fd: int) -> IO[bytes]:
    """A binary file object over ``fd`` (which it then owns)."""
    return os.fdopen(fd, "rb")


def path_of(path: str | Path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(str(path))))


# --- archives ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveLimits:
    """What one archive may hold (``CABRAIN_ARCHIVE_*``)."""

    max_members: int = 200_000
    max_member_bytes: int = 256 << 20
    max_total_bytes: int = 2 << 30
    max_ratio: int = 200
    ratio_floor_bytes: int = 1 << 20  # a member smaller than this unpacked is not held to the ratio

    @classmethod
    def from_settings(cls, settings: Any) -> ArchiveLimits:
        return cls(
            max_members=settings.archive_max_members,
            max_member_bytes=settings.archive_max_member_bytes,
            max_total_bytes=settings.archive_max_total_bytes,
            max_ratio=settings.archive_max_ratio,
        )

    def check_size(self, where: str, unpacked: int, packed: int, total: int) -> None:
        """Refuse ``unpacked`` bytes of a member stored in ``packed`` bytes, ``total`` read in all."""
        if unpacked > self.max_member_bytes:
            raise ArchiveTooLarge(
                f"{where} unpacks to more than {self.max_member_bytes:,} bytes",
                hint="raise CABRAIN_ARCHIVE_MAX_MEMBER_BYTES if the archive is genuine",
            )
        if total > self.max_total_bytes:
            raise ArchiveTooLarge(
                f"{where}: the archive unpacks to more than {self.max_total_bytes:,} bytes in all",
                hint="raise CABRAIN_ARCHIVE_MAX_TOTAL_BYTES if the archive is genuine",
            )
        if unpacked > self.ratio_floor_bytes and unpacked > self.max_ratio * max(packed, 1):
            raise ArchiveTooLarge(
                f"{where} unpacks to over {self.max_ratio} times its {packed:,} stored bytes (a zip bomb?)",
                hint="raise CABRAIN_ARCHIVE_MAX_RATIO if the archive is genuine",
            )

    def check_members(self, where: str, count: int) -> None:
        if count > self.max_members:
            raise ArchiveTooLarge(
                f"{where} holds {count:,} members, over {self.max_members:,}",
                hint="raise CABRAIN_ARCHIVE_MAX_MEMBERS if the archive is genuine",
            )


class Archive:
    """A ZIP read within :class:`ArchiveLimits`: the member count checked on opening, each member's
    declared sizes before it is read, and the bytes it actually unpacks to counted while reading."""

    def __init__(self, file: str | Path | IO[bytes], limits: ArchiveLimits, *, name: str) -> None:
        """``file`` a path, or a file object the archive then owns: closed with it, or at once when it
        is not a ZIP within the limits (never left to the garbage collector, whose late close of a
        descriptor number reused by then would close someone else's file or socket)."""
        self.name = name
        self.limits = limits
        self.file = None if isinstance(file, (str, Path)) else file
        self.total = 0
        try:
            self.zip = zipfile.ZipFile(file)
            try:
                limits.check_members(name, len(self.zip.infolist()))
            except BaseException:
                self.zip.close()
                raise
        except BaseException:
            if self.file is not None:
                self.file.close()
            raise

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def namelist(self) -> list[str]:
        return self.zip.namelist()

    def read(self, member: str) -> bytes:
        info = self.zip.getinfo(member)
        where = f"{self.name}: {member}"
        self.limits.check_size(where, info.file_size, info.compress_size, self.total + info.file_size)
        chunks: list[bytes] = []
        got = 0
        with self.zip.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                got += len(chunk)
                self.limits.check_size(where, got, info.compress_size, self.total + got)
                chunks.append(chunk)
        self.total += got
        return b"".join(chunks)

    def close(self) -> None:
        self.zip.close()
        if self.file is not None:
            self.file.close()


def check_declared(data: bytes, limits: ArchiveLimits, *, name: str) -> None:
    """Refuse a ZIP (an office document) whose member count, declared sizes or ratios are over the
    limits, before a library unpacks it; not a ZIP: nothing to check."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    limits.check_members(name, len(infos))
    total = 0
    for info in infos:
        total += info.file_size
        limits.check_size(f"{name}: {info.filename}", info.file_size, info.compress_size, total)


def gunzip(data: bytes, limits: ArchiveLimits, *, name: str) -> bytes:
    """A gzip stream's contents, unpacked within the limits (counted as they unpack)."""
    chunks: list[bytes] = []
    got = 0
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
        while chunk := stream.read(_CHUNK):
            got += len(chunk)
            limits.check_size(name, got, len(data), got)
            chunks.append(chunk)
    return b"".join(chunks)
