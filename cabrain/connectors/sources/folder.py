"""A local folder or git repository: Markdown, text and documentation files.

Config: ``path`` (required), ``include`` (glob patterns relative to the folder; default every
documentation file: Markdown, text, reStructuredText, AsciiDoc, Org, HTML, PDF, DOCX, ODT, and
README-like names), ``exclude`` (patterns left out), ``gitignore`` (default true).

With ``gitignore`` on, what git would ignore is left out: in a git work tree the listing is git's
own (``git ls-files --cached --others --exclude-standard``: every ``.gitignore``, ``.git/info/exclude``
and the global excludes), elsewhere every ``.gitignore`` in the tree is read with git's rules
(``pathspec``). ``.git`` itself is never read.

An item is a file: its key the path relative to the folder, its version its size and modification
time (a file touched but unchanged is read again and its parts found unchanged: nothing is
written), its parts the file's sections (:func:`cabrain.connectors.split.split`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from cabrain.connectors.base import Document, ItemRef, SourceSpec
from cabrain.connectors.config import checked, globs, matches
from cabrain.connectors.files import file_document
from cabrain.connectors.retry import Retry
from cabrain.errors import SourceError
from cabrain.localfiles import (
    ArchiveLimits,
    LinkRefused,
    open_below,
    open_confined,
    path_of,
    read_below,
    read_fd,
    stat_below,
    walk,
)

__all__ = ["DOCUMENTS", "KIND", "LOCAL", "FolderSource", "build", "configure"]

KIND = "folder"
LOCAL = True

DOCUMENTS = (
    "*.md", "*.markdown", "*.mdx", "*.txt", "*.text", "*.rst", "*.adoc", "*.asciidoc", "*.org",
    "*.html", "*.htm", "*.pdf", "*.docx", "*.odt",
    "README", "README.*", "CHANGELOG", "CONTRIBUTING", "NOTES", "LICENSE", "AUTHORS",
)  # fmt: skip


configure = checked(
    KIND,
    required={"path": str},
    optional={"include": (list, list(DOCUMENTS)), "exclude": (list, []), "gitignore": (bool, True)},
    check=globs(KIND, "include", "exclude"),
)


class FolderSource:
    """The folder's files, every one opened without following links (:mod:`cabrain.localfiles`):
    under ``roots`` (``CABRAIN_CONNECTOR_ROOTS``) the folder itself is reached from its root without
    a link at every sync; a link inside it, to a file or a folder, is never read."""

    kind: ClassVar[str] = KIND

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        max_file_bytes: int,
        part_chars: int,
        roots: Sequence[str] | None = None,
    ) -> None:
        self.root = path_of(str(config["path"]))
        self.include = list(config["include"])
        self.exclude = list(config["exclude"])
        self.gitignore = bool(config["gitignore"])
        self.max_file_bytes = max_file_bytes
        self.part_chars = part_chars
        self.roots = None if roots is None else tuple(roots)
        self.skipped: dict[str, int] = {}
        self.archive = ArchiveLimits()
        self._fd: int | None = None

    def _folder(self) -> int:
        """The folder, opened once per sync from its root without following links."""
        if self._fd is None:
            try:
                self._fd = open_confined(self.root, self.roots, folder=True)
            except LinkRefused as exc:
                raise SourceError(f"folder: {exc}", status_code=403) from None
            except OSError:
                raise SourceError(f"{self.root} is not a folder (or cannot be read)", status_code=404) from None
        return self._fd

    def _skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    # --- checking ------------------------------------------------------------------------------------
    def check(self) -> None:
        """The folder is there, is a folder (not a file, not reached through a link) and can be listed."""
        where = str(self.root)
        try:
            fd = open_confined(self.root, self.roots, folder=True)
        except LinkRefused as exc:
            if exc.why == "is not a folder":
                raise _not_a_folder(where) from None
            raise SourceError(
                f"folder: {exc}",
                hint="name the folder itself, not a link to it, under the folders connectors may read",
                status_code=403,
            ) from None
        except FileNotFoundError:
            raise SourceError(
                f"folder: {where} does not exist",
                hint="check the path; it is read on the machine that runs the sync",
                status_code=404,
            ) from None
        except NotADirectoryError:
            raise _not_a_folder(where) from None
        except OSError as exc:
            raise _unreadable(where, exc) from None
        try:
            os.listdir(fd)
        except OSError as exc:
            raise _unreadable(where, exc) from None
        finally:
            os.close(fd)

    # --- listing -------------------------------------------------------------------------------------
    def scan(self) -> Iterator[ItemRef]:
        folder = self._folder()
        real = Path(os.path.realpath(self.root))  # items' addresses as before: the folder's real path
        paths = self._git_files(folder) if self.gitignore else None
        if paths is None:
            paths = self._walk(folder)
        for rel in sorted(paths):
            if not matches(rel, self.include) or matches(rel, self.exclude):
                continue
            stat = stat_below(folder, rel)
            if stat is None:
                continue  # a link, not a plain file, or removed while listing: never read
            yield ItemRef(rel, f"{stat.st_size}:{stat.st_mtime_ns}", str(real / rel))

    def _git_files(self, folder: int) -> list[str] | None:
        """git's own listing in a work tree (None: not one, or no git here)."""
        git = shutil.which("git")
        if git is None:
            return None
        try:
            os.stat(".git", dir_fd=folder, follow_symlinks=False)
        except OSError:
            return None
        # the folder opened without links (on Linux), not whatever its path names by now
        where = f"/proc/self/fd/{folder}" if os.path.isdir("/proc/self/fd") else str(self.root)
        try:
            out = subprocess.run(
                [git, "-C", where, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                capture_output=True,
                check=True,
                timeout=300,
                pass_fds=(folder,),
            ).stdout
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
            return None
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

    def _walk(self, folder: int) -> list[str]:
        """Every plain file under the folder, less what its ``.gitignore`` files exclude (when
        asked); links are neither listed nor followed."""
        import pathspec  # lazy: only a folder outside git with gitignore on reads it

        found: list[str] = []
        specs: dict[str, Any] = {}  # folder (relative, "" for the root) -> its .gitignore's spec

        def ignored(rel: str, is_dir: bool) -> bool:
            if not self.gitignore:
                return False
            decision = None
            parts = rel.split("/")
            for depth in range(len(parts)):
                folder = "/".join(parts[:depth])
                spec = specs.get(folder)
                if spec is None:
                    continue
                sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
                result = spec.check_file(sub)
                if result.include is not None:
                    decision = result.include
            return bool(decision)

        for rel_dir, dirs, files in walk(folder):
            prefix = f"{rel_dir}/" if rel_dir else ""
            if self.gitignore and ".gitignore" in files:
                try:
                    data = read_below(folder, prefix + ".gitignore", max_bytes=self.max_file_bytes)
                    lines = data.decode("utf-8", errors="replace").splitlines()
                    specs[rel_dir] = pathspec.GitIgnoreSpec.from_lines(lines)
                except OSError:
                    pass
            dirs[:] = sorted(d for d in dirs if d != ".git" and not ignored(prefix + d, True))
            found += [prefix + f for f in files if not ignored(prefix + f, False)]
        return found

    # --- reading -------------------------------------------------------------------------------------
    def fetch(self, ref: ItemRef) -> Document:
        path = self.root / ref.key
        try:
            fd = open_below(self._folder(), ref.key, shown=str(path))
        except LinkRefused:
            self._skip("links")  # a link (or no longer a plain file): never followed
            return Document(ref, ref.key, ())
        except FileNotFoundError:
            raise SourceError(f"{path} was removed", status_code=404) from None
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}", status_code=403) from None
        try:
            stat = os.fstat(fd)
            if stat.st_size > self.max_file_bytes:
                self._skip("too large")
                return Document(ref, ref.key, ())
            data = read_fd(fd, self.max_file_bytes)
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}", status_code=403) from None
        finally:
            os.close(fd)
        if len(data) > self.max_file_bytes:
            self._skip("too large")
            return Document(ref, ref.key, ())
        when = datetime.fromtimestamp(stat.st_mtime, UTC)
        return file_document(
            ref,
            data,
            path.name,
            when=when,
            max_bytes=self.max_file_bytes,
            part_chars=self.part_chars,
            skipped=self.skipped,
            archive=self.archive,
        )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _not_a_folder(where: str) -> SourceError:
    return SourceError(
        f"folder: {where} is a file, not a folder",
        hint="point path at the folder that holds the documents (a chat export has its own kinds: "
        "slack-export, whatsapp)",
        status_code=422,
    )


def _unreadable(where: str, exc: OSError) -> SourceError:
    return SourceError(
        f"folder: {where} cannot be read ({exc.strerror or exc})",
        hint="give the user the sync runs as permission to read and enter the folder",
        status_code=403,
    )


def build(spec: SourceSpec, retry: Retry) -> FolderSource:
    source = FolderSource(spec.config, max_file_bytes=spec.max_file_bytes, part_chars=spec.part_chars, roots=spec.roots)
    source.archive = spec.archive
    return source
