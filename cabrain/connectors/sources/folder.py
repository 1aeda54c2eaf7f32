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
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from cabrain.connectors.base import Document, ItemRef, SourceSpec
from cabrain.connectors.config import checked, globs, matches
from cabrain.connectors.files import file_document
from cabrain.connectors.retry import Retry
from cabrain.errors import SourceError

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
    kind: ClassVar[str] = KIND

    def __init__(self, config: Mapping[str, Any], *, max_file_bytes: int, part_chars: int) -> None:
        self.root = Path(str(config["path"])).expanduser()
        self.include = list(config["include"])
        self.exclude = list(config["exclude"])
        self.gitignore = bool(config["gitignore"])
        self.max_file_bytes = max_file_bytes
        self.part_chars = part_chars
        self.skipped: dict[str, int] = {}

    # --- listing -------------------------------------------------------------------------------------
    def scan(self) -> Iterator[ItemRef]:
        root = self.root
        if not root.is_dir():
            raise SourceError(f"{root} is not a folder (or cannot be read)", status_code=404)
        paths = self._git_files() if self.gitignore else None
        if paths is None:
            paths = self._walk()
        for rel in sorted(paths):
            if not matches(rel, self.include) or matches(rel, self.exclude):
                continue
            path = root / rel
            try:
                stat = path.stat()
            except OSError:
                continue  # removed while listing: the next listing forgets it
            if not path.is_file():
                continue
            yield ItemRef(rel, f"{stat.st_size}:{stat.st_mtime_ns}", str(path.resolve()))

    def _git_files(self) -> list[str] | None:
        """git's own listing in a work tree (None: not one, or no git here)."""
        git = shutil.which("git")
        if git is None or not (self.root / ".git").exists():
            return None
        try:
            out = subprocess.run(
                [git, "-C", str(self.root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                capture_output=True,
                check=True,
                timeout=300,
            ).stdout
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
            return None
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

    def _walk(self) -> list[str]:
        """Every file under the folder, less what its ``.gitignore`` files exclude (when asked)."""
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

        for current, dirs, files in os.walk(self.root):
            rel_dir = Path(current).relative_to(self.root).as_posix()
            rel_dir = "" if rel_dir == "." else rel_dir
            marker = Path(current) / ".gitignore"
            if self.gitignore and marker.is_file():
                try:
                    lines = marker.read_text(encoding="utf-8", errors="replace").splitlines()
                    specs[rel_dir] = pathspec.GitIgnoreSpec.from_lines(lines)
                except OSError:
                    pass
            prefix = f"{rel_dir}/" if rel_dir else ""
            dirs[:] = sorted(d for d in dirs if d != ".git" and not ignored(prefix + d, True))
            found += [prefix + f for f in files if not ignored(prefix + f, False)]
        return found

    # --- reading -------------------------------------------------------------------------------------
    def fetch(self, ref: ItemRef) -> Document:
        path = self.root / ref.key
        try:
            stat = path.stat()
            if stat.st_size > self.max_file_bytes:
                self.skipped["too large"] = self.skipped.get("too large", 0) + 1
                return Document(ref, ref.key, ())
            data = path.read_bytes()
        except FileNotFoundError:
            raise SourceError(f"{path} was removed", status_code=404) from None
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}", status_code=403) from None
        when = datetime.fromtimestamp(stat.st_mtime, UTC)
        return file_document(
            ref,
            data,
            path.name,
            when=when,
            max_bytes=self.max_file_bytes,
            part_chars=self.part_chars,
            skipped=self.skipped,
        )

    def close(self) -> None:
        pass


def build(spec: SourceSpec, retry: Retry) -> FolderSource:
    return FolderSource(spec.config, max_file_bytes=spec.max_file_bytes, part_chars=spec.part_chars)
