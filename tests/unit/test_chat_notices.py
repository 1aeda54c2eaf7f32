"""What chat exports hold that is no message, as the apps write it: WhatsApp's notices (attachments,
media left out, calls, deleted messages, system lines) in English and Arabic, on iOS and Android,
each skipped and counted by reason; and Slack's integration posts, whose words are in their
attachments, kept with who posted them. Over the sample exports in tests/data/samples/whatsapp
(their sources in tests/data/samples/README.md) and exports written here."""

from __future__ import annotations

import json
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cabrain.connectors import sources
from cabrain.connectors.base import Source, SourceSpec
from cabrain.connectors.retry import Retry
from cabrain.connectors.sources.whatsapp import notice

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples" / "whatsapp"
RETRY = Retry(attempts=1, sleep=lambda _s: None)
LRM, RLM, NNBSP = "\u200e", "\u200f", "\u202f"


def source(kind: str, **config: Any) -> Any:
    config = {k: str(v) if isinstance(v, Path) else v for k, v in config.items()}
    built = sources.build(SourceSpec(kind=kind, config=sources.configure(kind, config)), RETRY)
    assert isinstance(built, Source)
    return built


def messages(src: Any) -> list[tuple[str, str]]:
    """(speaker, text) of each message the source lists, oldest first."""
    return [(r.hint["speaker"], r.hint["text"]) for r in src.scan()]


# ---- WhatsApp: the samples ----

NOTICES = {
    "ios-en-notices.txt": (
        [
            ("Dana", "The staging server is back up"),
            ("Dana", "Voice call tomorrow at 9 works for me"),
            ("Omar", "Meeting moved to 10:30"),
        ],
        {"system": 1, "attachment": 2, "media": 1, "call": 3, "deleted": 2},
    ),
    "android-en-notices.txt": (
        [
            ("Dana", "The staging server is back up"),
            ("Omar", "Rack 4 after the fix"),  # a caption sent with a photo stays
            ("Omar", "Shipping the fix at noon"),
        ],
        {"system": 2, "attachment": 1, "media": 2, "call": 2, "deleted": 2},
    ),
    "ios-ar-notices.txt": (
        [("دانة", "خادم الاختبار يعمل من جديد"), ("عمر", "الاجتماع غدًا الساعة ١٠ صباحًا")],
        {"system": 1, "attachment": 1, "media": 1, "call": 3, "deleted": 2},
    ),
    "android-ar-notices.txt": (
        [
            ("دانة", "خادم الاختبار يعمل من جديد"),
            ("عمر", "الرف ٤ بعد الإصلاح"),
            ("عمر", "تم نقل الاجتماع إلى الساعة الثانية ظهرًا"),
        ],
        {"system": 1, "attachment": 1, "media": 1, "call": 2, "deleted": 1},
    ),
}


@pytest.mark.parametrize("name", sorted(NOTICES))
def test_notices_are_skipped_by_reason_in_english_and_arabic_on_ios_and_android(name: str) -> None:
    kept, skipped = NOTICES[name]
    src = source("whatsapp", path=SAMPLES / name, timezone="Asia/Riyadh")
    assert messages(src) == kept
    assert src.skipped == skipped


def test_the_arabic_ios_sample_keeps_its_times() -> None:
    """Arabic-Indic digits, ص/م for AM/PM and the marks around them."""
    src = source("whatsapp", path=SAMPLES / "ios-ar-notices.txt", timezone="Asia/Riyadh")
    times = [r.hint["at"] for r in src.scan()]
    riyadh = ZoneInfo("Asia/Riyadh")
    assert times == [datetime(2024, 2, 1, 10, 1, 12, tzinfo=riyadh), datetime(2024, 2, 1, 14, 30, tzinfo=riyadh)]


def test_real_exports_from_other_parsers_read_as_their_authors_meant() -> None:
    short = source("whatsapp", path=SAMPLES / "short-chat.txt")
    assert messages(short) == [
        ("Sample User", "This is a test message"),
        ("+410123456789", "How are you?\nIs everything alright?"),
        ("TestBot", "Hey I'm a test too!"),
    ]
    assert short.skipped == {"system": 2}  # the encryption notice and "You created group"
    log = source("whatsapp", path=SAMPLES / "chat-miner-testlog.txt")
    said = messages(log)
    assert len(said) == 15 and log.skipped == {"system": 3}
    # the same words by the same person in the same second, twice: two messages
    assert said.count(("John-John Doe", "Testing dash in author's first name")) == 2
    assert ("John Doe", "Lorem ipsum : dolor sit amet.") in said


