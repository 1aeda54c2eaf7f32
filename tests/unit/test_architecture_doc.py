"""ARCHITECTURE.md is kept true: its table of floors names the same units on the same floors as
the layer table the structure test enforces, and every file or folder it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_structure import LAYERS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
TICKED = re.compile(r"`([^`\s]+)`")
PATHLIKE = re.compile(r"^[\w./-]+(?:\.py|\.sql|\.md|/)$|^[\w-]+(?:/[\w.*-]+)+$")


def _floors() -> list[tuple[str, frozenset[str]]]:
    section = DOC.split("## The floors", 1)[1].split("\n## ", 1)[0]
    floors = []
    for line in section.splitlines():
        row = re.match(r"\|\s*\*\*(\w+)\*\*\s*\|([^|]*)\|", line)
        if row:
            units = {token.removesuffix("/").removesuffix(".py") for token in TICKED.findall(row.group(2))}
            floors.append((row.group(1), frozenset(units)))
    return floors


def test_the_floors_table_is_the_layer_table() -> None:
    assert _floors() == list(reversed(LAYERS))


def _exists(token: str) -> bool:
    """A path (from the repository or from cabrain/), a file or folder name found under cabrain/, or
    ``module.name`` (``serve/deps.Caller``): the module exists and defines the name."""
    attr = re.fullmatch(r"([\w/]+)\.([A-Za-z_]\w*)", token)
    if attr and attr.group(2) not in ("py", "sql", "md"):
        module = ROOT / "cabrain" / f"{attr.group(1)}.py"
        return (
            module.exists()
            and re.search(rf"\b(?:def|class)\s+{attr.group(2)}\b|^{attr.group(2)}\b", module.read_text(), re.M)
            is not None
        )
    if token.endswith("/") and "/" not in token[:-1]:
        return (ROOT / token).is_dir() or any(p.is_dir() for p in ROOT.joinpath("cabrain").rglob(token[:-1]))
    if "*" in token:
        return any(ROOT.glob(token)) or any((ROOT / "cabrain").glob(token))
    if "/" in token:
        return any((base / token).exists() for base in (ROOT, ROOT / "cabrain"))
    return any(ROOT.joinpath("cabrain").rglob(token)) or (ROOT / token).exists()


def test_every_file_and_folder_it_names_exists() -> None:
    named = {t for t in TICKED.findall(DOC) if PATHLIKE.match(t) and not t.startswith(("/", "http"))}
    assert len(named) > 50
    assert sorted(t for t in named if not _exists(t)) == []
