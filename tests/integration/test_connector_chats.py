"""Chat exports as connectors, on real files and real PostgreSQL: each message one memory with its
speaker, time and thread; a re-export with more messages adds only those; an edited message is a
revision; a message gone from the export is forgotten; recall finds a message by what was said."""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cabrain.connectors.facade import Connectors
from cabrain.types import RecallQuery
from tests.integration.connector_kit import memories
from tests.unit.test_chat_exports import slack_files

CHAT = """١٢/٣/٢٠٢٤، ٩:١٥ ص - سارة: صباح الخير، اجتماع الفريق اليوم الساعة الحادية عشرة
١٢/٣/٢٠٢٤، ٩:١٧ ص - خالد: تمام، سأحضر تقرير المبيعات للربع الثالث
١٢/٣/٢٠٢٤، ٩:٢٠ ص - سارة: <Media omitted>
١٢/٣/٢٠٢٤، ٩:٢٢ ص - ليلى: الخادم الجديد جاهز للاختبار
١٢/٣/٢٠٢٤، ٩:٢٥ ص - خالد: Great, the deploy checklist is in the wiki
"""
MORE = "١٢/٣/٢٠٢٤، ١٠:٠٢ ص - ليلى: تم نقل الاجتماع إلى الساعة الثانية ظهرا\n"


@pytest.fixture
async def hub(brain) -> Connectors:
    await brain.create_namespace("root", "chats")
    return Connectors(brain.engine, environ={}, local_roots=None)


async def test_a_whatsapp_export_becomes_one_memory_per_message(
    hub: Connectors, brain, tmp_path: Path, db_dsn: str
) -> None:
    export = tmp_path / "WhatsApp Chat with Ops Team.txt"
    export.write_text(CHAT, encoding="utf-8")
    await hub.add("root", "ops-whatsapp", "whatsapp", "chats", {"path": str(export), "timezone": "Asia/Riyadh"})
    first = await hub.sync("root", "ops-whatsapp")
    assert first.status == "done" and first.counts["listed"] == 4  # the media line is not a message
    rows = await memories(db_dsn, "chats")
    assert len(rows) == 4
    khalid = next(r for r in rows if "تقرير المبيعات" in r["content"])
    meta = json.loads(khalid["metadata"])
    assert meta["speaker"] == "خالد" and meta["thread"] == "Ops Team"
    assert khalid["valid_at"] == datetime(2024, 3, 12, 6, 17, tzinfo=UTC)  # 9:17 in Riyadh

    found = await brain.recall("root", RecallQuery("متى اجتماع الفريق", "chats", k=2))
    assert "اجتماع الفريق" in found.hits[0].memory.content

    # exported again a little later: only the new message is written
    export.write_text(CHAT + MORE, encoding="utf-8")
    more = await hub.sync("root", "ops-whatsapp")
    assert more.counts["listed"] == 5 and more.counts["unchanged"] == 4 and more.counts["added"] == 1

    # a message edited in the export is a revision of its memory; one deleted is forgotten
    edited = CHAT.replace("الخادم الجديد جاهز للاختبار", "الخادم الجديد جاهز للإنتاج").replace(
        "١٢/٣/٢٠٢٤، ٩:٢٥ ص - خالد: Great, the deploy checklist is in the wiki\n", ""
    )
    export.write_text(edited + MORE, encoding="utf-8")
    changed = await hub.sync("root", "ops-whatsapp")
    assert changed.counts["revised"] == 1 and changed.counts["deleted"] == 1 and changed.counts["forgotten"] == 1
    current = [r["content"] for r in await memories(db_dsn, "chats") if r["invalid_at"] is None]
    assert any("للإنتاج" in c for c in current) and not any("checklist" in c for c in current)


async def test_a_slack_export_keeps_channels_threads_and_speakers(hub: Connectors, tmp_path: Path, db_dsn: str) -> None:
    archive = tmp_path / "Acme Slack export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in slack_files().items():
            z.writestr(name, data)
    await hub.add("root", "acme-slack", "slack-export", "chats", {"path": str(archive)})
    report = await hub.sync("root", "acme-slack")
    assert report.status == "done" and report.counts["listed"] == 8
    rows = {r["content"]: json.loads(r["metadata"]) for r in await memories(db_dsn, "chats")}
    assert rows["Yes <3"]["thread"].startswith("#general/") and rows["Yes <3"]["speaker"] == "ana.l"
    assert rows["Budget review Friday"]["thread"] == "#leads"
    again = await hub.sync("root", "acme-slack")
    assert again.counts["unchanged"] == 8 and again.counts["added"] == 0

    # exported again: one message edited, one gone (deleted in Slack), one new in a thread
    files = slack_files()
    general = json.loads(files["general/2024-01-15.json"])
    general[1]["text"] = "Hi <@U02>, welcome aboard! See <#C02|deploys>"
    general[1]["edited"] = {"user": "U01", "ts": "1705312900.000000"}
    files["general/2024-01-15.json"] = json.dumps(general)
    files["leads/2024-01-17.json"] = json.dumps(
        [{"type": "message", "user": "U02", "text": "Moved to Monday", "ts": "1705490000.000000"}]
    )
    archive.unlink()
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    changed = await hub.sync("root", "acme-slack")
    assert changed.counts["revised"] == 1 and changed.counts["added"] == 1
    assert changed.counts["deleted"] == 1 and changed.counts["forgotten"] == 1
    current = {r["content"] for r in await memories(db_dsn, "chats") if r["invalid_at"] is None}
    assert "Hi @Omar Haddad, welcome aboard! See #deploys" in current
    assert "Moved to Monday" in current and "Budget review Friday" not in current


