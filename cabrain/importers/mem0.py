"""mem0: the JSON of ``Memory.get_all()`` / ``MemoryClient.get_all()``, and OpenMemory's backup.

The shapes read (mem0ai/mem0: ``mem0/memory/main.py`` ``_get_all_from_vector_store``, the platform's
``GET /v1/memories`` and ``POST /v2/memories`` answers, ``openmemory/api/app/routers/backup.py``):

- a bare list of memories: ``get_all`` before v1.1 (``api_version="v1.0"``) and the platform's v1;
- ``{"results": [...]}``: ``get_all`` from v1.1 on, with ``"relations"`` when the graph store is on
  (graph edges are not memories: they are counted as skipped), and the platform's paginated v2
  answer (``count``, ``next``, ``previous``, ``results``);
- OpenMemory's backup (``POST /api/v1/backup/export``): the zip itself, its ``memories.json``
  (``user``, ``apps``, ``categories``, ``memories`` with ``content``, ``state`` and ``category_ids``)
  or its ``memories.jsonl.gz`` (one memory a line).

A memory is ``{"id", "memory", "hash", "metadata", "categories", "created_at", "updated_at",
"user_id", "agent_id", "run_id", "actor_id", "role", ...}``. The key is its id; the author its
``agent_id``, else its ``user_id``; the key's scope that agent (else the user, else the app), so a
newer export of theirs revises what an older one imported; the thread its ``run_id``; its time ``updated_at``, else
``created_at`` (mem0 writes US/Pacific offsets such as ``-07:00``; naive times are read as UTC).
mem0 extracts facts about its users, so a memory is a semantic ``fact``; a procedural memory
(``metadata.memory_type == "procedural_memory"``, mem0's summary of an agent's run) is a procedural
``experience``. Categories and the memory's own metadata are kept in the record's metadata.

Not read: the platform's structured export (``create_memory_export``), whose shape is the schema its
caller chose rather than a list of memories; OpenMemory memories in state ``deleted``, ``archived``
or ``paused`` (skipped, each counted by its state: OpenMemory no longer serves them).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cabrain.errors import InputError
from cabrain.importers.records import ImportRecord, Parsed, digest, load_json, read_bytes, strings, utc
from cabrain.localfiles import Archive, ArchiveLimits, gunzip

__all__ = ["FORMAT", "parse"]

FORMAT = "mem0"

_KEPT = ("user_id", "agent_id", "app_id", "app", "actor_id", "role", "expiration_date", "state")
_NOT_CURRENT = {"archived": "archived in OpenMemory (not current)", "paused": "paused in OpenMemory (not current)"}
_PROCEDURAL = "procedural_memory"  # mem0's MemoryType.PROCEDURAL, kept in the memory's metadata


ARCHIVES = True  # a zip or gzip export: read within the archive limits


def parse(path: Path, limits: ArchiveLimits | None = None) -> Parsed:
    """The memories of a mem0 or OpenMemory export at ``path`` (a zip or gzip read within
    ``limits``: the member count, each member's and the total unpacked size, the ratio)."""
    data = _load(path, limits or ArchiveLimits())
    parsed = Parsed()
    context: dict[str, Any] = {}
    if isinstance(data, list):
        items: list[Any] = data
    elif isinstance(data, dict) and isinstance(data.get("results"), list):
        items = data["results"]
        relations = data.get("relations")
        parsed.skip("graph relations (not memories)", len(relations) if isinstance(relations, list) else 0)
    elif isinstance(data, dict) and isinstance(data.get("memories"), list):
        items = data["memories"]
        context = _openmemory_context(data)
    elif isinstance(data, dict) and "id" in data and ("memory" in data or "content" in data):
        items = [data]  # one memory: Memory.get(), or a single line of JSON lines
    else:
        raise InputError(f"{path}: not a mem0 export: {_found(data)}", hint=_HINT)
    if items and not any(isinstance(i, dict) and ("memory" in i or "content" in i) for i in items):
        raise InputError(f"{path}: not a mem0 export: no item has a 'memory' (or 'content') field", hint=_HINT)
    for item in items:
        _read(item, context, parsed)
    return parsed


_HINT = (
    "give the JSON of Memory.get_all() / MemoryClient.get_all() (a list, or an object with 'results'), "
    "or OpenMemory's backup zip or its memories.json"
)


def _found(data: Any) -> str:
    if isinstance(data, dict):
        keys = ", ".join(sorted(map(str, data))[:8]) or "none"
        return f"expected a list of memories or an object with 'results', found an object with keys {keys}"
    return f"expected a list of memories or an object with 'results', found {type(data).__name__}"


# --- the file ----------------------------------------------------------------------------------------


def _load(path: Path, limits: ArchiveLimits) -> Any:
    """The export as JSON: a zip (OpenMemory's backup), gzip'd JSON lines, JSON, or JSON lines."""
    raw = read_bytes(path)
    if raw.startswith(b"PK\x03\x04"):
        return _from_zip(path, raw, limits)
    if raw.startswith(b"\x1f\x8b"):
        try:
            raw = gunzip(raw, limits, name=str(path))
        except (OSError, EOFError) as exc:
            raise InputError(f"{path}: a damaged gzip file ({exc})") from exc
    lines = _json_lines(raw)
    return lines if lines is not None else load_json(path, raw)


def _from_zip(path: Path, raw: bytes, limits: ArchiveLimits) -> Any:
    try:
        with Archive(io.BytesIO(raw), limits, name=str(path)) as zf:
            names = {name.rsplit("/", 1)[-1]: name for name in zf.namelist() if not name.endswith("/")}
            if "memories.json" in names:
                return load_json(path, zf.read(names["memories.json"]))
            if "memories.jsonl.gz" in names:
                member = names["memories.jsonl.gz"]
                lines = _json_lines(gunzip(zf.read(member), limits, name=f"{path}: {member}"))
                if lines is not None:
                    return lines
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputError(f"{path}: a damaged zip file ({exc})") from exc
    raise InputError(f"{path}: a zip without memories.json", hint="give OpenMemory's backup zip as exported")


def _json_lines(raw: bytes) -> list[Any] | None:
    """``raw`` as JSON lines (one object a line, more than one line), else None."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or not all(line.lstrip().startswith("{") for line in lines):
        return None
    try:
        return [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        return None


def _openmemory_context(data: Mapping[str, Any]) -> dict[str, Any]:
    """What OpenMemory's memories.json says about its memories outside them: category and app names,
    and the user they belong to."""

    def names(items: Any) -> dict[str, str]:
        return {
            str(x["id"]): str(x["name"]) for x in items or () if isinstance(x, dict) and "id" in x and x.get("name")
        }

    user = data.get("user")
    user = user if isinstance(user, dict) else {}
    return {"categories": names(data.get("categories")), "apps": names(data.get("apps")), "user": user.get("user_id")}


# --- one memory --------------------------------------------------------------------------------------


def _read(item: Any, context: Mapping[str, Any], parsed: Parsed) -> None:
    if not isinstance(item, dict):
        parsed.skip("not a memory object")
        return
    raw = item.get("memory", item.get("content"))
    content = raw.strip() if isinstance(raw, str) else ""
    if not content:
        parsed.skip("empty")
        return
    state = item.get("state")
    if state == "deleted":
        parsed.skip("deleted")
        return
    if state in _NOT_CURRENT:  # OpenMemory: kept there, but no longer served to its apps
        parsed.skip(_NOT_CURRENT[state])
        return
    own = item.get("metadata") or item.get("metadata_")
    own = own if isinstance(own, dict) else {}
    procedural = _PROCEDURAL in (own.get("memory_type"), item.get("memory_type"))
    user = context.get("user") or item.get("user_id")
    author = item.get("agent_id") or user
    memory_id = str(item["id"]) if item.get("id") not in (None, "") else None
    key = memory_id or f"sha256:{digest(content, str(author or ''), str(item.get('run_id') or ''))}"
    parsed.add(
        ImportRecord(
            key=key,
            content=content,
            valid_at=utc(item.get("updated_at")) or utc(item.get("created_at")),
            author=str(author) if author else None,
            network="experience" if procedural else "fact",
            memory_type="procedural" if procedural else "semantic",
            thread=str(item["run_id"]) if item.get("run_id") else None,
            metadata=_metadata(item, own, context),
            ref=f"mem0:{memory_id or key}",
            **_scope(item, context, memory_id),
        )
    )


def _scope(item: Mapping[str, Any], context: Mapping[str, Any], memory_id: str | None) -> dict[str, Any]:
    """A record's scope: the user (or agent, or app) its memories belong to, so a newer export of
    theirs revises what an older one imported; a memory of none, with an id of its own, is mem0's
    (its ids are unique); one with neither is within its file."""
    for field, name in (("agent_id", "agent"), ("user_id", "user"), ("app_id", "app")):
        value = context.get("user") if field == "user_id" and context.get("user") else item.get(field)
        if value not in (None, ""):
            return {"scope": f"mem0 {name} {value}", "own_scope": True}
    return {"scope": "mem0", "own_scope": True} if memory_id else {}


def _metadata(item: Mapping[str, Any], own: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    categories = strings(item.get("categories")) + [
        context["categories"][c] for c in strings(item.get("category_ids")) if c in context.get("categories", {})
    ]
    if categories:
        meta["categories"] = categories
    if own:
        meta["metadata"] = dict(own)
    for name in _KEPT:
        if item.get(name) not in (None, ""):
            meta[name] = item[name]
    if context.get("user"):
        meta["user_id"] = context["user"]  # OpenMemory's rows name the user by its row id
    if item.get("app_id") and str(item["app_id"]) in context.get("apps", {}):
        meta["app"] = context["apps"][str(item["app_id"])]
    if item.get("immutable") is True:
        meta["immutable"] = True
    return meta
