"""A file's bytes as plain text, whatever the office suite or editor that wrote it.

:func:`to_text` decides the format by the file's extension, then its MIME type, then (for a name
without an extension, or one of Google's native types) by the bytes' signature, and reads it:

- text and code (``.txt``, ``.md``, ``.rst``, ``.json``, ``.py`` ... and extensionless text files),
  decoded by :func:`decode`;
- HTML, its tags stripped (scripts and styles dropped, headings kept as Markdown headings);
- PDF (pypdf), DOCX (python-docx), ODT / ODS / ODP (odfpy), XLSX (openpyxl), PPTX (python-pptx).

Office formats come out as Markdown: headings as ``#`` lines, a sheet as ``## Sheet name``, a slide
as ``## Slide N``, so :func:`cabrain.connectors.split.split` can cut them into sections. A format
this module does not read (images, archives, executables, old binary ``.doc``) gives None: the sync
counts the file as skipped. A file of a format it reads that turns out corrupt raises
:class:`~cabrain.errors.InputError` naming the file, as does a file over the size limit. The
document libraries are imported only when a file needs them.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from cabrain.errors import InputError

__all__ = ["Converted", "decode", "to_text"]


@dataclass(frozen=True)
class Converted:
    """A file as text. ``format`` names the reader that read it (``text``, ``markdown``, ``html``,
    ``pdf``, ``docx``, ``odt``, ``ods``, ``odp``, ``xlsx``, ``pptx``); ``markdown`` says the text has
    Markdown headings worth splitting on."""

    text: str
    format: str
    markdown: bool


_TEXT_EXTENSIONS = frozenset(
    """
    txt text rst adoc asciidoc org csv tsv json jsonl ndjson yaml yml toml ini cfg conf properties log
    tex bib py pyi js mjs cjs jsx ts tsx go rs java kt kts scala c h cc cpp cxx hpp hh cs swift m rb php pl lua r
    sh bash zsh fish ps1 bat sql graphql proto tf hcl css scss less vue svelte xml xsd dockerfile gradle
    """.split()
)
_TEXT_MIMES = frozenset(
    """
    application/json application/ld+json application/xml application/yaml application/x-yaml application/toml
    application/javascript application/x-sh application/sql application/x-tex
    """.split()
)
_BY_EXTENSION: dict[str, str] = {
    **dict.fromkeys(_TEXT_EXTENSIONS, "text"),
    **dict.fromkeys(("md", "markdown", "mdx"), "markdown"),
    **dict.fromkeys(("html", "htm", "xhtml"), "html"),
    **{fmt: fmt for fmt in ("pdf", "docx", "odt", "ods", "odp", "xlsx", "pptx")},
    "xlsm": "xlsx",
}
_OFFICE_MIMES: dict[str, str] = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.presentation": "odp",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.ms-excel.sheet.macroenabled.12": "xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
}
_BY_MIME: dict[str, str] = {
    **_OFFICE_MIMES,
    **dict.fromkeys(_TEXT_MIMES, "text"),
    **dict.fromkeys(("text/markdown", "text/x-markdown"), "markdown"),
    **dict.fromkeys(("text/html", "application/xhtml+xml"), "html"),
}
# Google's own types carry no bytes of their own: a source exports them (a document as Markdown or
# DOCX, a sheet as CSV or XLSX, slides as text or PPTX), and the bytes' signature tells which.
_GOOGLE_MIMES: dict[str, str] = {
    "application/vnd.google-apps.document": "markdown",
    "application/vnd.google-apps.spreadsheet": "text",
    "application/vnd.google-apps.presentation": "text",
}
# Formats whose text we write with Markdown headings.
_MARKDOWN_FORMATS = frozenset({"markdown", "html", "docx", "odt", "ods", "odp", "xlsx", "pptx"})
_DECODED_FORMATS = frozenset({"text", "markdown", "html"})
_LABELS = {  # "<name> is not <label>"
    "pdf": "a readable PDF",
    "docx": "a readable Word document (DOCX)",
    **{fmt: f"a readable OpenDocument file ({fmt.upper()})" for fmt in ("odt", "ods", "odp")},
    "xlsx": "a readable Excel workbook (XLSX)",
    "pptx": "a readable PowerPoint presentation (PPTX)",
}
_ZIP_EXPANSION = 20  # an office file may unpack to this many times the size limit, no more (zip bombs)
_BINARY_PROBE = 8192
_BOMS = (  # UTF-32 LE first: its mark begins with UTF-16 LE's
    *((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8")),
    *((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")),
)


def to_text(data: bytes, name: str, mime: str | None = None, *, max_bytes: int = 20_000_000) -> Converted | None:
    """``data``, the content of the file called ``name`` (a path or a file name; its extension
    decides the format, else ``mime``), as text, or None when it is not a format read here or is
    binary. The text has ``\\n`` line ends, no trailing spaces and no run of more than two blank
    lines; it may be empty (a PDF of scanned pages: there is no OCR). Raises
    :class:`~cabrain.errors.InputError` for a file of a readable format over ``max_bytes`` or corrupt."""
    fmt = _format_of(data, name, mime)
    if fmt is None:
        return None
    if len(data) > max_bytes:
        raise InputError(
            f"{name} is {len(data):,} bytes, over the {max_bytes:,}-byte limit for a document",
            hint="raise the connector's size limit, or leave the file out of the sync",
        )
    if fmt in _DECODED_FORMATS:
        decoded = decode(data)
        if decoded is None:
            return None
        text = _html_text(decoded) if fmt == "html" else decoded
    else:
        text = _read_document(fmt, data, name, max_bytes)
    return Converted(text=_tidy(text), format=fmt, markdown=fmt in _MARKDOWN_FORMATS)


def decode(data: bytes) -> str | None:
    """``data`` as text, or None when it is binary. A byte-order mark decides (UTF-8, UTF-16,
    UTF-32); else UTF-8; else NUL bytes in the first 8 KiB mean binary; else Windows-1256 when the
    text is clearly Arabic written by a legacy Windows editor, else Latin-1 (which reads anything).
    Line ends are left as they are."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace")
    if b"\x00" in data[:_BINARY_PROBE]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    arabic = data.decode("cp1256", errors="replace")
    return arabic if _clearly_arabic(arabic) else data.decode("latin-1")