# ---- WhatsApp: any notice, any message ----

WORDS = [
    "the", "deploy", "is", "at", "noon", "budget", "review", "Friday", "server", "ready", "call", "video",
    "voice", "deleted", "message", "image", "attached", "file", "missed", "الخادم", "جاهز", "الاجتماع",
    "غدا", "مكالمة", "صوتية", "الرسالة", "ملف", "تقرير", "المبيعات", "ok", "👍", "10:30", "٣", "2024",
]  # fmt: skip
MARKS = st.sampled_from(["", LRM, RLM, LRM + RLM])


WHATSAPP_SAYS = {"missed voice call", "missed video call"}  # what the words above can spell of WhatsApp's notices


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12))
def test_words_a_person_writes_are_kept_as_written(words: list[str]) -> None:
    text = " ".join(words)
    if text.casefold() in WHATSAPP_SAYS:
        assert notice(text) == ("call", "")
    else:  # "Voice call" or "missed call" alone, unmarked, is a person's words too
        assert notice(text) == (None, text)


NOTICE_TEXTS = st.one_of(
    st.tuples(
        st.just("attachment"), st.from_regex(r"[0-9]{8}-PHOTO-2024-0[1-9]-1[0-9]-[0-9]{2}\.jpg", fullmatch=True)
    ).map(lambda t: (t[0], f"<attached: {t[1]}>")),
    st.tuples(st.just("attachment"), st.from_regex(r"IMG-2024[0-9]{4}-WA[0-9]{4}\.jpg", fullmatch=True)).flatmap(
        lambda t: st.sampled_from([f"{t[1]} (file attached)", f"{t[1]} (ملف مرفق)", f"<المُرفق: {t[1]}>"]).map(
            lambda s: ("attachment", s)
        )
    ),
    st.sampled_from(
        [
            ("media", "<Media omitted>"),
            ("media", "<تم استبعاد الوسائط>"),
            ("media", "image omitted"),
            ("media", "لم يتم إدراج الصورة"),
            ("media", "sticker omitted"),
            ("deleted", "This message was deleted"),
            ("deleted", "This message was deleted."),
            ("deleted", "You deleted this message."),
            ("deleted", "تم حذف هذه الرسالة"),
            ("deleted", "لقد حذَفت هذه الرسالة."),
            ("call", "Missed voice call"),
            ("call", "Missed video call, Tap to call back"),
            ("call", "مكالمة صوتية فائتة"),
            ("call", "مكالمة فيديو فائتة"),
        ]
    ),
    st.tuples(st.sampled_from(["Voice call", "Video call", "مكالمة صوتية", "مكالمة فيديو"]), st.integers(1, 59)).map(
        lambda t: ("call", f"{t[0]}, {t[1]} min" if t[0][0] in "VM" else f"{t[0]}، {t[1]} دقيقة")
    ),
)


@settings(max_examples=300, deadline=None)
@given(NOTICE_TEXTS, MARKS, MARKS)
def test_every_notice_is_skipped_whatever_marks_surround_it(case: tuple[str, str], before: str, after: str) -> None:
    why, text = case
    assert notice(f"{before}{text}{after}", marked=bool(before)) == (why, "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Dana", "Omar", "دانة", "عمر"]),
            st.one_of(
                st.lists(st.sampled_from(WORDS[:20]), min_size=1, max_size=6).map(lambda w: ("message", " ".join(w))),
                NOTICE_TEXTS,
            ),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_an_export_in_either_format_gives_back_its_messages_and_counts_its_notices(
    tmp_path: Path, lines: list[tuple[str, tuple[str, str], bool]]
) -> None:
    for ios in (True, False):
        text, want, skipped = "", [], {}
        for minute, (speaker, (kind, said), mark) in enumerate(lines):
            notice_mark = LRM if mark and kind != "message" else ""
            if ios:
                text += f"[01/02/2024, 10:{minute:02d}:00] {speaker}: {notice_mark}{said}\n"
            else:
                text += f"01/02/2024, 10:{minute:02d} - {speaker}: {notice_mark}{said}\n"
            if kind == "message" and said.casefold() in WHATSAPP_SAYS:
                kind = "call"
            if kind == "message":
                want.append((speaker, said))
            else:
                skipped[kind] = skipped.get(kind, 0) + 1
        path = tmp_path / ("ios.txt" if ios else "android.txt")
        path.write_text(text, encoding="utf-8")
        src = source("whatsapp", path=path)
        assert messages(src) == want
        assert src.skipped == skipped


