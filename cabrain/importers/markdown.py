"""Markdown memory files: the instructions and notes agents keep as files, section by section.

A path may be one file (any Markdown or text file) or a folder, searched recursively (but for
``.git``, ``node_modules``, ``.venv``, ``venv`` and ``__pycache__``) for the files memory tools
write:

    CLAUDE.md, CLAUDE.local.md (Claude Code), AGENTS.md, GEMINI.md,     fact, procedural (instructions)
    TOOLS.md (OpenClaw), .cursorrules, .windsurfrules, *.mdc in .cursor/rules
    MEMORY.md, USER.md, and any *.md in a folder named memory            fact, semantic
      (Claude Code's auto memory topics, OpenClaw's notes)
    SOUL.md, IDENTITY.md (OpenClaw: the agent's persona)                 belief, semantic
    memory/YYYY-MM-DD.md (OpenClaw's daily notes)                        experience, episodic

Names match whatever their case; another file given on its own reads as fact, semantic. Each file is
cut into its sections by :func:`cabrain.connectors.split.split` (a section's text starts with its
heading path, so it reads on its own; one longer than 2,000 characters is cut into pieces). YAML
front matter (a Cursor rule's ``description``, ``globs``, ``alwaysApply``) is kept in the records'
metadata, not in their text.

**Bullets.** A section whose text under its heading is nothing but an unordered list (``-``, ``*``,
``+`` items, with their nested lines) of 5 items or more becomes one record per top-level item, each
starting with the section's heading path: such lists (typical of CLAUDE.md and .cursorrules) are
standalone rules, and one record each lets recall find the one that matters. A shorter list, a
numbered list (steps of one procedure), a list with prose around it, or one with an item too long
for a record of its own stays one section. The rule
counts items rather than characters so that rewording one rule never turns its section from one
record into many (or back): only adding or removing items across the threshold does.

**Keys** are ``<path relative to the folder>#<section anchor>`` (the file's name for a lone file;
the anchor is the heading path, ``Setup / Database``, ``~2`` for a long section's second piece, and
empty for the text before the first heading), and a bullet's is the section's key followed by
``~`` and a hash of the item (rewording a rule gives it a new key, and its old key is gone from the
file). A key depends on its own section only: editing another section leaves it as it is. Times are the file's modification time (a daily note's: its date).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from cabrain.connectors.base import Part
from cabrain.connectors.split import split
from cabrain.errors import InputError
from cabrain.importers.records import ImportRecord, Parsed, digest, read_bytes, utc
from cabrain.localfiles import open_confined, read_below, walk

__all__ = ["FORMAT", "parse"]

FORMAT = "markdown"

PART_CHARS = 2000  # the most characters of one section's record (split's max_chars)
BULLETS_AT_LEAST = 5  # a section that is a list of this many items or more: one record per item

_INSTRUCTIONS = frozenset(
    {"claude.md", "claude.local.md", "agents.md", "gemini.md", "tools.md", ".cursorrules", ".windsurfrules"}
)
_PERSONA = frozenset({"soul.md", "identity.md"})
_NOTES = frozenset({"memory.md", "user.md"})
_SKIPPED_FOLDERS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__"})
_DAILY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_ITEM = re.compile(r"^ {0,3}[-*+][ \t]+\S")  # a top-level unordered list item
_ORDERED = re.compile(r"^ {0,3}\d{1,9}[.)][ \t]")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_HEADER_END = "\n\n"  # a section's heading path ends here (split's layout)
_HINT = r"[_*]\([^\n]*\)[_*]"  # a template's hint: _(optional)_
_LABEL = re.compile(r"^(\*\*|__)[^\n:*_]{1,80}:\1")  # **Name:** (a bold label: a plain "Run:" opens a list)
_PLACEHOLDER = re.compile(rf"^(?:(\*\*|__)[^\n:*_]{{1,80}}:\1)?\s*(?:{_HINT})?$")
_HINT_LINE = re.compile(rf"^{_HINT}$")


def parse(path: Path) -> Parsed:
    """The sections of the memory file at ``path``, or of every memory file in the folder."""
    parsed = Parsed()
    if path.is_dir():
        try:
            folder = open_confined(path, None, folder=True)  # the operator's folder, as given
        except OSError as exc:
            raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        try:
            links: list[str] = []
            files = list(_memory_files(path, folder, links))
            parsed.skip("a link (not followed: its target is read where it is)", len(links))
            if not files:
                raise InputError(
                    f"{path}: no memory files in this folder",
                    hint="it reads CLAUDE.md, AGENTS.md, MEMORY.md, SOUL.md, TOOLS.md, .cursorrules and the like; "
                    "give one of them, or the folder that holds them",
                )
            for rel in files:
                file = path / rel
                text = _folder_text(folder, rel, file)
                if text is None:
                    parsed.skip("not UTF-8 text")
                else:
                    _file(rel, text, file, parsed)
        finally:
            os.close(folder)
    else:
        text = _text(path, lone=True)
        assert text is not None  # a lone file raises instead
        # a link is read as the file it names (CLAUDE.md linked to AGENTS.md: the same records)
        _file(PurePosixPath(path.resolve().name), text, path, parsed)
    return parsed


def _memory_files(root: Path, folder: int, links: list[str]) -> Iterator[PurePosixPath]:
    """The memory files under ``root`` (open as ``folder``), relative, in path order; a link, to a
    file or a folder, is neither listed nor followed (a link named as a memory file is added to
    ``links``)."""

    def left_out(name: str) -> None:
        rel = PurePosixPath(name)
        if rel.parts[0] not in _SKIPPED_FOLDERS and _is_memory_file(rel, root):
            links.append(name)

    for here, dirs, names in walk(folder, left_out):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_FOLDERS)
        for name in sorted(names):
            rel = PurePosixPath(here, name) if here else PurePosixPath(name)
            if _is_memory_file(rel, root):
                yield rel


def _folder_text(folder: int, rel: PurePosixPath, shown: Path) -> str | None:
    """A memory file in the folder, read without following links (None: not UTF-8 text)."""
    try:
        raw = read_below(folder, str(rel), shown=str(shown))
    except OSError as exc:
        raise InputError(f"{shown}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _is_memory_file(rel: PurePosixPath, root: Path) -> bool:
    name = rel.name.lower()
    parents = [p.lower() for p in (*root.parts, *rel.parent.parts)]
    if name in _INSTRUCTIONS | _PERSONA | _NOTES:
        return True
    if name.endswith(".mdc"):
        return parents[-2:] == [".cursor", "rules"]
    return name.endswith(".md") and parents[-1] == "memory"


def _text(path: Path, *, lone: bool) -> str | None:
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if lone:
            raise InputError(f"{path}: not UTF-8 text (byte {exc.start})", hint="give a Markdown file") from exc
        return None


def _kind(rel: PurePosixPath) -> tuple[str, str]:
    """The network and memory type of a file's records, by its name and place."""
    name = rel.name.lower()
    if name in _INSTRUCTIONS or name.endswith(".mdc"):
        return "fact", "procedural"
    if name in _PERSONA:
        return "belief", "semantic"
    if _DAILY.match(rel.stem) and rel.parent.name.lower() in ("memory", ""):
        return "experience", "episodic"
    return "fact", "semantic"