_ARABIC_LETTER = re.compile(r"[\u0621-\u064a]")
_GLUED = re.compile(r"[A-Za-z][\u0621-\u064a]|[\u0621-\u064a][A-Za-z]")


def _clearly_arabic(text: str) -> bool:
    """Whether ``text`` (legacy bytes read as Windows-1256) is Arabic. Most of its non-ASCII
    characters must be Arabic letters, and they must stand apart from Latin letters: a Latin-1
    German or Turkish text read this way also turns some letters Arabic, but inside Latin words."""
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    letters = len(_ARABIC_LETTER.findall(text))
    return letters > 0 and letters >= 0.6 * non_ascii and len(_GLUED.findall(text)) <= 0.05 * letters


_BLANK_RUNS = re.compile(r"\n{4,}")
_TRAILING_SPACE = re.compile(r"[ \t\u00a0\u200f\u200e]+$", re.MULTILINE)


def _tidy(text: str) -> str:
    """``\\n`` line ends, no trailing whitespace on a line, at most two blank lines in a row, no
    blank lines at either end."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = _TRAILING_SPACE.sub("", text)
    return _BLANK_RUNS.sub("\n\n\n", text).strip("\n")


def _format_of(data: bytes, name: str, mime: str | None) -> str | None:
    """The reader for a file: by extension when it has one this module knows, else by MIME type,
    else (no extension, an unknown or a Google type) by the bytes' signature."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    stem, dot, extension = base.rpartition(".")
    has_extension = bool(dot and stem)  # ".gitignore" has none
    if has_extension and extension in _BY_EXTENSION:
        return _BY_EXTENSION[extension]
    kind = (mime or "").split(";", 1)[0].strip().lower()
    if kind in _BY_MIME:
        return _BY_MIME[kind]
    if kind in _GOOGLE_MIMES:
        return _sniff(data) or _GOOGLE_MIMES[kind]
    if kind.startswith("text/"):
        return "text"
    if has_extension or kind.startswith(("image/", "audio/", "video/", "font/")):
        return None
    return _sniff(data) or "text"  # text when it decodes: decode() returns None for binary


