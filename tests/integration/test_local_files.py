"""Files on the host, read by the real connector sync against real PostgreSQL and by the importers
(issue 31, findings 3 and 15): no link is followed, under CABRAIN_CONNECTOR_ROOTS or in a path the
operator's command line added; a zip bomb is refused while it unpacks, within bounded memory."""

from __future__ import annotations

import gzip
import io
import json
import os
import tracemalloc
import zipfile
from pathlib import Path

import asyncpg
import pytest

from cabrain import importers
from cabrain.connectors.facade import Connectors
from cabrain.errors import SourceError
from cabrain.localfiles import ArchiveTooLarge

BOMB_MIB = 200


async def _contents(dsn: str, namespace: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return [r["content"] for r in await conn.fetch("SELECT content FROM memories WHERE namespace = $1", namespace)]
    finally:
        await conn.close()


def _outside(tmp_path: Path) -> tuple[Path, str]:
    """A fake CABRAIN_HOME holding a Ray token, outside the folders connectors may read."""
    secret = "ray-token-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    home = tmp_path / "home"
    (home / "ray").mkdir(parents=True)
    (home / "ray" / "auth_token").write_text(secret)
    (home / "ray" / "CLAUDE.md").write_text(f"# Token\n\n- The token is {secret}\n")
    return home, secret


@pytest.mark.parametrize("added_by", ["api", "operator"])
async def test_a_sync_follows_no_link(brain, db_dsn: str, tmp_path: Path, added_by: str) -> None:
    home, secret = _outside(tmp_path)
    shared = tmp_path / "shared"
    docs = shared / "docs"
    (docs / "real").mkdir(parents=True)
    (docs / "real" / "deploys.md").write_text("# Deploys\n\nDeploys go out on Tuesdays after the standup.\n")
    os.symlink(home / "ray" / "auth_token", docs / "token.md")
    os.symlink(home / "ray", docs / "linked")
    os.symlink(home / "ray" / "auth_token", docs / "real" / "deep.txt")
    await brain.create_namespace("root", "docs")
    hub = Connectors(brain.engine, environ={}, local_roots=[str(shared)] if added_by == "api" else None)
    await hub.add("root", "docs", "folder", "docs", {"path": str(docs), "gitignore": False})
    report = await hub.sync("root", "docs")
    assert report.status == "done" and report.counts["listed"] == 1
    contents = await _contents(db_dsn, "docs")
    assert any("Tuesdays" in c for c in contents) and not any(secret in c for c in contents)

    if added_by == "api":  # the folder swapped for a link after it was added: nothing read from there
        docs.rename(shared / "docs-old")
        os.symlink(home / "ray", docs)
        with pytest.raises(SourceError, match="symbolic link"):
            await hub.sync("root", "docs")
        runs = await hub.runs("root", "docs")
        assert runs[0]["status"] == "failed"
        assert not any(secret in c for c in await _contents(db_dsn, "docs"))


def _slack_bomb(path: Path) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("channels.json", '[{"id": "C1", "name": "general"}]')
        with zf.open("users.json", "w", force_zip64=True) as member:
            member.write(b"[")
            for _ in range(BOMB_MIB):
                member.write(b" " * (1 << 20))
            member.write(b"]")


async def test_a_zip_bomb_is_refused_within_bounded_memory(brain, db_dsn: str, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    _slack_bomb(shared / "slack.zip")
    await brain.create_namespace("root", "chat")
    hub = Connectors(brain.engine, environ={}, local_roots=[str(shared)])
    config = {"path": str(shared / "slack.zip")}
    with pytest.raises(ArchiveTooLarge, match=r"users\.json unpacks to"):  # read when it is added
        await hub.add("root", "slack", "slack-export", "chat", config)
    await hub.add("root", "slack", "slack-export", "chat", config, check=False)  # and at each sync
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveTooLarge, match=r"users\.json unpacks to"):
            await hub.sync("root", "slack")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (BOMB_MIB << 20) // 8  # the member is never unpacked whole
    runs = await hub.runs("root", "slack")
    assert runs[0]["status"] == "failed" and "users.json unpacks to" in runs[0]["error"]
    assert await _contents(db_dsn, "chat") == []


def test_importers_refuse_bombs_and_follow_no_link(tmp_path: Path) -> None:
    home, secret = _outside(tmp_path)
    # an OpenMemory backup whose memories.json unpacks to 200 MiB, and a gzip of JSON lines alike
    backup = tmp_path / "backup.zip"
    with zipfile.ZipFile(backup, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open("memories.json", "w", force_zip64=True) as member:
            for _ in range(BOMB_MIB):
                member.write(b" " * (1 << 20))
    lines = tmp_path / "memories.jsonl.gz"
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9) as gz:
        gz.write(json.dumps({"memory": "a", "id": "1"}).encode() + b"\n")
        for _ in range(BOMB_MIB):
            gz.write(b" " * (1 << 20))
    lines.write_bytes(buffer.getvalue())
    for bomb in (backup, lines):
        tracemalloc.start()
        try:
            with pytest.raises(ArchiveTooLarge, match="unpacks to"):
                importers.parse("mem0", bomb)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < (BOMB_MIB << 20) // 4  # stopped once it passed 200 times its stored size

    # a Markdown folder: the link to another CLAUDE.md (and to a folder of them) is not read
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "AGENTS.md").write_text("# Agents\n\n- Run the tests before pushing.\n")
    os.symlink(home / "ray" / "CLAUDE.md", notes / "CLAUDE.md")
    os.symlink(home / "ray", notes / "memory")
    parsed = importers.parse("markdown", notes)
    texts = [r.content for r in parsed.records]
    assert any("Run the tests" in t for t in texts) and not any(secret in t for t in texts)