def _file(rel: PurePosixPath, text: str, path: Path, parsed: Parsed) -> None:
    front, body = _front_matter(text)
    if not body.strip():
        parsed.skip("empty file")
        return
    network, memory_type = _kind(rel)
    daily = _DAILY.match(rel.stem)
    when = (
        datetime(int(daily[1]), int(daily[2]), int(daily[3]), tzinfo=UTC)
        if daily and memory_type == "episodic"
        else utc(path.stat().st_mtime)
    )
    base: dict[str, Any] = {"file": str(rel)}
    if front:
        base["front_matter"] = front

    def record(key: str, content: str, part: Part, section: str) -> ImportRecord:
        return ImportRecord(
            key=key,
            content=content,
            valid_at=when,
            network=network,
            memory_type=memory_type,
            metadata={**base, **({"section": section} if section else {})},
            ref=f"{rel}#{part.anchor}" if part.anchor else str(rel),
        )

    # whole sections (a limit no section reaches), and the pieces a section longer than PART_CHARS is cut into
    sections = split(body, markdown=True, max_chars=2 * len(body) + 2, title=rel.name)
    pieces = split(body, markdown=True, max_chars=PART_CHARS, title=rel.name)
    for section, own in _by_section(sections, pieces):
        header, items = _bullets(section)
        if items:
            for item in items:
                if _empty_field(item):
                    parsed.skip("empty template field")
                    continue
                content = f"{header}{_HEADER_END}{item}" if header else item
                key = f"{rel}#{section.anchor}"
                parsed.add(replace(record(f"{key}~{digest(item)[:8]}", content, section, section.anchor), group=key))
            continue
        for piece in own:
            kept, fields = _filled(piece)
            parsed.skip("empty template field", fields)
            if kept is None:
                parsed.skip("empty template section")
            elif kept:
                parsed.add(record(f"{rel}#{piece.anchor}", kept, piece, section.anchor))