_ZIP_MEMBERS = (("word/document.xml", "docx"), ("xl/workbook.xml", "xlsx"), ("ppt/presentation.xml", "pptx"))


def _sniff(data: bytes) -> str | None:
    """A document format by its signature: a PDF header, or the parts an office zip holds."""
    if data[:1024].lstrip().startswith(b"%PDF-"):
        return "pdf"
    if not data.startswith(b"PK\x03\x04"):
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            for member, fmt in _ZIP_MEMBERS:
                if member in names:
                    return fmt
            if "mimetype" in names:  # OpenDocument's first member names its type
                with archive.open("mimetype") as kind:
                    return _OFFICE_MIMES.get(kind.read(100).decode("ascii", errors="replace").strip())
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    return None


def _read_document(fmt: str, data: bytes, name: str, max_bytes: int) -> str:
    """The text of an office document or PDF; any failure of its library is the file's fault."""
    if fmt != "pdf":  # every other format is a zip: refuse one that unpacks to far more than the limit
        with contextlib.suppress(zipfile.BadZipFile, OSError, ValueError):  # not a zip: the reader says so
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                unpacked = sum(info.file_size for info in archive.infolist())
            if unpacked > _ZIP_EXPANSION * max_bytes:
                raise InputError(f"{name} unpacks to {unpacked:,} bytes, over {_ZIP_EXPANSION} times the limit")
    try:
        return _READERS[fmt](data)
    except InputError:
        raise
    except Exception as exc:  # the libraries raise anything on a corrupt file: KeyError, BadZipFile, XML errors
        detail = str(exc).strip() or type(exc).__name__
        raise InputError(
            f"{name} is not {_LABELS[fmt]}: {detail}", hint="open and save the file again, or leave it out"
        ) from exc


def _pdf(data: bytes) -> str:
    """Every page's text, pages apart by a blank line."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise ValueError("it is encrypted with a password")
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)


_DOCX_HEADING = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


def _docx(data: bytes) -> str:
    """Paragraphs and tables in document order; headings as ``#`` lines by level (the Title style
    as level 1), bulleted list items as ``-`` lines, a table as rows of cells apart by `` | ``."""
    from docx import Document
    from docx.table import Table

    blocks: list[str] = []
    for item in Document(io.BytesIO(data)).iter_inner_content():
        if isinstance(item, Table):
            blocks.append("\n".join(_docx_rows(item)))
            continue
        text = item.text.strip()
        if not text:
            continue
        style = item.style.name if item.style is not None and item.style.name else ""
        heading = _DOCX_HEADING.match(style)
        if heading or style.lower() == "title":
            level = min(int(heading.group(1)), 6) if heading else 1
            blocks.append(f"{'#' * level} {' '.join(text.split())}")
        elif style.lower().startswith("list bullet"):
            blocks.append(f"- {text}")
        else:
            blocks.append(text)
    return "\n\n".join(block for block in blocks if block)


def _docx_rows(table: Any) -> Iterator[str]:
    """A Word table's non-empty rows; a merged cell, which python-docx repeats, counts once."""
    for row in table.rows:
        cells = list({id(cell._tc): " ".join(cell.text.split()) for cell in row.cells}.values())
        if any(cells):
            yield " | ".join(cells)


_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_ODF_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
_ODF_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
# Deleted text kept for review, comments, footnote marks: not the document's text.
_ODF_SKIPPED = {(_ODF_TEXT, "tracked-changes"), (_ODF_TEXT, "note-citation"), (_ODF_OFFICE, "annotation")}
_ODF_REPEAT_CAP = 100  # a spreadsheet repeats its empty cells a million times; a filled one rarely


