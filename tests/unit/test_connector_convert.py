"""Files as text: real documents written by the libraries that office suites' files come from."""

from __future__ import annotations

import codecs
import io
import zipfile
from pathlib import Path

import pytest

from cabrain.connectors.convert import Converted, decode, to_text
from cabrain.errors import InputError

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"


def _docx_bytes(path: Path) -> bytes:
    from docx import Document

    document = Document()
    document.add_heading("Setup", level=1)
    document.add_paragraph("Install the service first.")
    document.add_heading("Database", level=2)
    document.add_paragraph("قاعدة البيانات هي PostgreSQL مع pgvector.")
    document.add_paragraph("One bullet", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for row, (left, right) in zip(table.rows, [("Name", "Port"), ("postgres", "5432")], strict=True):
        row.cells[0].text, row.cells[1].text = left, right
    document.add_paragraph("After the table.")
    document.save(str(path))
    return path.read_bytes()


def test_a_word_document_reads_as_markdown_with_headings_tables_and_arabic(tmp_path: Path) -> None:
    converted = to_text(_docx_bytes(tmp_path / "guide.docx"), "docs/guide.docx")
    assert converted == Converted(
        text=(
            "# Setup\n\nInstall the service first.\n\n## Database\n\n"
            "قاعدة البيانات هي PostgreSQL مع pgvector.\n\n- One bullet\n\n"
            "Name | Port\npostgres | 5432\n\nAfter the table."
        ),
        format="docx",
        markdown=True,
    )


def test_a_file_without_extension_is_read_by_its_mime_type_or_its_signature(tmp_path: Path) -> None:
    data = _docx_bytes(tmp_path / "guide.docx")
    by_mime = to_text(data, "guide", DOCX_MIME)
    by_signature = to_text(data, "guide")
    exported = to_text(data, "Guide", "application/vnd.google-apps.document")
    assert by_mime is not None and by_mime.format == "docx" and by_mime.text.startswith("# Setup")
    assert by_signature == by_mime == exported


def test_an_opendocument_text_reads_headings_by_outline_level(tmp_path: Path) -> None:
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P, S, Span

    document = OpenDocumentText()
    document.text.addElement(H(outlinelevel=1, text="Overview"))
    document.text.addElement(P(text="First paragraph."))
    document.text.addElement(H(outlinelevel=2, text="التفاصيل"))
    paragraph = P(text="Two")
    paragraph.addElement(S(c=2))
    paragraph.addElement(Span(text="spaces, and a span."))
    document.text.addElement(paragraph)
    document.save(str(tmp_path / "notes.odt"))

    converted = to_text((tmp_path / "notes.odt").read_bytes(), "notes.odt")
    assert converted == Converted(
        text="# Overview\n\nFirst paragraph.\n\n## التفاصيل\n\nTwo  spaces, and a span.", format="odt", markdown=True
    )


def test_an_opendocument_spreadsheet_reads_each_sheet_and_its_filled_rows(tmp_path: Path) -> None:
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    document = OpenDocumentSpreadsheet()
    sheet = Table(name="Budget")
    for values in (["Item", "Cost"], [], ["Servers", "120"]):
        row = TableRow()
        for value in values:
            cell = TableCell()
            cell.addElement(P(text=value))
            row.addElement(cell)
        row.addElement(TableCell(numbercolumnsrepeated=1000))  # what a spreadsheet writes for the empty columns
        sheet.addElement(row)
    document.spreadsheet.addElement(sheet)
    document.save(str(tmp_path / "budget.ods"))

    converted = to_text((tmp_path / "budget.ods").read_bytes(), "budget.ods")
    assert converted is not None
    assert converted.text == "## Budget\n\nItem\tCost\nServers\t120"


def test_an_opendocument_presentation_reads_each_page_as_a_slide(tmp_path: Path) -> None:
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    document = OpenDocumentPresentation()
    layout = PageLayout(name="layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="master", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    for words in ("Roadmap for 2025", "Questions?"):
        page = Page(masterpagename=master)
        frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
        box = TextBox()
        box.addElement(P(text=words))
        frame.addElement(box)
        page.addElement(frame)
        document.presentation.addElement(page)
    document.save(str(tmp_path / "talk.odp"))

    converted = to_text((tmp_path / "talk.odp").read_bytes(), "talk.odp")
    assert converted is not None
    assert converted.text == "## Slide 1\n\nRoadmap for 2025\n\n## Slide 2\n\nQuestions?"


def test_a_workbook_reads_each_sheet_with_tab_separated_rows_and_no_empty_ones(tmp_path: Path) -> None:
    from openpyxl import Workbook

    workbook = Workbook()
    first = workbook.active
    assert first is not None
    first.title = "Staff"
    first.append(["Name", "Role", None])
    first.append([None, None, None])
    first.append(["سارة", "Engineer", 3])
    second = workbook.create_sheet("Empty")
    second["A1"] = None
    workbook.save(str(tmp_path / "staff.xlsx"))

    converted = to_text((tmp_path / "staff.xlsx").read_bytes(), "staff.xlsx")
    assert converted == Converted(
        text="## Staff\n\nName\tRole\nسارة\tEngineer\t3\n\n## Empty", format="xlsx", markdown=True
    )


def test_a_presentation_reads_each_slide_its_shapes_tables_and_notes(tmp_path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    presentation = Presentation()
    first = presentation.slides.add_slide(presentation.slide_layouts[1])
    first.shapes.title.text = "Quarterly review"
    first.placeholders[1].text = "Revenue grew"
    first.notes_slide.notes_text_frame.text = "Mention the new region."
    second = presentation.slides.add_slide(presentation.slide_layouts[6])  # blank
    table = second.shapes.add_table(2, 2, Inches(1), Inches(1), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "Region", "Growth"
    table.cell(1, 0).text, table.cell(1, 1).text = "North", "12%"
    presentation.save(str(tmp_path / "review.pptx"))

    converted = to_text((tmp_path / "review.pptx").read_bytes(), "review.pptx")
    assert converted == Converted(
        text=(
            "## Slide 1\n\nQuarterly review\n\nRevenue grew\n\nNotes: Mention the new region.\n\n"
            "## Slide 2\n\nRegion | Growth\nNorth | 12%"
        ),
        format="pptx",
        markdown=True,
    )


def test_a_pdf_reads_the_text_of_every_page_pages_apart_by_a_blank_line() -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for words in ("The first page talks about backups.", "The second page talks about restores."):
        pdf.add_page()
        pdf.cell(text=words)
    converted = to_text(bytes(pdf.output()), "manual.pdf")
    assert converted is not None
    assert converted.format == "pdf" and not converted.markdown
    assert converted.text.split("\n\n") == [
        "The first page talks about backups.",
        "The second page talks about restores.",
    ]


def test_html_loses_its_tags_scripts_and_styles_but_keeps_paragraphs_and_headings() -> None:
    html = b"""<html><head><title>Ignored</title><style>p { color: red }</style></head><body>
    <h1>Release   notes</h1>
    <p>Version 2 is <b>out</b>.</p><script>alert("no")</script>
    <p>Fixes &amp; changes:</p><ul><li>faster</li><li>smaller</li></ul>
    <table><tr><th>Old</th><th>New</th></tr><tr><td>1</td><td>2</td></tr></table>
    <pre>  indented
    code</pre></body></html>"""
    converted = to_text(html, "notes.html")
    assert converted == Converted(
        text=(
            "# Release notes\n\nVersion 2 is out.\n\nFixes & changes:\n\nfaster\nsmaller\n\n"
            "Old | New\n1 | 2\n\n  indented\n    code"
        ),
        format="html",
        markdown=True,
    )


def test_markdown_and_text_are_decoded_and_tidied() -> None:
    markdown = to_text(b"# Title\r\n\r\nBody   \r\n\r\n\r\n\r\n\r\n\r\nEnd\r\n", "README.md")
    assert markdown == Converted(text="# Title\n\nBody\n\n\nEnd", format="markdown", markdown=True)
    plain = to_text(b"key: value\n", "config.yaml")
    assert plain == Converted(text="key: value", format="text", markdown=False)
    assert to_text(b"all: build\n", "Makefile") == Converted(text="all: build", format="text", markdown=False)
    assert to_text(b"# Notes", "export", "text/markdown; charset=utf-8") == Converted("# Notes", "markdown", True)


def test_utf16_text_with_a_byte_order_mark_is_decoded() -> None:
    converted = to_text("Hello, مرحبا\r\nSecond line".encode("utf-16"), "greeting.txt")
    assert converted is not None and converted.text == "Hello, مرحبا\nSecond line"
    assert decode(codecs.BOM_UTF16_BE + "big endian".encode("utf-16-be")) == "big endian"
    assert decode(b"\xef\xbb\xbfwith a mark") == "with a mark"


def test_legacy_arabic_text_is_read_as_windows_1256_and_european_text_as_latin_1() -> None:
    arabic = "تقرير الاجتماع: تمت مناقشة الميزانية والخطة السنوية."
    assert to_text(arabic.encode("cp1256"), "minutes.txt") == Converted(arabic, "text", False)
    german = "Die Größe der Mädchen-Gruppe für Übungen ändert sich."
    assert decode(german.encode("latin-1")) == german


def test_binary_and_unsupported_files_are_skipped() -> None:
    assert to_text(PNG_HEADER, "logo.png") is None
    assert to_text(PNG_HEADER, "logo") is None  # no extension: binary by its NUL bytes
    assert to_text(PNG_HEADER, "notes.txt") is None  # a text name does not make binary text
    assert to_text(b"plain words", "photo", "image/png") is None
    assert to_text(b"PK\x03\x04", "bundle.zip") is None
    assert to_text(b"\xd0\xcf\x11\xe0 old Word", "old.doc") is None


def test_a_corrupt_file_of_a_readable_format_raises_naming_the_file() -> None:
    with pytest.raises(InputError, match=r"^report\.pdf is not a readable PDF: "):
        to_text(b"%PDF-1.4\nthe rest is missing", "report.pdf")
    with pytest.raises(InputError, match=r"^plan\.docx is not a readable Word document \(DOCX\): "):
        to_text(b"PK\x03\x04 truncated", "plan.docx")


def test_a_file_over_the_size_limit_raises_naming_its_size_and_the_limit() -> None:
    with pytest.raises(InputError, match=r"big\.txt is 1,001 bytes, over the 1,000-byte limit"):
        to_text(b"a" * 1001, "big.txt", max_bytes=1000)
    assert to_text(b"a" * 1001, "big.png", max_bytes=1000) is None  # skipped before it is weighed


def test_an_office_file_that_unpacks_far_beyond_the_limit_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\x00" * 3_000_000)
    data = buffer.getvalue()
    assert len(data) < 100_000
    with pytest.raises(InputError, match=r"bomb\.docx unpacks to 3,000,000 bytes"):
        to_text(data, "bomb.docx", max_bytes=100_000)