def _by_section(sections: list[Part], pieces: list[Part]) -> Iterator[tuple[Part, list[Part]]]:
    """Each whole section with the pieces :func:`split` cut it into (both lists in text order; a
    section's first piece carries its anchor)."""
    index = -1
    own: dict[int, list[Part]] = {}
    for piece in pieces:
        if index + 1 < len(sections) and piece.anchor == sections[index + 1].anchor:
            index += 1
        own.setdefault(max(index, 0), []).append(piece)
    for number, section in enumerate(sections):
        yield section, own.get(number, [])


def _bullets(section: Part) -> tuple[str, list[str]]:
    """The section's heading path and its list items, when the rule of the module's doc makes each
    item a record; else the heading path and []."""
    text = section.text
    header, body = text.split(_HEADER_END, 1) if section.anchor and _HEADER_END in text else ("", text)
    items: list[list[str]] = []
    blank, base = False, 0
    for line in body.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        if _ITEM.match(line) and (not items or indent <= base):
            base = base if items else indent
            items.append([line.strip()[1:].strip()])
        elif not line.strip():
            pass
        elif items and (line[:1] in (" ", "\t") or not (blank or _ORDERED.match(line) or _FENCE.match(line))):
            items[-1].append(line.rstrip())  # the item's nested lines, or its lazy continuation
        else:
            return header, []  # prose, a numbered list or a code block outside the items
        blank = not line.strip()
    texts = ["\n".join(lines) for lines in items]
    if len(texts) < BULLETS_AT_LEAST or max(map(len, texts)) > PART_CHARS - len(header) - len(_HEADER_END):
        return header, []  # too few items, or one too long for a record (the section's pieces then)
    return header, texts


def _empty_field(text: str) -> bool:
    """A template's field left unfilled: ``**Name:**``, ``__Timezone:__``, with at most a hint such as
    ``_(optional)_`` on its line or the lines under it."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    return bool(lines) and all(_PLACEHOLDER.match(line) for line in lines) and bool(_LABEL.match(lines[0]))


def _filled(piece: Part) -> tuple[str | None, int]:
    """A section's text without its unfilled template fields and hints ("" for no text, None for a
    section that held nothing else: an empty template), and how many fields it left out."""
    text = piece.text.strip()
    header, body = text.split(_HEADER_END, 1) if piece.anchor and _HEADER_END in text else ("", text)
    kept: list[str] = []
    dropped, fields, after_field = False, 0, False
    for line in body.split("\n"):
        bare = line.strip()
        field = bool(_ITEM.match(line)) and _empty_field(bare[1:].strip())
        hint = after_field and line[:1] in (" ", "\t") and bool(_PLACEHOLDER.match(bare))  # a field's hint below it
        if field or hint or (bare and _HINT_LINE.match(bare)):
            fields += field
            dropped, after_field = True, field or hint
            continue
        after_field = False
        if bare:
            kept.append(line)
        elif kept and kept[-1] != "":
            kept.append("")
    body = "\n".join(kept).strip()
    if not body:
        return (None if dropped else "" if header else text), fields
    return (f"{header}{_HEADER_END}{body}" if header else body), fields


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    """YAML front matter's ``key: value`` lines, and the text after it."""
    match = _FRONT_MATTER.match(text.replace("\r\n", "\n"))
    if not match:
        return {}, text
    fields: dict[str, str] = {}
    for line in match.group(1).split("\n"):
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.startswith((" ", "\t", "-", "#")):
            fields[key.strip()] = value.strip().strip("\"'")
    return fields, text.replace("\r\n", "\n")[match.end() :]
