"""Cutting a document's text into parts that each make a good memory.

A Markdown text (:func:`split` with ``markdown=True``) is cut into its sections by ATX (``## Title``)
and setext (``Title`` over ``===`` or ``---``) headings, never by a ``#`` line inside a fenced code
block or YAML front matter (which is dropped: its fields are a site generator's, not the document's
text). Each section's text starts with its heading path (``Setup › Database``)
so that it reads on its own, and its anchor is that path (``Setup / Database``): an edit in one
section changes that section's part only, so the sync revises one memory. A heading with no text of
its own (``# Setup`` right above ``## Database``) joins the section after it.

A section, or a plain text, longer than ``max_chars`` is cut at paragraph ends, else at sentence ends
(``.`` ``!`` ``?`` ``؟`` and line ends, Arabic text included), else after a comma (``,`` ``،`` ``؛``),
else between words, and only as a last resort inside a word; its pieces after the first take the
anchors ``<anchor>~2``, ``<anchor>~3`` ...
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, replace

from cabrain.connectors.base import Part

__all__ = ["split"]

PATH_SEPARATOR = " › "  # between the headings of the path a section's text starts with
ANCHOR_SEPARATOR = " / "  # between the headings of a section's anchor

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_NOT_A_SETEXT_TITLE = re.compile(r"^(?: {4}|\t| {0,3}(?:[>|]|[-*+][ \t]|\d{1,9}[.)][ \t]))")
# YAML (or TOML) front matter: a rule, ``key: value`` lines, a rule; not a rule that opens the text.
_FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\n[A-Za-z_][\w.-]*[ \t]*[:=].*?\n\1[ \t]*(?:\n|\Z)", re.DOTALL)

# Where a piece may end, best first; a match's end is the cut. Each tier is tried before the next.
_BREAKS = (
    re.compile(r"(?=\n[ \t]*\n)"),  # a paragraph's end
    re.compile(r"[.!?؟۔…]+[\"'”’»)\]]*(?=\s)|[.!?؟](?=[\u0621-\u064a])|(?=\n)"),  # a sentence's or a line's end
    re.compile(r"[,;:،؛](?=\s)|[،؛](?=\S)"),  # a clause's end
    re.compile(r"(?=\s)"),  # a word's end
)


@dataclass
class _Section:
    """A heading's section: its heading path (empty for the text before the first heading) and the
    lines under the heading up to the next one."""

    path: tuple[str, ...]
    lines: list[str]


def split(
    text: str, *, markdown: bool, max_chars: int = 2000, min_chars: int = 200, title: str | None = None
) -> list[Part]:
    """``text`` as parts of at most ``max_chars`` characters (but for a heading path longer than
    half of it), in order, with anchors unique within the text; [] for a blank text.

    ``markdown``: cut into sections by headings first (see the module's doc); else paragraphs are
    grouped up to ``max_chars``, anchored ``""``, ``"~2"`` ... A heading with no text under it and
    shorter than ``min_chars`` joins the section after it; a piece is cut no shorter than
    ``min_chars`` (up to half of ``max_chars``) where the text allows. Each part's ``title`` is its
    section's heading, or ``title`` for the text before the first heading and for a plain text."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be positive, not {max_chars}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return []
    if not markdown:
        return _anchored("", "", _strip_blank(text), title, max_chars=max_chars, min_chars=min_chars)
    sections = list(_sections(text))
    anchors = _anchors(sections)
    parts: list[Part] = []
    waiting: list[int] = []  # heading-only sections, joining the next section with a body
    for index, section in enumerate(sections):
        body = _strip_blank("\n".join(section.lines))
        if not section.path:
            if body:
                parts.extend(_anchored("", "", body, title, max_chars=max_chars, min_chars=min_chars))
        elif not body and len(PATH_SEPARATOR.join(section.path)) < min_chars:
            waiting.append(index)
        else:
            header = _header([sections[i].path for i in waiting], section.path)
            waiting = []
            parts.extend(
                _anchored(anchors[index], header, body, section.path[-1], max_chars=max_chars, min_chars=min_chars)
            )
    if waiting:  # headings at the very end, with no text after them: the last stands, the others joining it
        last = sections[waiting[-1]]
        header = _header([sections[i].path for i in waiting[:-1]], last.path)
        parts.extend(
            _anchored(anchors[waiting[-1]], header, "", last.path[-1], max_chars=max_chars, min_chars=min_chars)
        )
    return _unique(parts)


def _strip_blank(text: str) -> str:
    """``text`` without blank lines at either end or spaces at its end (its first line keeps its
    indent: it may be code)."""
    return re.sub(r"\A(?:[ \t]*\n)+", "", text).rstrip()


def _header(joined: list[tuple[str, ...]], path: tuple[str, ...]) -> str:
    """The heading lines a section's text starts with: the paths of the heading-only sections that
    joined it (but its own ancestors', which its path names already), then its own path."""
    lines = [PATH_SEPARATOR.join(other) for other in joined if other != path[: len(other)]]
    return "\n".join([*lines, PATH_SEPARATOR.join(path)])


def _sections(text: str) -> Iterator[_Section]:
    """The text's sections in order, the first the text before any heading (maybe empty)."""
    lines = text.split("\n")
    start = 0
    front = _FRONT_MATTER.match(text)
    if front:  # YAML or TOML front matter (a static site's, an MDX page's): fields, not text to keep
        start = front.group(0).count("\n") + (0 if front.group(0).endswith("\n") else 1)
    current = _Section((), [])
    stack: list[tuple[int, str]] = []  # (level, heading) of the open sections
    fence: str | None = None  # the open fence's marker
    index = start
    while index < len(lines):
        line = lines[index]
        heading: tuple[int, str] | None = None
        fence_match = _FENCE.match(line)
        if fence is not None:
            if fence_match and _closes(fence, fence_match):
                fence = None
        elif fence_match and not (fence_match.group(1)[0] == "`" and "`" in fence_match.group(2)):
            fence = fence_match.group(1)
        elif (atx := _ATX.match(line)) and (atx.group(2) or "").strip(" #"):
            heading = (len(atx.group(1)), (atx.group(2) or "").strip())
        elif index + 1 < len(lines) and _is_setext_title(lines, index):
            level = 1 if lines[index + 1].lstrip().startswith("=") else 2
            heading = (level, line.strip())
            index += 1  # the underline
        if heading is None:
            current.lines.append(line)
        else:
            yield current
            while stack and stack[-1][0] >= heading[0]:
                stack.pop()
            stack.append(heading)
            current = _Section(tuple(title for _, title in stack), [])
        index += 1
    yield current


def _closes(fence: str, line: re.Match[str]) -> bool:
    """Whether a fence-like ``line`` closes the block ``fence`` opened: the same character, at least
    as many, nothing after them."""
    marker = line.group(1)
    return marker[0] == fence[0] and len(marker) >= len(fence) and not line.group(2).strip()


def _is_setext_title(lines: list[str], index: int) -> bool:
    """Whether ``lines[index]`` is a setext heading: a line of text alone in its paragraph (no list
    item, quote, table row or indented code), underlined by ``===`` or ``---``."""
    line = lines[index]
    if (
        not line.strip()
        or _NOT_A_SETEXT_TITLE.match(line)
        or _SETEXT.match(line)
        or not _SETEXT.match(lines[index + 1])
    ):
        return False
    above = lines[index - 1] if index > 0 else ""
    return not above.strip() or bool(_ATX.match(above))


def _anchors(sections: list[_Section]) -> list[str]:
    """Each section's anchor: its heading path, ``#2``, ``#3`` ... on a path seen before."""
    seen: dict[str, int] = {}
    anchors: list[str] = []
    for section in sections:
        anchor = ANCHOR_SEPARATOR.join(section.path)
        seen[anchor] = seen.get(anchor, 0) + 1
        anchors.append(anchor if seen[anchor] == 1 else f"{anchor}#{seen[anchor]}")
    return anchors


def _anchored(anchor: str, header: str, body: str, title: str | None, *, max_chars: int, min_chars: int) -> list[Part]:
    """One section's parts: ``header`` then a blank line then ``body``, cut to ``max_chars`` into
    pieces that each start with the header, anchored ``anchor``, ``anchor~2`` ..."""
    lead = f"{header}\n\n" if header and body else header
    limit = max(max_chars - len(lead), max_chars // 2, 1)
    pieces = _pieces(body, limit=limit, min_chars=min(min_chars, limit // 2)) if body else [""]
    return [
        Part(anchor=anchor if number == 1 else f"{anchor}~{number}", text=f"{lead}{piece}", title=title)
        for number, piece in enumerate(pieces, start=1)
    ]


def _pieces(text: str, *, limit: int, min_chars: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, each cut at the best break (see
    :data:`_BREAKS`) that leaves it at least ``min_chars`` long, else hard at ``limit``."""
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = _cut(rest, limit=limit, min_chars=min_chars)
        piece = rest[:cut].rstrip()
        if piece.strip():
            pieces.append(piece)
        rest = _trim_start(rest[cut:])
    if rest.strip():
        pieces.append(rest)
    return pieces


def _cut(text: str, *, limit: int, min_chars: int) -> int:
    """Where to end the piece at the start of ``text``: the last break of the best tier in
    ``[min_chars, limit]``, else the last word's end, else ``limit`` moved back off any combining
    mark (an Arabic vowel sign stays with its letter)."""
    window = text[: limit + 1]
    for tier, shortest in (*((tier, max(min_chars, 1)) for tier in _BREAKS), (_BREAKS[-1], 1)):
        ends = [match.end() for match in tier.finditer(window) if shortest <= match.end() <= limit]
        if ends:
            return ends[-1]
    cut = limit
    while cut > 1 and unicodedata.combining(text[cut]):
        cut -= 1
    return cut


def _trim_start(text: str) -> str:
    """``text`` without the blank lines it starts with, or, when its first line goes on from the
    previous piece, without the spaces it starts with (an indented line keeps its indent)."""
    blank = re.match(r"[ \t]*\n(?:[ \t]*\n)*", text)
    return text[blank.end() :] if blank else text.lstrip()


def _unique(parts: list[Part]) -> list[Part]:
    """``parts`` with any anchor seen before in the text (a heading that reads ``Notes#2`` after two
    ``Notes``) suffixed ``#2``, ``#3`` ... until unique, so that every anchor names one part."""
    used: set[str] = set()
    unique: list[Part] = []
    for part in parts:
        anchor, number = part.anchor, 1
        while anchor in used:
            number += 1
            anchor = f"{part.anchor}#{number}"
        used.add(anchor)
        unique.append(part if anchor == part.anchor else replace(part, anchor=anchor))
    return unique