def _odf(data: bytes) -> str:
    """An OpenDocument file's text: headings as ``#`` lines by outline level, paragraphs and list
    items, table rows as cells apart by `` | `` (tab-separated in a spreadsheet), a sheet as
    ``## name``, a presentation's page as ``## Slide N``."""
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    spreadsheet = getattr(document, "spreadsheet", None) is not None
    blocks: list[str] = []
    if getattr(document, "presentation", None) is not None:
        for number, page in enumerate(_odf_descendants(document.body, (_ODF_DRAW, "page")), start=1):
            blocks.append(f"## Slide {number}")
            blocks.extend(_odf_blocks(page, spreadsheet=False))
    else:
        blocks.extend(_odf_blocks(document.body, spreadsheet=spreadsheet))
    return "\n\n".join(block for block in blocks if block.strip())


def _odf_blocks(node: Any, *, spreadsheet: bool) -> Iterator[str]:
    """The blocks under one ODF element, in order."""
    qname = getattr(node, "qname", None)
    if qname is None or qname in _ODF_SKIPPED:
        return
    if qname == (_ODF_TEXT, "h"):
        text = " ".join(_odf_inline(node).split())
        if text:
            level = int(node.attributes.get((_ODF_TEXT, "outline-level")) or 1)
            yield f"{'#' * max(1, min(level, 6))} {text}"
    elif qname == (_ODF_TEXT, "p"):
        yield _odf_inline(node).strip()
    elif qname == (_ODF_TABLE, "table"):
        if spreadsheet:
            yield f"## {node.attributes.get((_ODF_TABLE, 'name')) or 'Sheet'}"
        yield "\n".join(_odf_rows(node, "\t" if spreadsheet else " | "))
    else:
        for child in node.childNodes:
            yield from _odf_blocks(child, spreadsheet=spreadsheet)


def _odf_rows(table: Any, separator: str) -> Iterator[str]:
    """A table's non-empty rows, trailing empty cells dropped, repeated cells and rows repeated."""
    for row in _odf_descendants(table, (_ODF_TABLE, "table-row")):
        cells: list[str] = []
        for cell in row.childNodes:
            if getattr(cell, "qname", None) not in ((_ODF_TABLE, "table-cell"), (_ODF_TABLE, "covered-table-cell")):
                continue
            text = " ".join(" ".join(_odf_inline(p).split()) for p in cell.childNodes if hasattr(p, "qname"))
            repeat = int(cell.attributes.get((_ODF_TABLE, "number-columns-repeated")) or 1)
            cells.extend([text.strip()] * (min(repeat, _ODF_REPEAT_CAP) if text.strip() else min(repeat, 1)))
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            repeat = int(row.attributes.get((_ODF_TABLE, "number-rows-repeated")) or 1)
            yield from [separator.join(cells)] * min(repeat, _ODF_REPEAT_CAP)


def _odf_descendants(node: Any, qname: tuple[str, str]) -> Iterator[Any]:
    """Elements called ``qname`` under ``node``, not looking inside the ones found."""
    for child in getattr(node, "childNodes", ()):
        if getattr(child, "qname", None) == qname:
            yield child
        elif getattr(child, "qname", None) != (_ODF_TABLE, "table"):
            yield from _odf_descendants(child, qname)


def _odf_inline(node: Any) -> str:
    """The text inside one paragraph or heading: spans and links read through, ``text:s`` as
    spaces, tabs and line breaks as themselves."""
    parts: list[str] = []
    for child in node.childNodes:
        qname = getattr(child, "qname", None)
        if qname is None:
            parts.append(getattr(child, "data", "") or "")
        elif qname == (_ODF_TEXT, "s"):
            parts.append(" " * int(child.attributes.get((_ODF_TEXT, "c")) or 1))
        elif qname == (_ODF_TEXT, "tab"):
            parts.append("\t")
        elif qname == (_ODF_TEXT, "line-break"):
            parts.append("\n")
        elif qname not in _ODF_SKIPPED:
            parts.append(_odf_inline(child))
    return "".join(parts)


