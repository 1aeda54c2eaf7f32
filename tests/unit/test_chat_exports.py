"""The chat export connectors (whatsapp, slack-export) over export files written here, as the apps write them."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from cabrain.connectors import sources
from cabrain.connectors.base import Document, ItemRef, Source, SourceSpec
from cabrain.connectors.retry import Retry
from cabrain.connectors.sources import slack_export, whatsapp
from cabrain.errors import InputError, SourceError

RETRY = Retry(attempts=2, sleep=lambda _s: None)
RIYADH = ZoneInfo("Asia/Riyadh")
NEW_YORK = ZoneInfo("America/New_York")
NNBSP = "\u202f"  # the narrow no-break space new exports put before AM/PM
LRM = "\u200e"

ANDROID = f"""12/31/23, 9:41 PM - Messages and calls are end-to-end encrypted. No one outside of this chat, not even WhatsApp, can read or listen to them. Tap to learn more.
12/31/23, 9:41 PM - Alice created group "Team Alpha"
12/31/23, 9:41 PM - Alice added Bob
12/31/23, 9:42 PM - Alice: Welcome to the team chat!
12/31/23, 9:42 PM - Bob: Thanks. Agenda for Monday:
1. deploy review
2. budget
12/31/23, 9:42 PM - Alice: Sounds good
12/31/23, 11:58 PM - Bob: <Media omitted>
1/13/24, 12:01{NNBSP}AM - Alice: This message was deleted
1/13/24, 12:05{NNBSP}AM - Carol: night owl here
1/13/24, 12:30{NNBSP}PM - Carol: Shipping the fix at noon: ok?
"""

IOS = f"""{LRM}[31/12/2023, 21:41:05] Family: {LRM}Messages and calls are end-to-end encrypted. No one outside of this chat, not even WhatsApp, can read or listen to them.
{LRM}[31/12/2023, 21:41:05] Family: {LRM}Alice created this group
[31/12/2023, 21:45:10] Alice: Happy new year's eve!
[01/01/2024, 00:00:02] {LRM}Bob: Happy new year 🎉
[01/01/2024, 00:01:30] Bob: {LRM}image omitted
[01/01/2024, 00:02:00] Alice: {LRM}<attached: 00000012-PHOTO-2024-01-01-00-02-00.jpg>
[13/01/2024, 09:15:00] Alice: Meeting moved to 10:30
see you there {LRM}<This message was edited>
"""

RLM = "\u200f"
ARABIC = (
    f"{RLM}٣١{RLM}/١٢{RLM}/٢٠٢٣، ٩:٤١{NNBSP}م - الرسائل والمكالمات مشفرة تمامًا بين الطرفين. "
    "لا أحد خارج هذه الدردشة، ولا حتى واتساب، يمكنه قراءتها أو الاستماع إليها.\n"
    f"{RLM}٣١{RLM}/١٢{RLM}/٢٠٢٣، ٩:٤٥{NNBSP}م - \u202bأحمد\u202c: السلام عليكم، الاجتماع غدًا الساعة ١٠\n"
    f"{RLM}٣١{RLM}/١٢{RLM}/٢٠٢٣، ١١:٥٩{NNBSP}م - سارة: وعليكم السلام\n"
    "إن شاء الله\n"
    f"{RLM}١{RLM}/١{RLM}/٢٠٢٤، ١٢:١٠{NNBSP}ص - أحمد: <تم استبعاد الوسائط>\n"
    f"{RLM}١{RLM}/١{RLM}/٢٠٢٤، ٨:٣٠{NNBSP}ص - \u2066سارة\u2069: كل عام وأنتم بخير\n"
)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def zipped(path: Path, files: Mapping[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def source(kind: str, **config: Any) -> Any:
    config = {k: str(v) if isinstance(v, Path) else v for k, v in config.items()}
    built = sources.build(SourceSpec(kind=kind, config=sources.configure(kind, config)), RETRY)
    assert isinstance(built, Source)
    return built


def read(src: Any) -> list[tuple[ItemRef, Document]]:
    refs = list(src.scan())
    assert len({r.key for r in refs}) == len(refs)
    return [(ref, src.fetch(ref)) for ref in refs]


def said(items: list[tuple[ItemRef, Document]]) -> list[tuple[str | None, str, datetime | None]]:
    return [(d.parts[0].speaker, d.parts[0].text, d.parts[0].valid_at) for _, d in items]


# ---- WhatsApp ----


def test_android_export_twelve_hour_month_first(tmp_path: Path) -> None:
    path = write(tmp_path / "WhatsApp Chat with Team Alpha.txt", ANDROID)
    src = source("whatsapp", path=path, timezone="America/New_York")
    items = read(src)
    assert said(items) == [
        ("Alice", "Welcome to the team chat!", datetime(2023, 12, 31, 21, 42, tzinfo=NEW_YORK)),
        (
            "Bob",
            "Thanks. Agenda for Monday:\n1. deploy review\n2. budget",
            datetime(2023, 12, 31, 21, 42, tzinfo=NEW_YORK),
        ),
        ("Alice", "Sounds good", datetime(2023, 12, 31, 21, 42, tzinfo=NEW_YORK)),
        ("Carol", "night owl here", datetime(2024, 1, 13, 0, 5, tzinfo=NEW_YORK)),
        ("Carol", "Shipping the fix at noon: ok?", datetime(2024, 1, 13, 12, 30, tzinfo=NEW_YORK)),
    ]
    assert src.skipped == {"system": 3, "media": 1, "deleted": 1}
    ref, doc = items[0]
    assert doc.title == "Team Alpha" and doc.parts[0].thread == "Team Alpha" and doc.parts[0].anchor == "message"
    assert doc.valid_at is not None and doc.valid_at == doc.parts[0].valid_at
    assert doc.valid_at.utcoffset() == timedelta(hours=-5)
    assert [r.key for r, _ in items[:3]] == [
        "Team Alpha/2023-12-31T21:42:00/Alice/0",
        "Team Alpha/2023-12-31T21:42:00/Bob/0",
        "Team Alpha/2023-12-31T21:42:00/Alice/1",
    ]
    assert ref.url == f"{path}#{ref.key}"
    assert all(len(r.version) == 64 for r, _ in items)


def test_ios_export_day_first_with_marks_media_and_edits(tmp_path: Path) -> None:
    src = source("whatsapp", path=write(tmp_path / "WhatsApp Chat - Family.txt", IOS), timezone="Asia/Riyadh")
    items = read(src)
    assert said(items) == [
        ("Alice", "Happy new year's eve!", datetime(2023, 12, 31, 21, 45, 10, tzinfo=RIYADH)),
        ("Bob", "Happy new year 🎉", datetime(2024, 1, 1, 0, 0, 2, tzinfo=RIYADH)),
        ("Alice", "Meeting moved to 10:30\nsee you there", datetime(2024, 1, 13, 9, 15, tzinfo=RIYADH)),
    ]
    assert items[1][1].valid_at == datetime(2023, 12, 31, 21, 0, 2, tzinfo=UTC)
    assert src.skipped == {"system": 2, "media": 1, "attachment": 1}
    assert {d.title for _, d in items} == {"Family"}


def test_a_member_saying_what_whatsapp_says_is_kept(tmp_path: Path) -> None:
    text = (
        "[02/01/2024, 10:00:00] Bob: I changed the subject, sorry\n[02/01/2024, 10:01:00] Bob: joined using the link\n"
    )
    items = read(source("whatsapp", path=write(tmp_path / "WhatsApp Chat - Bob.txt", text)))
    assert [d.parts[0].text for _, d in items] == ["I changed the subject, sorry", "joined using the link"]


def test_arabic_export_digits_marks_and_am_pm(tmp_path: Path) -> None:
    src = source("whatsapp", path=write(tmp_path / "arabic.txt", ARABIC), timezone="Asia/Riyadh", chat="العائلة")
    items = read(src)
    assert said(items) == [
        ("أحمد", "السلام عليكم، الاجتماع غدًا الساعة ١٠", datetime(2023, 12, 31, 21, 45, tzinfo=RIYADH)),
        ("سارة", "وعليكم السلام\nإن شاء الله", datetime(2023, 12, 31, 23, 59, tzinfo=RIYADH)),
        ("سارة", "كل عام وأنتم بخير", datetime(2024, 1, 1, 8, 30, tzinfo=RIYADH)),
    ]
    assert src.skipped == {"system": 1, "media": 1}
    assert items[0][0].key == "العائلة/2023-12-31T21:45:00/أحمد/0"
    assert {d.parts[0].thread for _, d in items} == {"العائلة"}


def test_zips_read_like_their_text(tmp_path: Path) -> None:
    cases = [
        (ANDROID, "WhatsApp Chat with Team Alpha.zip", "WhatsApp Chat with Team Alpha.txt", "Team Alpha"),
        (IOS, "WhatsApp Chat - Family.zip", "_chat.txt", "Family"),
        (ARABIC, "WhatsApp Chat - العائلة.zip", "_chat.txt", "العائلة"),
    ]
    for text, zip_name, member, chat in cases:
        plain = read(source("whatsapp", path=write(tmp_path / "plain.txt", text)))
        archive = zipped(tmp_path / zip_name, {member: text, "00000012-PHOTO-2024-01-01-00-02-00.jpg": b"\xff\xd8\xff"})
        items = read(source("whatsapp", path=archive))
        assert said(items) == said(plain)
        assert {d.title for _, d in items} == {chat}
        assert all(r.key.startswith(f"{chat}/") and r.url == f"{archive}#{r.key}" for r, _ in items)


def test_a_folder_is_every_export_in_it_oldest_first(tmp_path: Path) -> None:
    write(tmp_path / "WhatsApp Chat with Team Alpha.txt", ANDROID)
    zipped(tmp_path / "WhatsApp Chat - Family.zip", {"_chat.txt": IOS})
    write(tmp_path / "README.txt", "exports from my phone\n")
    write(tmp_path / "broken.zip", "not a zip")
    src = source("whatsapp", path=tmp_path)
    items = read(src)
    assert len(items) == 8
    assert {d.title for _, d in items} == {"Team Alpha", "Family"}
    times = [d.valid_at.timestamp() for _, d in items if d.valid_at is not None]
    assert len(times) == 8 and times == sorted(times)
    assert src.skipped["files"] == 2


def test_keys_stay_when_the_chat_is_exported_again_with_more(tmp_path: Path) -> None:
    path = write(tmp_path / "WhatsApp Chat with Team Alpha.txt", ANDROID)
    before = {r.key: r.version for r in source("whatsapp", path=path).scan()}
    write(path, ANDROID + f"1/13/24, 12:30{NNBSP}PM - Carol: one more thing\n")
    after = {r.key: r.version for r in source("whatsapp", path=path).scan()}
    assert set(after) - set(before) == {"Team Alpha/2024-01-13T12:30:00/Carol/1"}
    assert all(after[k] == v for k, v in before.items())


def test_an_edited_message_is_a_new_version_of_the_same_key(tmp_path: Path) -> None:
    path = write(tmp_path / "WhatsApp Chat with Team Alpha.txt", ANDROID)
    before = {r.key: r.version for r in source("whatsapp", path=path).scan()}
    write(path, ANDROID.replace("Sounds good", "Sounds good, see you Monday"))
    after = {r.key: r.version for r in source("whatsapp", path=path).scan()}
    assert set(after) == set(before)
    assert [k for k in after if after[k] != before[k]] == ["Team Alpha/2023-12-31T21:42:00/Alice/1"]


def test_a_deletion_keeps_the_keys_after_it(tmp_path: Path) -> None:
    path = write(tmp_path / "chat.txt", ANDROID)
    before = {r.key: r.version for r in source("whatsapp", path=path).scan()}
    write(
        path,
        ANDROID.replace(
            "Bob: Thanks. Agenda for Monday:\n1. deploy review\n2. budget", "Bob: This message was deleted"
        ),
    )
    after = {r.key: r.version for r in source("whatsapp", path=path).scan()}
    assert set(before) - set(after) == {"chat/2023-12-31T21:42:00/Bob/0"}
    assert all(before[k] == v for k, v in after.items())


def test_date_order_auto_defaults_day_first_and_the_config_overrides(tmp_path: Path) -> None:
    path = write(tmp_path / "chat.txt", "[03/04/2024, 10:00:00] Alice: hi\n")
    (auto,) = read(source("whatsapp", path=path))
    (mdy,) = read(source("whatsapp", path=path, date_order="mdy"))
    assert auto[1].valid_at == datetime(2024, 4, 3, 10, tzinfo=UTC)
    assert mdy[1].valid_at == datetime(2024, 3, 4, 10, tzinfo=UTC)
    twelve = write(
        tmp_path / "twelve.txt", f"[12/31/23, 9:41:05{NNBSP}PM] Alice: hi\n[1/2/24, 12:00:30 a.m.] Bob: yo\n"
    )
    assert [d.valid_at for _, d in read(source("whatsapp", path=twelve))] == [
        datetime(2023, 12, 31, 21, 41, 5, tzinfo=UTC),
        datetime(2024, 1, 2, 0, 0, 30, tzinfo=UTC),
    ]
    dotted = write(tmp_path / "dotted.txt", "2024-01-02, 08:00 - Bob: yo\n31.12.23, 21:41 - Alice: hi\n")
    assert [d.valid_at for _, d in read(source("whatsapp", path=dotted))] == [  # oldest first
        datetime(2023, 12, 31, 21, 41, tzinfo=UTC),
        datetime(2024, 1, 2, 8, tzinfo=UTC),
    ]


def test_dates_that_contradict_each_other_or_the_order_are_refused(tmp_path: Path) -> None:
    mixed = write(tmp_path / "mixed.txt", "13/01/2024, 10:00 - Alice: hi\n01/13/2024, 10:00 - Bob: yo\n")
    with pytest.raises(SourceError) as exc:
        list(source("whatsapp", path=mixed).scan())
    assert exc.value.status_code == 422 and "mixed.txt" in exc.value.message
    with pytest.raises(SourceError) as exc:
        list(source("whatsapp", path=mixed, date_order="mdy").scan())
    assert exc.value.status_code == 422 and "line 1" in exc.value.message


def test_the_parse_is_cached_until_close(tmp_path: Path) -> None:
    path = write(tmp_path / "chat.txt", ANDROID)
    src = source("whatsapp", path=path)
    first = next(iter(src.scan()))
    bare = ItemRef(key=first.key, version=first.version, url=first.url)
    write(path, ANDROID.replace("Welcome to the team chat!", "Welcome, all!"))
    assert src.fetch(bare).parts[0].text == "Welcome to the team chat!"
    src.close()
    assert src.fetch(bare).parts[0].text == "Welcome, all!"
    with pytest.raises(SourceError) as exc:
        src.fetch(ItemRef(key="chat/2020-01-01T00:00:00/Nobody/0", version="x", url="x"))
    assert exc.value.status_code == 404


def test_whatsapp_missing_path_and_non_export(tmp_path: Path) -> None:
    src = source("whatsapp", path=tmp_path / "gone.txt")  # configure checks shape only
    with pytest.raises(SourceError) as exc:
        list(src.scan())
    assert exc.value.status_code == 404 and "gone.txt" in exc.value.message
    notes = write(tmp_path / "notes.txt", "shopping list\n- milk\n- eggs\n")
    with pytest.raises(SourceError) as exc:
        list(source("whatsapp", path=notes).scan())
    assert exc.value.status_code == 422 and "notes.txt" in exc.value.message and "not a WhatsApp" in exc.value.message
    with pytest.raises(SourceError) as exc:
        list(source("whatsapp", path=zipped(tmp_path / "photos.zip", {"a.jpg": b"\xff"})).scan())
    assert exc.value.status_code == 422
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError) as exc:
        list(source("whatsapp", path=empty).scan())
    assert exc.value.status_code == 422


def test_whatsapp_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    write(tmp_path / "chat.txt", ANDROID)
    assert len(read(source("whatsapp", path="~/chat.txt"))) == 5


def test_whatsapp_configure() -> None:
    assert sources.is_local("whatsapp") and whatsapp.KIND == "whatsapp"
    assert sources.configure("whatsapp", {"path": "~/chat.txt"}) == {
        "path": "~/chat.txt",
        "timezone": "UTC",
        "date_order": "auto",
        "chat": None,
    }
    with pytest.raises(InputError, match="unknown config key"):
        sources.configure("whatsapp", {"path": "x", "channel": "y"})
    with pytest.raises(InputError, match="date_order"):
        sources.configure("whatsapp", {"path": "x", "date_order": "ymd"})
    with pytest.raises(InputError, match="timezone"):
        sources.configure("whatsapp", {"path": "x", "timezone": "Mars/Olympus"})
    with pytest.raises(InputError, match="path is required"):
        sources.configure("whatsapp", {})


# ---- Slack ----

USERS = [
    {
        "id": "U01",
        "name": "ana",
        "real_name": "Ana Lima",
        "profile": {"display_name": "ana.l", "real_name": "Ana Lima"},
    },
    {
        "id": "U02",
        "name": "omar",
        "real_name": "Omar Haddad",
        "profile": {"display_name": "", "real_name": "Omar Haddad"},
    },
]
CHANNELS = [
    {"id": "C01", "name": "general", "created": 1700000000, "members": ["U01", "U02"], "is_general": True},
    {"id": "C02", "name": "deploys", "created": 1700000000, "members": ["U01", "U02"]},
]
GROUPS = [{"id": "G01", "name": "leads", "created": 1700000000, "members": ["U01"]}]
DMS = [{"id": "D01", "created": 1700000000, "members": ["U01", "U02"]}]
THREAD = "1705313000.123456"
GENERAL_15 = [
    {
        "type": "message",
        "subtype": "channel_join",
        "user": "U02",
        "text": "<@U02> has joined the channel",
        "ts": "1705312800.000100",
    },
    {
        "type": "message",
        "user": "U01",
        "text": "Hi <@U02>, welcome! See <#C02|deploys> and <https://wiki.example.com/onboarding|the onboarding doc>",
        "ts": "1705312860.000200",
    },
    {
        "type": "message",
        "user": "U02",
        "text": "Thanks! Is R&amp;D on <!here>?",
        "ts": THREAD,
        "thread_ts": THREAD,
        "reply_count": 1,
    },
    {
        "type": "message",
        "user": "U01",
        "text": "Yes &lt;3",
        "ts": "1705313100.000300",
        "thread_ts": THREAD,
        "parent_user_id": "U02",
    },
    {
        "type": "message",
        "user": "U01",
        "text": "",
        "ts": "1705313200.000400",
        "files": [{"id": "F01", "name": "plan.pdf"}],
    },
]
GENERAL_16 = [
    {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B01",
        "username": "deploybot",
        "text": "Deployed v1.2",
        "ts": "1705400000.000001",
    },
    {
        "type": "message",
        "user": "U09",
        "user_profile": {"real_name": "Guest Person", "display_name": ""},
        "text": "hello from a guest",
        "ts": "1705400100.000000",
    },
]
DEPLOYS_15 = [
    {"type": "message", "user": "U02", "text": "Deploy at 5 <https://ci.example.com/run/1>", "ts": "1705320000.000000"}
]
LEADS_17 = [{"type": "message", "user": "U01", "text": "Budget review Friday", "ts": "1705480000.000000"}]
DM_17 = [
    {
        "type": "message",
        "user": "U02",
        "text": "ping <mailto:omar@example.com|omar@example.com>",
        "ts": "1705480100.000000",
    }
]


def slack_files(extra: list[dict[str, Any]] | None = None) -> dict[str, str]:
    return {
        "users.json": json.dumps(USERS),
        "channels.json": json.dumps(CHANNELS),
        "groups.json": json.dumps(GROUPS),
        "dms.json": json.dumps(DMS),
        "integration_logs.json": "[]",
        "general/2024-01-15.json": json.dumps(GENERAL_15, indent=4),
        "general/2024-01-16.json": json.dumps(GENERAL_16 + (extra or []), indent=4),
        "deploys/2024-01-15.json": json.dumps(DEPLOYS_15),
        "leads/2024-01-17.json": json.dumps(LEADS_17),
        "D01/2024-01-17.json": json.dumps(DM_17),
    }


def unpacked(root: Path, files: dict[str, str]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        write(root / name, data)
    return root


def check_slack_items(items: list[tuple[ItemRef, Document]]) -> None:
    assert [(d.title, d.parts[0].thread, d.parts[0].speaker, d.parts[0].text) for _, d in items] == [
        (
            "#general",
            "#general",
            "ana.l",
            "Hi @Omar Haddad, welcome! See #deploys and the onboarding doc (https://wiki.example.com/onboarding)",
        ),
        ("#general", "#general", "Omar Haddad", "Thanks! Is R&D on @here?"),
        ("#general", f"#general/{THREAD}", "ana.l", "Yes <3"),
        ("#deploys", "#deploys", "Omar Haddad", "Deploy at 5 https://ci.example.com/run/1"),
        ("#general", "#general", "deploybot", "Deployed v1.2"),
        ("#general", "#general", "Guest Person", "hello from a guest"),
        ("#leads", "#leads", "ana.l", "Budget review Friday"),
        ("Direct messages: ana.l, Omar Haddad", "#D01", "Omar Haddad", "ping omar@example.com"),
    ]
    ref, doc = items[1]
    assert ref.key == f"general/{THREAD}" and ref.url == f"slack-export://general/{THREAD}"
    assert doc.valid_at == datetime(2024, 1, 15, 10, 3, 20, 123456, tzinfo=UTC)
    assert doc.valid_at is not None and doc.valid_at.utcoffset() == timedelta(hours=3)
    assert doc.parts[0].valid_at == doc.valid_at
    assert items[4][0].key == "general/1705400000.000001"
    assert items[4][1].valid_at == datetime(2024, 1, 16, 10, 13, 20, 1, tzinfo=UTC)


@pytest.mark.parametrize("prefix", ["", "Acme Slack export Jan 1 2024 - Jan 31 2024/"])
def test_slack_export_zip(tmp_path: Path, prefix: str) -> None:
    files = {prefix + name: data for name, data in slack_files().items()}
    src = source("slack-export", path=zipped(tmp_path / "export.zip", files), timezone="Asia/Riyadh")
    check_slack_items(read(src))
    assert src.skipped == {"system": 1, "file": 1}


def test_slack_export_unpacked_folder(tmp_path: Path) -> None:
    src = source("slack-export", path=unpacked(tmp_path / "export", slack_files()), timezone="Asia/Riyadh")
    check_slack_items(read(src))
    assert src.skipped == {"system": 1, "file": 1}
    assert sources.is_local("slack-export") and slack_export.KIND == "slack-export"


def test_slack_keys_stay_and_an_edit_is_a_new_version(tmp_path: Path) -> None:
    before = {r.key: r.version for r in source("slack-export", path=unpacked(tmp_path / "a", slack_files())).scan()}
    more = [{"type": "message", "user": "U01", "text": "one more", "ts": "1705400200.000000"}]
    after = {r.key: r.version for r in source("slack-export", path=unpacked(tmp_path / "b", slack_files(more))).scan()}
    assert set(after) - set(before) == {"general/1705400200.000000"} and all(after[k] == before[k] for k in before)
    edited = json.loads(slack_files()["deploys/2024-01-15.json"])
    edited[0] |= {
        "text": "Deploy at 6 <https://ci.example.com/run/1>",
        "edited": {"user": "U02", "ts": "1705320100.000000"},
    }
    changed = unpacked(tmp_path / "c", slack_files() | {"deploys/2024-01-15.json": json.dumps(edited)})
    again = {r.key: r.version for r in source("slack-export", path=changed).scan()}
    assert set(again) == set(before)
    assert [k for k in again if again[k] != before[k]] == ["deploys/1705320000.000000"]


def test_slack_fetch_without_hint_reads_the_cache(tmp_path: Path) -> None:
    src = source("slack-export", path=zipped(tmp_path / "export.zip", slack_files()))
    ref = next(iter(src.scan()))
    doc = src.fetch(ItemRef(key=ref.key, version=ref.version, url=ref.url))
    assert doc.parts[0].speaker == "ana.l" and doc.valid_at == datetime(2024, 1, 15, 10, 1, 0, 200, tzinfo=UTC)
    src.close()
    with pytest.raises(SourceError) as exc:
        src.fetch(ItemRef(key="general/1.000000", version="x", url="x"))
    assert exc.value.status_code == 404


def test_slack_missing_path_and_non_export(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as exc:
        list(source("slack-export", path=tmp_path / "gone.zip").scan())
    assert exc.value.status_code == 404 and "gone.zip" in exc.value.message
    for bad in (write(tmp_path / "notes.txt", "not a zip"), zipped(tmp_path / "photos.zip", {"a.jpg": b"\xff"})):
        with pytest.raises(SourceError) as exc:
            list(source("slack-export", path=bad).scan())
        assert exc.value.status_code == 422 and bad.name in exc.value.message
    broken = zipped(tmp_path / "broken.zip", slack_files() | {"general/2024-01-15.json": "[{"})
    with pytest.raises(SourceError) as exc:
        list(source("slack-export", path=broken).scan())
    assert exc.value.status_code == 422 and "general/2024-01-15.json" in exc.value.message


def test_slack_configure() -> None:
    assert sources.configure("slack-export", {"path": "x.zip"}) == {"path": "x.zip", "timezone": "UTC"}
    with pytest.raises(InputError, match="unknown config key"):
        sources.configure("slack-export", {"path": "x.zip", "date_order": "dmy"})
    with pytest.raises(InputError, match="timezone"):
        sources.configure("slack-export", {"path": "x.zip", "timezone": "nowhere"})
    with pytest.raises(InputError, match="must be a string"):
        sources.configure("slack-export", {"path": 3})
