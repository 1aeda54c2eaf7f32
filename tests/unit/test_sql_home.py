"""Every SQL statement of CaBrain's own database lives in ``cabrain/store/`` (by table), so a schema
change is one folder to read. Migrations (``cabrain/schema/*.sql``) are SQL files of their own; the
one other place SQL may appear is a reader of another tool's database file, named below with why."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cabrain"
# A statement's first words: a string constant (or f-string) that starts like one is SQL.
STATEMENT = re.compile(
    r"""\s*(?:SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s|DELETE\s+FROM\s|WITH\s+(?:RECURSIVE\s+)?\w+(?:\s*\([^)]*\))?\s+AS\s|WITH\s+\{\}
    |CREATE\s|ALTER\s|DROP\s|TRUNCATE\s|LOCK\s+TABLE\s|COPY\s|VACUUM\b|ANALYZE\b|SET\s+(?:LOCAL\s+|SESSION\s+)?[\w.]+\s*(?:=|TO\s)
    |RESET\s|SHOW\s|COMMENT\s+ON\s|NOTIFY\s|LISTEN\s|UNLISTEN\s|DO\s+\$|PRAGMA\s|EXPLAIN\s)""",
    re.VERBOSE,
)
# Readers of another tool's database (its schema is not ours; the statements belong with the reader).
FOREIGN = {"cabrain/importers/claude_mem.py": "reads a claude-mem SQLite file"}


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
    return found


def statements_outside_store() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("cabrain/store/") or rel in FOREIGN:
            continue
        for line, text in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            if STATEMENT.match(text):
                found.setdefault(rel, []).append(f"{line}: {' '.join(text.split())[:80]}")
    return found


def test_no_sql_statement_outside_store() -> None:
    assert statements_outside_store() == {}


def test_the_finder_knows_a_statement_when_it_sees_one() -> None:
    sql = [
        "SELECT 1",
        "\n  INSERT INTO memories (id) VALUES ($1)",
        "UPDATE agents SET disabled = true",
        "DELETE FROM grants WHERE id = $1",
        "WITH ranked AS (SELECT 1) SELECT * FROM ranked",
        "SET LOCAL hnsw.ef_search = 40",
        "LOCK TABLE memories IN SHARE MODE",
        "WITH {} SELECT id FROM memories",  # an f-string's text, its fragment left out
        "SHOW shared_buffers",
        "COMMENT ON DATABASE x IS 'y'",
    ]
    prose = ["Select a namespace", "update the memory", "with the agent's key", "SELECT", "set it to 3"]
    assert [bool(STATEMENT.match(s)) for s in sql] == [True] * len(sql)
    assert [bool(STATEMENT.match(s)) for s in prose] == [False] * len(prose)


def test_the_foreign_readers_exist() -> None:
    assert all((ROOT / path).is_file() for path in FOREIGN)
