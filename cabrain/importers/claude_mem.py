"""claude-mem (thedotmack/claude-mem, the Claude Code plugin): its JSON export, or its database.

claude-mem keeps, in SQLite (``~/.claude-mem/claude-mem.db``), the **observations** its observer
agent writes while Claude Code works (``type``, ``title``, ``subtitle``, ``narrative``, ``facts`` and
``concepts`` as JSON arrays, ``files_read``, ``files_modified``, ``project``, the session, times)
and one **session summary** per request (``request``, ``investigated``, ``learned``,
``completed``, ``next_steps``, ``notes``). Both inputs are read:

- the JSON of ``scripts/export-memories.ts`` (``exportedAt``, ``query``, ``observations``,
  ``sessions`` (SDK session rows), ``summaries``, ``prompts``); a saved ``/api/search?format=json``
  answer, whose summaries are under ``sessions``, reads the same;
- the database itself (``src/services/sqlite/schema.sql``): tables ``observations``,
  ``session_summaries``, ``user_prompts`` and, in later versions, ``directives`` (the user's standing
  rules). The session column is ``sdk_session_id`` before v8 and ``memory_session_id`` after; both are
  read. The file is opened read-only.

An observation's content is its title, subtitle, narrative, facts and files as readable text; its
concepts, type, project and files are kept in metadata. Types map onto networks as follows:

    decision                                  belief, semantic     (a design choice with its rationale)
    discovery, security_note, security_alert  fact, semantic       (something learned about the system)
    bugfix, feature, refactor, change, other  experience, episodic (work that was done)
    session summary                           experience, episodic
    directive (active only)                   fact, procedural     (a standing instruction)

Keys are ``observation:<id>``, ``summary:<id>``, ``directive:<id>`` (the database's row ids, which the
export carries too); the thread is the session id; times come from ``created_at_epoch``
(milliseconds), else ``created_at``. User prompts are raw requests, not memories: they are counted
as skipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from cabrain.errors import InputError
from cabrain.importers.records import ImportRecord, Parsed, digest, load_json, read_bytes, strings, utc

__all__ = ["FORMAT", "parse"]

FORMAT = "claude-mem"

_TYPES: dict[str, tuple[str, str]] = {
    "decision": ("belief", "semantic"),
    "discovery": ("fact", "semantic"),
    "security_note": ("fact", "semantic"),
    "security_alert": ("fact", "semantic"),
}
_WORK = ("experience", "episodic")  # bugfix, feature, refactor, change, and any type a custom mode adds

_SUMMARY_FIELDS = (
    ("request", "Request"),
    ("investigated", "Investigated"),
    ("learned", "Learned"),
    ("completed", "Completed"),
    ("next_steps", "Next steps"),
    ("notes", "Notes"),
)

_SQLITE_MAGIC = b"SQLite format 3\x00"


def parse(path: Path) -> Parsed:
    """The observations, session summaries and directives of a claude-mem export or database."""
    raw = read_bytes(path)
    if raw.startswith(_SQLITE_MAGIC):
        tables = _from_database(path)
    else:
        tables = _from_export(path, load_json(path, raw))
    parsed = Parsed()
    for row in tables["observations"]:
        _observation(row, parsed)
    for row in tables["summaries"]:
        _summary(row, parsed)
    for row in tables["directives"]:
        _directive(row, parsed)
    parsed.skip("prompts (not memories)", len(tables["prompts"]))
    return parsed


# --- the two inputs ----------------------------------------------------------------------------------


def _from_export(path: Path, data: Any) -> dict[str, list[Any]]:
    if not isinstance(data, dict) or not any(isinstance(data.get(k), list) for k in ("observations", "summaries")):
        found = f"keys {', '.join(sorted(map(str, data))[:8])}" if isinstance(data, dict) else type(data).__name__
        raise InputError(
            f"{path}: not a claude-mem export: expected an object with 'observations' and 'summaries', found {found}",
            hint="give the JSON of claude-mem's scripts/export-memories.ts, or ~/.claude-mem/claude-mem.db",
        )

    def rows(name: str) -> list[Any]:
        value = data.get(name)
        return value if isinstance(value, list) else []

    summaries = rows("summaries")
    if "summaries" not in data:  # a search answer: its "sessions" are the summaries
        summaries = [s for s in rows("sessions") if isinstance(s, dict) and _summary_text(s)]
    return {
        "observations": rows("observations"),
        "summaries": summaries,
        "directives": rows("directives"),
        "prompts": rows("prompts"),
    }


def _from_database(path: Path) -> dict[str, list[Any]]:
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: the database cannot be opened ({exc})") from exc
    try:
        db.row_factory = sqlite3.Row
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables & {"observations", "session_summaries"}:
            raise InputError(
                f"{path}: not a claude-mem database: it has no observations or session_summaries table",
                hint="give ~/.claude-mem/claude-mem.db, or the JSON of claude-mem's export script",
            )

        def rows(table: str) -> list[Any]:  # table: one of the fixed names below
            return [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY id")] if table in tables else []

        return {
            "observations": rows("observations"),
            "summaries": rows("session_summaries"),
            "directives": rows("directives"),
            "prompts": rows("user_prompts"),
        }
    except sqlite3.Error as exc:
        raise InputError(f"{path}: the database cannot be read ({exc})") from exc
    finally:
        db.close()


# --- one row each ------------------------------------------------------------------------------------


def _observation(row: Any, parsed: Parsed) -> None:
    if not isinstance(row, dict):
        parsed.skip("not an observation object")
        return
    text = _observation_text(row)
    if not text:
        parsed.skip("empty")
        return
    kind = str(row.get("type") or "")
    network, memory_type = _TYPES.get(kind, _WORK)
    meta: dict[str, Any] = {"type": kind} if kind else {}
    concepts = strings(row.get("concepts"))
    if concepts:
        meta["concepts"] = concepts
    for name in ("files_read", "files_modified"):
        if files := strings(row.get(name)):
            meta[name] = files
    _common(row, meta)
    key = _key("observation", row, text)
    parsed.add(
        ImportRecord(
            key=key,
            content=text,
            valid_at=_time(row),
            author=str(row["agent_id"]) if row.get("agent_id") else None,
            network=network,
            memory_type=memory_type,
            thread=_session(row),
            metadata=meta,
            ref=f"claude-mem:{key}",
            scope=_project(meta),
        )
    )


def _observation_text(row: Mapping[str, Any]) -> str:
    """Title, subtitle, narrative, facts and files as text; the legacy ``text`` column when a row has
    none of them."""
    head = [s for s in (_str(row.get("title")), _str(row.get("subtitle"))) if s]
    blocks = ["\n".join(head)] if head else []
    if narrative := _str(row.get("narrative")):
        blocks.append(narrative)
    if facts := strings(row.get("facts")):
        blocks.append("Facts:\n" + "\n".join(f"- {f}" for f in facts))
    files = [
        f"{label}: {', '.join(names)}"
        for label, names in (
            ("Files read", strings(row.get("files_read"))),
            ("Files modified", strings(row.get("files_modified"))),
        )
        if names
    ]
    if blocks and files:
        blocks.append("\n".join(files))
    return "\n\n".join(blocks) or _str(row.get("text"))


def _summary(row: Any, parsed: Parsed) -> None:
    if not isinstance(row, dict):
        parsed.skip("not a summary object")
        return
    text = _summary_text(row)
    if not text:
        parsed.skip("empty")
        return
    meta: dict[str, Any] = {"kind": "session summary"}
    for name in ("files_read", "files_edited"):
        if files := strings(row.get(name)):
            meta[name] = files
    _common(row, meta)
    key = _key("summary", row, text)
    parsed.add(
        ImportRecord(
            key=key,
            content=text,
            valid_at=_time(row),
            network="experience",
            memory_type="episodic",
            thread=_session(row),
            metadata=meta,
            ref=f"claude-mem:{key}",
            scope=_project(meta),
        )
    )


def _summary_text(row: Mapping[str, Any]) -> str:
    return "\n".join(f"{label}: {value}" for name, label in _SUMMARY_FIELDS if (value := _str(row.get(name))))


def _directive(row: Any, parsed: Parsed) -> None:
    if not isinstance(row, dict):
        parsed.skip("not a directive object")
        return
    text = _str(row.get("content"))
    if not text:
        parsed.skip("empty")
        return
    if row.get("status") not in (None, "active"):
        parsed.skip("inactive directive")
        return
    meta: dict[str, Any] = {"kind": "directive"}
    for name in ("scope", "source"):
        if row.get(name):
            meta[name] = row[name]
    _common(row, meta)
    key = _key("directive", row, text)
    parsed.add(
        ImportRecord(
            key=key,
            content=text,
            valid_at=utc(row.get("updated_at_epoch")) or _time(row),
            network="fact",
            memory_type="procedural",
            metadata=meta,
            ref=f"claude-mem:{key}",
            scope=_project(meta),
        )
    )


# --- fields ------------------------------------------------------------------------------------------


def _common(row: Mapping[str, Any], meta: dict[str, Any]) -> None:
    """The fields observations and summaries share, into ``meta``."""
    project = row.get("merged_into_project") or row.get("project")
    if project:
        meta["project"] = project
    for name in ("prompt_number", "agent_type", "platform_source"):
        if row.get(name) not in (None, ""):
            meta[name] = row[name]


def _project(meta: Mapping[str, Any]) -> str:
    """A record's scope within its database: its project (keys are row ids of one database)."""
    return f"project {meta['project']}" if meta.get("project") else ""


def _key(kind: str, row: Mapping[str, Any], text: str) -> str:
    if row.get("id") not in (None, ""):
        return f"{kind}:{row['id']}"
    return f"{kind}:sha256:{digest(text, _session(row) or '', str(row.get('created_at_epoch') or ''))}"


def _session(row: Mapping[str, Any]) -> str | None:
    value = row.get("memory_session_id") or row.get("sdk_session_id") or row.get("content_session_id")
    return str(value) if value else None


def _time(row: Mapping[str, Any]) -> datetime | None:
    return utc(row.get("created_at_epoch")) or utc(row.get("created_at"))


def _str(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
