"""Texts cut into parts: Markdown by its sections, anything long at paragraph and sentence ends."""

from __future__ import annotations

from cabrain.connectors.base import Part
from cabrain.connectors.split import split

GUIDE = """Welcome to the service.

# Setup

## Database

Create the database first.

## Cache

Start Redis.

# Usage

Run the command.
"""


def _anchors(parts: list[Part]) -> list[str]:
    return [part.anchor for part in parts]


def test_sections_start_with_their_heading_path_and_are_anchored_by_it() -> None:
    parts = split(GUIDE, markdown=True, title="guide.md")
    assert parts == [
        Part(anchor="", text="Welcome to the service.", title="guide.md"),
        Part(anchor="Setup / Database", text="Setup › Database\n\nCreate the database first.", title="Database"),
        Part(anchor="Setup / Cache", text="Setup › Cache\n\nStart Redis.", title="Cache"),
        Part(anchor="Usage", text="Usage\n\nRun the command.", title="Usage"),
    ]


def test_a_hash_line_inside_a_fenced_code_block_is_not_a_heading() -> None:
    text = "# Install\n\n```bash\n# update the index\napt-get update\n```\n\n~~~\n## still code\n~~~\n\nDone."
    parts = split(text, markdown=True)
    assert _anchors(parts) == ["Install"]
    assert (
        parts[0].text
        == "Install\n\n```bash\n# update the index\napt-get update\n```\n\n~~~\n## still code\n~~~\n\nDone."
    )


def test_setext_headings_open_sections_and_a_rule_after_a_blank_line_does_not() -> None:
    text = "Overview\n========\n\nWhat it is.\n\n---\n\nDetails\n-------\n\nHow it works."
    parts = split(text, markdown=True)
    assert [(part.anchor, part.text) for part in parts] == [
        ("Overview", "Overview\n\nWhat it is.\n\n---"),
        ("Overview / Details", "Overview › Details\n\nHow it works."),
    ]


def test_front_matter_is_dropped_and_is_never_a_heading() -> None:
    parts = split("---\ntitle: Notes\ntags: [a]\n---\n\n# Body\n\nText.", markdown=True)
    assert [(part.anchor, part.text) for part in parts] == [("Body", "Body\n\nText.")]
    mdx = "---\nsidebar_position: 2\ntitle: Install\n---\n\nimport Tabs from '@theme/Tabs';\n\n# Install\n\nRun it."
    assert [part.text for part in split(mdx, markdown=True)] == [
        "import Tabs from '@theme/Tabs';",
        "Install\n\nRun it.",
    ]


def test_a_rule_that_opens_the_text_is_not_front_matter() -> None:
    parts = split("---\n\n# One\n\nfirst\n\n---\n\n# Two\n\nsecond", markdown=True)
    assert [(part.anchor, part.text) for part in parts] == [
        ("", "---"),
        ("One", "One\n\nfirst\n\n---"),
        ("Two", "Two\n\nsecond"),
    ]


def test_repeated_heading_paths_are_numbered_in_order() -> None:
    text = "# Notes\n\nfirst\n\n# Notes\n\nsecond\n\n# Notes\n\nthird\n\n# Notes#2\n\nliteral"
    assert _anchors(split(text, markdown=True)) == ["Notes", "Notes#2", "Notes#3", "Notes#2#2"]


def test_a_heading_with_no_text_of_its_own_joins_the_next_section() -> None:
    text = "# Reference\n\n## Deprecated\n\n## Options\n\nThe options.\n\n# Appendix\n\n## Links"
    parts = split(text, markdown=True)
    assert [(part.anchor, part.text, part.title) for part in parts] == [
        ("Reference / Options", "Reference › Deprecated\nReference › Options\n\nThe options.", "Options"),
        ("Appendix / Links", "Appendix › Links", "Links"),  # the last headings, with no section after them
    ]


