"""Letta Agent Files (``.af``, letta-ai/agent-file): an agent's memory blocks and archival passages.

Two schema versions are read:

- the current one (``letta/schemas/agent_file.py`` ``AgentFileSchema``, Letta 0.10 on): an object
  with ``agents``, ``groups``, ``blocks``, ``files``, ``sources``, ``tools``, ``mcp_servers``,
  ``metadata`` and ``created_at``. Blocks live at the top level (``id`` such as ``block-0``,
  ``label``, ``value``, ``limit``, ``description``, ``read_only``, ``metadata``) and each agent names
  its own in ``block_ids`` (blocks written inline in an agent's ``memory_blocks``, as a file made
  by hand may have them, are read too);
- the first one (``letta/serialize_schemas/pydantic_agent_schema.py`` ``AgentSchema``): one agent
  with its blocks inline as ``core_memory`` (``label``, ``value``, ``limit``, ``description``,
  ``created_at``, ``updated_at``).

Each non-empty block is one record (semantic, metadata ``{"block": label}``): the ``persona`` block
is the agent's view of itself, a ``belief``; every other block (``human`` and the rest) holds what
the agent knows, a ``fact``. The key is ``block:<label>``, stable across exports of the same agent
(the file's block ids are positions, renumbered on each export); when two blocks in one file share a
label (several agents), the block id is added: ``block:<label>:<id>``. A block's time is its
``updated_at`` where the schema has one, else the file's ``created_at`` (when it was exported).

Archival passages are not part of either schema yet (the Agent File roadmap lists them); a
``passages`` list, at the top level or on an agent (``id``, ``text``, ``created_at``), is read as
semantic facts keyed ``passage:<id>``. Messages are conversation, not memories: they are counted as
skipped, as are attached files. Some exports hold the JSON twice encoded (a JSON string); both read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from cabrain.errors import InputError
from cabrain.importers.records import ImportRecord, Parsed, digest, load_json, strings, utc

__all__ = ["FORMAT", "parse"]

FORMAT = "letta"

_SELF = frozenset({"persona"})  # blocks that describe the agent itself: beliefs


def parse(path: Path) -> Parsed:
    """The memory blocks and passages of the agent file at ``path``."""
    data = load_json(path)
    if isinstance(data, str):  # twice encoded
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: a JSON string that is not an agent file ({exc.msg})") from exc
    parsed = Parsed()
    if isinstance(data, dict) and isinstance(data.get("agents"), list):
        _current(data, parsed)
    elif isinstance(data, dict) and isinstance(data.get("core_memory"), list):
        _first(data, parsed)
    else:
        found = f"keys {', '.join(sorted(map(str, data))[:8])}" if isinstance(data, dict) else type(data).__name__
        raise InputError(
            f"{path}: not a Letta agent file: expected an object with 'agents' and 'blocks' (or 'core_memory'), "
            f"found {found}",
            hint="export the agent from Letta (ADE: Export Agent, or GET /v1/agents/{id}/export) and give that .af file",
        )
    return parsed


def _current(data: Mapping[str, Any], parsed: Parsed) -> None:
    """The current schema: top-level blocks, agents that name theirs."""
    agents = [a for a in data["agents"] if isinstance(a, dict)]
    owners: dict[str, list[str]] = {}
    for agent in agents:
        for block_id in strings(agent.get("block_ids")):
            owners.setdefault(block_id, []).append(str(agent.get("name") or agent.get("id") or "agent"))
    blocks = [b for b in data.get("blocks") or () if isinstance(b, dict)]
    for agent in agents:  # blocks written inline (CreateAgent's memory_blocks), in a file made by hand
        name = str(agent.get("name") or agent.get("id") or "agent")
        for number, block in enumerate(b for b in agent.get("memory_blocks") or () if isinstance(b, dict)):
            block_id = f"{agent.get('id') or name}/memory_blocks/{number}"
            blocks.append({**block, "id": block_id})
            owners[block_id] = [name]
    exported = utc(data.get("created_at"))
    shared = _shared_labels(blocks)
    for block in blocks:
        names = owners.get(str(block.get("id")), [])
        _block(block, parsed, author=names[0] if len(names) == 1 else None, agents=names, when=exported, shared=shared)
    for agent in agents:
        parsed.skip("messages (not memories)", len(agent.get("messages") or ()))
        _passages(agent.get("passages"), parsed, author=agent.get("name"))
    parsed.skip("files (not memories)", len(data.get("files") or ()))
    _passages(data.get("passages"), parsed, author=agents[0].get("name") if len(agents) == 1 else None)


def _first(data: Mapping[str, Any], parsed: Parsed) -> None:
    """The first schema: one agent, blocks inline."""
    name = data.get("name")
    blocks = [b for b in data["core_memory"] if isinstance(b, dict)]
    shared = _shared_labels(blocks)
    for block in blocks:
        _block(
            block, parsed, author=name, agents=[name] if name else [], when=utc(data.get("updated_at")), shared=shared
        )
    parsed.skip("messages (not memories)", len(data.get("messages") or ()))
    _passages(data.get("passages"), parsed, author=name)


def _shared_labels(blocks: Sequence[Mapping[str, Any]]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for block in blocks:
        label = str(block.get("label") or "")
        (twice if label in seen else seen).add(label)
    return twice


def _block(
    block: Mapping[str, Any],
    parsed: Parsed,
    *,
    author: str | None,
    agents: list[str],
    when: datetime | None,
    shared: set[str],
) -> None:
    value = block.get("value")
    content = value.strip() if isinstance(value, str) else ""
    if not content:
        parsed.skip("empty block")
        return
    label = str(block.get("label") or "block")
    key = f"block:{label}:{block['id']}" if label in shared and block.get("id") else f"block:{label}"
    meta: dict[str, Any] = {"block": label}
    if description := str(block.get("description") or "").strip():
        meta["description"] = description
    if block.get("limit"):
        meta["limit"] = block["limit"]
    if block.get("read_only"):
        meta["read_only"] = True
    if len(agents) > 1:
        meta["agents"] = agents
    own = block.get("metadata") or block.get("metadata_")
    if isinstance(own, dict) and own:
        meta["metadata"] = dict(own)
    parsed.add(
        ImportRecord(
            key=key,
            content=content,
            valid_at=utc(block.get("updated_at")) or utc(block.get("created_at")) or when,
            author=author,
            network="belief" if label in _SELF else "fact",
            memory_type="semantic",
            metadata=meta,
            ref=f"letta:{author}/{label}" if author else f"letta:{label}",
            **_scope(agents),
        )
    )


def _scope(agents: Sequence[Any]) -> dict[str, Any]:
    """A record's scope: the agents it belongs to, by name (an agent file's ids are its own,
    ``agent-0``, in every file), so a newer export of the same agent revises its records; a record
    of no named agent is within its file."""
    names = sorted({str(a) for a in agents if a})
    if not names:
        return {}
    return {"scope": f"letta agent {'+'.join(names)}", "own_scope": True}


def _passages(items: Any, parsed: Parsed, *, author: Any) -> None:
    """Archival passages, where a file carries them."""
    for item in items if isinstance(items, list) else ():
        text = item.get("text") if isinstance(item, dict) else None
        content = text.strip() if isinstance(text, str) else ""
        if not content:
            parsed.skip("empty passage")
            continue
        key = f"passage:{item['id']}" if item.get("id") else f"passage:sha256:{digest(content)}"
        tags = strings(item.get("tags"))
        parsed.add(
            ImportRecord(
                key=key,
                content=content,
                valid_at=utc(item.get("updated_at")) or utc(item.get("created_at")),
                author=str(author) if author else None,
                network="fact",
                memory_type="semantic",
                metadata={"archival": True, **({"tags": tags} if tags else {})},
                ref=f"letta:{key}",
                **_scope([str(author)] if author else []),
            )
        )