def _xlsx(data: bytes) -> str:
    """Each worksheet as ``## name`` then its non-empty rows, cells apart by tabs (values, not
    formulas: the value the workbook last computed)."""
    from openpyxl import load_workbook

    workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        blocks: list[str] = []
        for sheet in workbook.worksheets:
            rows: list[str] = []
            for row in sheet.iter_rows(values_only=True):
                cells = ["" if value is None else " ".join(str(value).split()) for value in row]
                while cells and not cells[-1]:
                    cells.pop()
                if cells:
                    rows.append("\t".join(cells))
            blocks.append(f"## {sheet.title}" + ("\n\n" + "\n".join(rows) if rows else ""))
        return "\n\n".join(blocks)
    finally:
        workbook.close()


def _pptx(data: bytes) -> str:
    """Each slide as ``## Slide N`` then the text of its shapes (groups opened, tables as rows of
    cells apart by `` | ``) and its speaker notes."""
    from pptx import Presentation

    blocks: list[str] = []
    for number, slide in enumerate(Presentation(io.BytesIO(data)).slides, start=1):
        blocks.append(f"## Slide {number}")
        blocks.extend(_pptx_shapes(slide.shapes))
        notes = slide.notes_slide.notes_text_frame if slide.has_notes_slide else None
        if notes is not None and notes.text.strip():
            blocks.append(f"Notes: {notes.text.strip()}")
    return "\n\n".join(block for block in blocks if block.strip())


def _pptx_shapes(shapes: Any) -> Iterator[str]:
    """The text of a slide's shapes, in the slide's order."""
    for shape in shapes:
        if getattr(shape, "shapes", None) is not None:  # a group
            yield from _pptx_shapes(shape.shapes)
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = (" | ".join(" ".join(cell.text.split()) for cell in row.cells) for row in shape.table.rows)
            yield "\n".join(row for row in rows if row.strip(" |"))
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            yield shape.text_frame.text.strip()


_READERS: dict[str, Callable[[bytes], str]] = {"pdf": _pdf, "docx": _docx, "xlsx": _xlsx, "pptx": _pptx}
_READERS.update(dict.fromkeys(("odt", "ods", "odp"), _odf))


class _HTMLText(HTMLParser):
    """HTML to text: blocks apart by blank lines, ``<br>``, list items and table rows on lines,
    cells apart by `` | ``, headings as ``#`` lines, whitespace collapsed outside ``<pre>``."""

    _DROPPED = frozenset({"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object"})
    _HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
    _LINES = frozenset({"li", "tr", "dt", "dd"})
    _BLOCKS = frozenset(
        """p div section article header footer main nav aside blockquote ul ol dl figure figcaption table
        thead tbody tfoot pre hr address details summary form fieldset body html""".split()
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._dropped = 0  # depth inside elements whose content is not text
        self._pre = 0  # depth inside <pre>, where whitespace is kept
        self._cells = 0  # cells so far in the current table row

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._DROPPED:
            self._dropped += 1
        elif self._dropped:
            return
        elif tag in self._HEADINGS:
            self.out.append(f"\n\n{'#' * int(tag[1])} ")
        elif tag == "br":
            self.out.append("\n")
        elif tag in ("td", "th"):
            self.out.append(" | " if self._cells else "")
            self._cells += 1
        elif tag in self._LINES:
            self._cells = 0
            self.out.append("\n")
        elif tag in self._BLOCKS:
            if tag == "pre":
                self._pre += 1
            self.out.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._DROPPED:
            self._dropped = max(0, self._dropped - 1)
        elif self._dropped:
            return
        elif tag in self._BLOCKS or tag in self._HEADINGS:
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._dropped:
            self.out.append(data if self._pre else re.sub(r"\s+", " ", data))


_EMPTY_HEADING = re.compile(r"^#{1,6} *\n", re.MULTILINE)


def _html_text(html: str) -> str:
    """The text a reader sees in ``html``. Lines are stripped, but for those indented by ``<pre>``
    (collapsed text starts with one space at most)."""
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    lines = "".join(parser.out).split("\n")
    text = "\n".join(line.rstrip() if line.startswith(("  ", "\t")) else " ".join(line.split()) for line in lines)
    text = _EMPTY_HEADING.sub("", text + "\n")
    return re.sub(r"\n{3,}", "\n\n", text).strip()