def test_a_long_section_is_cut_at_paragraph_ends_each_piece_keeping_the_heading_path() -> None:
    paragraphs = [f"Paragraph {n} " + " ".join(["lorem ipsum"] * 20) for n in range(6)]
    parts = split("# Intro\n\n## Long\n\n" + "\n\n".join(paragraphs), markdown=True, max_chars=600, min_chars=100)
    assert _anchors(parts) == ["Intro / Long", "Intro / Long~2", "Intro / Long~3"]
    assert all(part.text.startswith("Intro › Long\n\nParagraph ") for part in parts)
    assert all(len(part.text) <= 600 for part in parts)
    assert all(part.title == "Long" for part in parts)
    bodies = [part.text.removeprefix("Intro › Long\n\n") for part in parts]
    assert "\n\n".join(bodies) == "\n\n".join(paragraphs)


def test_arabic_text_is_cut_at_its_sentence_marks() -> None:
    sentences = ["هل قرأت التقرير الأخير عن المشروع؟", "نعم، قرأته كاملا أمس.", "كان مفصلا جدا!"] * 8
    text = " ".join(sentences)
    parts = split(text, markdown=False, max_chars=120, min_chars=20, title="محضر")
    assert len(parts) > 2
    assert _anchors(parts) == ["", *(f"~{n}" for n in range(2, len(parts) + 1))]
    assert all(part.text[-1] in "؟.!" and len(part.text) <= 120 for part in parts)
    assert " ".join(part.text for part in parts) == text
    assert {part.title for part in parts} == {"محضر"}


def test_a_sentence_longer_than_the_limit_is_cut_between_words_and_a_word_only_as_a_last_resort() -> None:
    words = split("word " * 100, markdown=False, max_chars=50, min_chars=10)
    assert all(set(part.text.split()) == {"word"} for part in words)
    assert all(len(part.text) <= 50 for part in words)
    hard = split("x" * 25, markdown=False, max_chars=10, min_chars=2)
    assert [part.text for part in hard] == ["x" * 10, "x" * 10, "x" * 5]


def test_plain_text_groups_paragraphs_up_to_the_limit() -> None:
    text = "\n\n".join(f"Short paragraph number {n}." for n in range(10))
    parts = split(text, markdown=False, max_chars=100, min_chars=10)
    assert _anchors(parts) == ["", "~2", "~3", "~4"]
    assert parts[0].text == "Short paragraph number 0.\n\nShort paragraph number 1.\n\nShort paragraph number 2."
    assert "\n\n".join(part.text for part in parts) == text


def test_an_edit_in_one_section_leaves_the_others_parts_as_they_were() -> None:
    before = "# A\n\nAlpha text.\n\n# B\n\nBeta text.\n\n# C\n\nGamma text."
    after = before.replace("Beta text.", "Beta text, now much longer.\n\nWith a new paragraph " + "and more " * 300)
    old, new = split(before, markdown=True, max_chars=500), split(after, markdown=True, max_chars=500)
    unchanged = {part.anchor: part for part in old if part.anchor != "B"}
    assert {part.anchor: part for part in new if not part.anchor.startswith("B")} == unchanged
    assert [anchor for anchor in _anchors(new) if anchor.startswith("B")][:2] == ["B", "B~2"]


def test_blank_text_gives_no_parts() -> None:
    assert split("", markdown=True) == []
    assert split(" \n\t\n", markdown=False) == []
    assert split("\n\n", markdown=True, title="empty.md") == []


def test_a_real_mdx_pages_front_matter_is_not_kept_in_its_parts() -> None:
    from pathlib import Path

    from cabrain.connectors.convert import to_text

    sample = Path(__file__).parent.parent / "data" / "samples" / "mdx" / "browser-support.mdx"
    converted = to_text(sample.read_bytes(), name=sample.name)
    assert converted is not None and converted.markdown
    parts = split(converted.text, markdown=True)
    assert parts[0].text.startswith("Browser support\n\nDocusaurus allows sites")
    assert not any("description:" in p.text or p.text.startswith("---") for p in parts)