@pytest.mark.subprocess
async def test_a_killed_chat_sync_resumes_and_a_missing_export_fails_clearly(
    hub: Connectors, tmp_path: Path, db_dsn: str, home: Path
) -> None:
    from cabrain.errors import SourceError
    from tests.conftest import cli_env, crashed_sessions_gone, run_cli_process

    lines = [f"١٢/٣/٢٠٢٤، ١٠:{i:02d} ص - سارة: الرسالة رقم {i} عن خطة الإطلاق" for i in range(9)]
    export = tmp_path / "WhatsApp Chat with Launch.txt"
    export.write_text("\n".join(lines) + "\n", encoding="utf-8")
    await hub.add("root", "launch", "whatsapp", "chats", {"path": str(export)})
    env = cli_env(database_url=db_dsn, home=str(home), connector_batch="4")
    crashed = run_cli_process(
        "connectors", "sync", "launch", env={**env, "CABRAIN_FAILPOINTS": "connector.after_write"}
    )
    assert crashed.returncode == 137, crashed.stderr
    await crashed_sessions_gone(db_dsn)  # its sync lock, let go when the server sees it gone
    assert 0 < len(await memories(db_dsn, "chats")) < 9
    done = await hub.sync("root", "launch")
    assert done.status == "done"
    contents = [r["content"] for r in await memories(db_dsn, "chats") if r["invalid_at"] is None]
    assert len(contents) == len(set(contents)) == 9

    export.unlink()  # the export was moved away: the sync fails and says where it looked; nothing is forgotten
    with pytest.raises(SourceError, match=str(export.name)):
        await hub.sync("root", "launch")
    assert (await hub.get("root", "launch")).status == "failed"
    assert len([r for r in await memories(db_dsn, "chats") if r["invalid_at"] is None]) == 9


async def test_chat_exports_are_checked_when_added(hub: Connectors, tmp_path: Path) -> None:
    from cabrain.errors import SourceError

    async def refused(kind: str, path: Path, match: str) -> SourceError:
        with pytest.raises(SourceError, match=match) as caught:
            await hub.add("root", "chat", kind, "chats", {"path": str(path)})
        assert "--no-check" in (caught.value.hint or "")
        return caught.value

    assert (await refused("whatsapp", tmp_path / "nowhere.txt", "does not exist")).status_code == 404
    (tmp_path / "notes.txt").write_text("Shopping: milk, eggs, bread.\n", encoding="utf-8")
    assert (await refused("whatsapp", tmp_path / "notes.txt", "is not a WhatsApp chat export")).status_code == 422

    assert (await refused("slack-export", tmp_path / "nowhere.zip", "does not exist")).status_code == 404
    assert (await refused("slack-export", tmp_path / "notes.txt", "is not a ZIP or a folder")).status_code == 422
    photos = tmp_path / "photos.zip"
    with zipfile.ZipFile(photos, "w") as z:
        z.writestr("beach.txt", "not a picture, not an export")
    await refused("slack-export", photos, "is not a Slack export")
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as z:
        z.writestr("channels.json", '[{"id": "C1", "name": "general"}]')
        z.writestr("general/2024-01-15.json", '{"not": "a list"}')
    assert (await refused("slack-export", broken, "is not a list of messages")).status_code == 422
    assert await hub.listing("root") == []

    export = tmp_path / "WhatsApp Chat with Ops Team.txt"
    export.write_text(CHAT, encoding="utf-8")
    await hub.add("root", "ops-whatsapp", "whatsapp", "chats", {"path": str(export)})
    archive = tmp_path / "slack.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in slack_files().items():
            z.writestr(name, data)
    await hub.add("root", "acme-slack", "slack-export", "chats", {"path": str(archive)})
    unpacked = tmp_path / "slack"
    with zipfile.ZipFile(archive) as z:
        z.extractall(unpacked)
    await hub.add("root", "acme-slack-folder", "slack-export", "chats", {"path": str(unpacked)})
    assert [c.name for c in await hub.listing("root")] == ["acme-slack", "acme-slack-folder", "ops-whatsapp"]