# ---- Slack: integration posts ----


def slack_zip(path: Path, days: dict[str, list[dict[str, Any]]]) -> Path:
    users = [{"id": "U01", "name": "ana", "profile": {"display_name": "ana.l", "real_name": "Ana Lima"}}]
    channels = [{"id": "C01", "name": "ops"}]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("users.json", json.dumps(users))
        z.writestr("channels.json", json.dumps(channels))
        for name, messages in days.items():
            z.writestr(name, json.dumps(messages))
    return path


INTEGRATION = [
    {  # an incoming webhook's alert: nothing in text, everything in its attachment
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B01",
        "text": "",
        "ts": "1705312800.000100",
        "attachments": [
            {
                "fallback": "[Alert] disk 91% on db-2",
                "pretext": "New alert from <https://grafana.example.com|Grafana>",
                "title": "Disk almost full",
                "title_link": "https://grafana.example.com/d/1",
                "text": "db-2 is at 91% &amp; rising",
                "fields": [{"title": "Severity", "value": "high"}, {"title": "Host", "value": "db-2"}],
                "service_name": "Grafana",
            }
        ],
    },
    {  # an integration's post whose attachment has only its fallback: the fallback is the words
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B02",
        "ts": "1705312860.000200",
        "attachments": [{"fallback": "Build #412 passed on main", "author_name": "CI"}],
    },
    {  # a link unfurl repeating what the message says is said once
        "type": "message",
        "user": "U01",
        "text": "Runbook: https://wiki.example.com/runbook",
        "ts": "1705312920.000300",
        "attachments": [
            {"fallback": "https://wiki.example.com/runbook", "from_url": "https://wiki.example.com/runbook"}
        ],
    },
    {  # Block Kit only
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B03",
        "username": "deploybot",
        "ts": "1705312980.000400",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": "Deploy v1.4"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "Rolled out by <@U01>"}},
            {"type": "divider"},
        ],
    },
    {  # a text snippet: its preview is its text
        "type": "message",
        "user": "U01",
        "text": "",
        "ts": "1705313040.000500",
        "files": [{"id": "F01", "title": "nginx.conf", "mode": "snippet", "preview": "worker_processes 4;"}],
    },
    {
        "type": "message",
        "user": "U01",
        "text": "",
        "ts": "1705313100.000600",
        "files": [{"id": "F02", "name": "a.png"}],
    },
    {"type": "message", "subtype": "channel_join", "user": "U01", "text": "<@U01> joined", "ts": "1705313160.000700"},
    {"type": "message", "subtype": "tombstone", "text": "This message was deleted.", "ts": "1705313220.000800"},
]


def test_slack_integration_posts_keep_their_attachments_words_and_who_posted(tmp_path: Path) -> None:
    src = source("slack-export", path=slack_zip(tmp_path / "export.zip", {"ops/2024-01-15.json": INTEGRATION}))
    said = [(r.hint["speaker"], r.hint["text"]) for r in src.scan()]
    assert said == [
        (
            "Grafana",
            "New alert from Grafana (https://grafana.example.com)\nDisk almost full (https://grafana.example.com/d/1)\n"
            "db-2 is at 91% & rising\nSeverity: high\nHost: db-2",
        ),
        ("CI", "Build #412 passed on main"),
        ("ana.l", "Runbook: https://wiki.example.com/runbook"),
        ("deploybot", "Deploy v1.4\nRolled out by @ana.l"),
        ("ana.l", "nginx.conf\nworker_processes 4;"),
    ]
    assert src.skipped == {"file": 1, "system": 1, "deleted": 1}


JUNK = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["text", "title", "pretext", "fields", "value", "fallback", "type", "elements", "preview"]),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(JUNK, JUNK, JUNK)
def test_slack_reads_any_shape_of_attachments_blocks_and_files_without_failing(
    tmp_path: Path, attachments: Any, blocks: Any, files: Any
) -> None:
    raw = {"type": "message", "ts": "1.0", "text": "hi", "attachments": attachments, "blocks": blocks, "files": files}
    src = source("slack-export", path=slack_zip(tmp_path / "junk.zip", {"ops/2024-01-15.json": [raw]}))
    [(speaker, text)] = [(r.hint["speaker"], r.hint["text"]) for r in src.scan()]
    assert text.startswith("hi") and isinstance(speaker, str) and speaker
