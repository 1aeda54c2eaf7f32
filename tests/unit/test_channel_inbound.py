"""Inbound chat channels: each platform's signed webhook request is verified before its body is read,
and its messages come out as :class:`ChatMessage` values.

Requests are signed here with ``hmac`` directly, as each platform documents it, never with the
adapters' own code (except to check that :func:`webhook.sign` round-trips through ``receive``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from cabrain.channels.inbound import (
    ADAPTERS,
    ChannelSecrets,
    ChatMessage,
    RawRequest,
    Received,
    adapter,
    slack,
    talk,
    webhook,
    whatsapp,
)
from cabrain.errors import ConfigError, InputError, MethodNotAllowed, Unauthenticated

NOW = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
TS = int(NOW.timestamp())
ARABIC = "تخطيط RTL معطل في صفحة الخلاصة"


def _request(body: bytes, headers: Mapping[str, str], *, method: str = "POST") -> RawRequest:
    return RawRequest(method=method, headers=dict(headers), query={}, body=body)


def _json(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


# Slack ----------------------------------------------------------------------------------------

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK = ChannelSecrets(signing_secret=SLACK_SECRET)


def _slack_headers(body: bytes, *, secret: str = SLACK_SECRET, timestamp: int = TS) -> dict[str, str]:
    base = f"v0:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"x-slack-signature": f"v0={digest}", "x-slack-request-timestamp": str(timestamp)}


def _slack(payload: Any, **sign: Any) -> Received:
    body = _json(payload) if not isinstance(payload, bytes) else payload
    return ADAPTERS["slack"].receive(_request(body, _slack_headers(body, **sign)), SLACK, NOW)


def _slack_event(**event: Any) -> dict[str, Any]:
    base = {"type": "message", "user": "U061F7AUR", "text": ARABIC, "ts": "1714555800.000200", "channel": "C0LAN2Q65"}
    return {
        "type": "event_callback",
        "team_id": "T0001",
        "event_id": "Ev08MFMKH6",
        "event_time": 1714555800,
        "event": {**base, **event},
    }


def test_a_signed_slack_message_is_read_with_its_speaker_thread_and_time() -> None:
    received = _slack(
        _slack_event(
            thread_ts="1714555000.000100",
            user_profile={"display_name": "Layla", "real_name": "Layla Haddad", "name": "layla"},
        )
    )
    assert received.event_id == "Ev08MFMKH6"
    assert received.reply is None
    assert received.messages == [
        ChatMessage(
            event_id="C0LAN2Q65:1714555800.000200",
            speaker="Layla",
            speaker_id="U061F7AUR",
            text=ARABIC,
            sent_at=datetime(2024, 5, 1, 9, 30, 0, 200, tzinfo=UTC),
            channel="C0LAN2Q65",
            thread="1714555000.000100",
            reply_to={"channel": "C0LAN2Q65", "thread_ts": "1714555000.000100", "team_id": "T0001"},
            conversation="C0LAN2Q65/1714555000.000100",
        )
    ]


def test_a_slack_message_outside_a_thread_is_its_own_thread_and_speaker_falls_back() -> None:
    (message,) = _slack(_slack_event(user_profile={"display_name": "", "real_name": "Omar"})).messages
    assert message.thread == message.reply_to["thread_ts"] == "1714555800.000200"
    # replies go to its own thread, but as a turn it belongs to the channel's conversation, whose
    # sittings are found from time
    assert message.conversation == "C0LAN2Q65"
    assert message.speaker == "Omar"
    (message,) = _slack(_slack_event()).messages
    assert message.speaker == "U061F7AUR"


def test_slack_mentions_and_broadcasts_and_file_shares_are_messages() -> None:
    for event in (
        _slack_event(type="app_mention"),
        _slack_event(subtype="thread_broadcast", thread_ts="1714555000.000100"),
        _slack_event(subtype="file_share", files=[{"id": "F1"}]),
    ):
        assert [m.text for m in _slack(event).messages] == [ARABIC]


def test_slack_markup_reads_as_a_person_sees_it() -> None:
    text = "<@U1> see <#C2|general> &amp; <https://x.test/a?b=1&amp;c=2|the doc> <!here> a &lt;b&gt;"
    (message,) = _slack(_slack_event(text=text)).messages
    assert message.text == "@U1 see #general & the doc (https://x.test/a?b=1&c=2) @here a <b>"


@pytest.mark.parametrize(
    "event",
    [
        {"bot_id": "B1", "subtype": "bot_message"},
        {"bot_id": "B1"},
        {"subtype": "message_changed"},
        {"subtype": "message_deleted"},
        {"subtype": "channel_join"},
        {"type": "reaction_added", "reaction": "thumbsup"},
        {"type": "member_joined_channel"},
        {"text": ""},
    ],
)
def test_slack_events_that_no_person_wrote_yield_no_messages(event: dict[str, Any]) -> None:
    received = _slack(_slack_event(**event))
    assert received.messages == []
    assert received.event_id == "Ev08MFMKH6"


def test_slack_url_verification_is_answered_with_its_challenge() -> None:
    received = _slack({"type": "url_verification", "token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY"})
    assert received == Received([], reply=(200, "text/plain", b"3eZbrw1aBm2rZgRNFdxV2595E9CY"))


def test_slack_callbacks_that_are_not_events_yield_nothing() -> None:
    assert _slack({"type": "app_rate_limited", "team_id": "T0001", "minute_rate_limited": 1}).messages == []


def test_a_slack_request_signed_with_another_secret_is_refused() -> None:
    with pytest.raises(Unauthenticated, match="bad signature") as caught:
        _slack(_slack_event(), secret="another-secret")
    assert SLACK_SECRET not in str(caught.value)


def test_a_slack_request_altered_after_signing_is_refused() -> None:
    body = _json(_slack_event())
    headers = _slack_headers(body)
    with pytest.raises(Unauthenticated, match="bad signature"):
        ADAPTERS["slack"].receive(_request(body.replace(b"U061F7AUR", b"U000EVIL0"), headers), SLACK, NOW)


@pytest.mark.parametrize("missing", ["x-slack-signature", "x-slack-request-timestamp"])
def test_a_slack_request_without_its_signature_headers_is_refused(missing: str) -> None:
    body = _json(_slack_event())
    headers = _slack_headers(body)
    del headers[missing]
    with pytest.raises(Unauthenticated, match=f"missing signature.*{missing}"):
        ADAPTERS["slack"].receive(_request(body, headers), SLACK, NOW)


@pytest.mark.parametrize("skew", [-301, 301, -3600])
def test_a_slack_request_signed_more_than_five_minutes_from_now_is_refused(skew: int) -> None:
    with pytest.raises(Unauthenticated, match="stale timestamp"):
        _slack(_slack_event(), timestamp=TS + skew)


def test_a_slack_request_signed_within_five_minutes_is_taken() -> None:
    assert len(_slack(_slack_event(), timestamp=TS - 299).messages) == 1


def test_slack_checks_the_signature_before_reading_the_body() -> None:
    garbage = _request(b"\xff\xfe not json {", {"x-slack-request-timestamp": str(TS), "x-slack-signature": "v0=00"})
    with pytest.raises(Unauthenticated):
        ADAPTERS["slack"].receive(garbage, SLACK, NOW)
    with pytest.raises(Unauthenticated):
        ADAPTERS["slack"].receive(_request(b"\xff\xfe not json {", {}), SLACK, NOW)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"not json", "not JSON"),
        ([1, 2], "not a JSON object"),
        ({"type": "url_verification"}, "without a challenge"),
        ({"type": "event_callback", "event": {"type": "message"}}, "without an event_id"),
        ({"type": "event_callback", "event_id": "Ev1"}, "without an event object"),
        (_slack_event(ts="yesterday"), "Unix time"),
        (_slack_event(channel=None), "event.channel"),
    ],
)
def test_a_verified_but_malformed_slack_body_is_an_input_error(payload: Any, why: str) -> None:
    with pytest.raises(InputError, match=why):
        _slack(payload)


def test_a_slack_channel_without_a_signing_secret_is_misconfigured() -> None:
    body = _json(_slack_event())
    with pytest.raises(ConfigError, match="no signing secret"):
        ADAPTERS["slack"].receive(_request(body, _slack_headers(body)), ChannelSecrets(signing_secret=None), NOW)


def test_slack_answers_only_posts() -> None:
    with pytest.raises(MethodNotAllowed):
        ADAPTERS["slack"].receive(_request(b"", {}, method="GET"), SLACK, NOW)


# WhatsApp -------------------------------------------------------------------------------------

WA_SECRET = "c7b1e0d2a9f34e5b8a6d1c0f9e8d7c6b"
WA_TOKEN = "verify-me-please"
WA = ChannelSecrets(signing_secret=WA_SECRET, verify_token=WA_TOKEN)


def _wa_headers(body: bytes, *, secret: str = WA_SECRET) -> dict[str, str]:
    return {"x-hub-signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}


def _wa(payload: Any, **sign: Any) -> Received:
    body = _json(payload) if not isinstance(payload, bytes) else payload
    return ADAPTERS["whatsapp"].receive(_request(body, _wa_headers(body, **sign)), WA, NOW)


def _wa_value(**value: Any) -> dict[str, Any]:
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102290129340398",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
                            **value,
                        },
                    }
                ],
            }
        ],
    }


def _wa_message(
    kind: str, part: dict[str, Any], *, wamid: str = "wamid.HBgLMTY0NjcwNDM1OTUVAgASGBQzQUZCMTY0MDc2MUYwNzBDNTY5MAA="
) -> dict[str, Any]:
    return {"from": "966501234567", "id": wamid, "timestamp": str(TS), "type": kind, kind: part}


CONTACTS = [{"profile": {"name": "سارة"}, "wa_id": "966501234567"}]


def test_a_signed_whatsapp_text_message_is_read_with_its_sender_and_thread() -> None:
    message = _wa_message("text", {"body": ARABIC})
    message["context"] = {"from": "15550783881", "id": "wamid.earlier"}
    received = _wa(_wa_value(contacts=CONTACTS, messages=[message]))
    assert received.reply is None
    assert received.messages == [
        ChatMessage(
            event_id=message["id"],
            speaker="سارة",
            speaker_id="966501234567",
            text=ARABIC,
            sent_at=NOW,
            channel="106540352242922",
            thread="106540352242922:966501234567",
            reply_to={"phone_number_id": "106540352242922", "to": "966501234567", "message_id": message["id"]},
        )
    ]


def test_whatsapp_captions_and_tapped_buttons_are_messages_and_a_sender_without_a_profile_is_their_number() -> None:
    messages = [
        _wa_message("image", {"id": "m1", "mime_type": "image/jpeg", "caption": "the broken page"}, wamid="wamid.1"),
        _wa_message("video", {"id": "m2", "caption": "a screen recording"}, wamid="wamid.2"),
        _wa_message("document", {"id": "m3", "filename": "r.pdf", "caption": "the report"}, wamid="wamid.3"),
        _wa_message("button", {"payload": "YES", "text": "Yes, ship it"}, wamid="wamid.4"),
        _wa_message(
            "interactive", {"type": "button_reply", "button_reply": {"id": "b1", "title": "Later"}}, wamid="wamid.5"
        ),
        _wa_message(
            "interactive",
            {"type": "list_reply", "list_reply": {"id": "r1", "title": "Tuesday", "description": "10:00"}},
            wamid="wamid.6",
        ),
        _wa_message("image", {"id": "m7"}, wamid="wamid.7"),  # no caption: nothing said
    ]
    received = _wa(_wa_value(messages=messages))
    assert [(m.event_id, m.text, m.speaker) for m in received.messages] == [
        ("wamid.1", "the broken page", "966501234567"),
        ("wamid.2", "a screen recording", "966501234567"),
        ("wamid.3", "the report", "966501234567"),
        ("wamid.4", "Yes, ship it", "966501234567"),
        ("wamid.5", "Later", "966501234567"),
        ("wamid.6", "Tuesday", "966501234567"),
    ]


@pytest.mark.parametrize(
    "payload",
    [
        _wa_value(statuses=[{"id": "wamid.1", "status": "delivered", "timestamp": str(TS), "recipient_id": "9665"}]),
        _wa_value(contacts=CONTACTS, messages=[_wa_message("reaction", {"message_id": "wamid.0", "emoji": "👍"})]),
        _wa_value(contacts=CONTACTS, messages=[_wa_message("sticker", {"id": "s1", "mime_type": "image/webp"})]),
        _wa_value(
            contacts=CONTACTS, messages=[{"from": "9665", "id": "wamid.9", "timestamp": str(TS), "type": "unsupported"}]
        ),
        {"object": "page", "entry": []},
        {
            "object": "whatsapp_business_account",
            "entry": [{"id": "1", "changes": [{"field": "account_update", "value": {"event": "VERIFIED_ACCOUNT"}}]}],
        },
    ],
)
def test_whatsapp_notifications_that_no_person_wrote_yield_no_messages(payload: dict[str, Any]) -> None:
    assert _wa(payload).messages == []


def _wa_subscribe(query: dict[str, str], secrets: ChannelSecrets = WA) -> Received:
    request = RawRequest(method="GET", headers={}, query=query, body=b"")
    return ADAPTERS["whatsapp"].receive(request, secrets, NOW)


def test_whatsapp_subscription_with_the_verify_token_is_answered_with_its_challenge() -> None:
    received = _wa_subscribe({"hub.mode": "subscribe", "hub.verify_token": WA_TOKEN, "hub.challenge": "1158201444"})
    assert received == Received([], reply=(200, "text/plain", b"1158201444"))


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ({"hub.mode": "subscribe", "hub.verify_token": "guess", "hub.challenge": "1"}, "wrong verify token"),
        ({"hub.mode": "subscribe", "hub.challenge": "1"}, "missing verify token"),
        ({"hub.mode": "unsubscribe", "hub.verify_token": WA_TOKEN, "hub.challenge": "1"}, "not a subscription"),
    ],
)
def test_whatsapp_subscription_without_the_verify_token_is_refused(query: dict[str, str], why: str) -> None:
    with pytest.raises(Unauthenticated, match=why) as caught:
        _wa_subscribe(query)
    assert WA_TOKEN not in str(caught.value)


def test_whatsapp_subscription_needs_a_configured_verify_token_and_a_challenge() -> None:
    with pytest.raises(ConfigError, match="no verify token"):
        _wa_subscribe({"hub.mode": "subscribe", "hub.verify_token": "x"}, ChannelSecrets(signing_secret=WA_SECRET))
    with pytest.raises(InputError, match=r"hub\.challenge"):
        _wa_subscribe({"hub.mode": "subscribe", "hub.verify_token": WA_TOKEN})


def test_a_whatsapp_notification_signed_with_another_secret_is_refused() -> None:
    with pytest.raises(Unauthenticated, match="bad signature") as caught:
        _wa(_wa_value(contacts=CONTACTS, messages=[_wa_message("text", {"body": "hi"})]), secret="not-the-app-secret")
    assert WA_SECRET not in str(caught.value)


def test_a_whatsapp_notification_without_a_signature_or_with_another_scheme_is_refused() -> None:
    body = _json(_wa_value(messages=[_wa_message("text", {"body": "hi"})]))
    with pytest.raises(Unauthenticated, match=r"missing signature.*x-hub-signature-256"):
        ADAPTERS["whatsapp"].receive(_request(body, {}), WA, NOW)
    sha1 = {"x-hub-signature-256": "sha1=" + hmac.new(WA_SECRET.encode(), body, hashlib.sha1).hexdigest()}
    with pytest.raises(Unauthenticated, match="bad signature"):
        ADAPTERS["whatsapp"].receive(_request(body, sha1), WA, NOW)


def test_whatsapp_checks_the_signature_before_reading_the_body() -> None:
    garbage = _request(b"\x00\xff{{", {"x-hub-signature-256": "sha256=" + "0" * 64})
    with pytest.raises(Unauthenticated):
        ADAPTERS["whatsapp"].receive(garbage, WA, NOW)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\x00\xff{{", "not valid UTF-8"),
        (b"{", "not JSON"),
        ({"object": "whatsapp_business_account"}, "entry must be a JSON list"),
        (
            {"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": "x"}]},
            "changes must be a JSON list",
        ),
        (_wa_value(messages=[_wa_message("text", {"body": "hi"}) | {"timestamp": "soon"}]), "Unix time"),
        (_wa_value(messages=[_wa_message("text", {"body": "hi"}) | {"from": None}]), "from"),
        (
            {"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": {}}]}]},
            "metadata",
        ),
    ],
)
def test_a_verified_but_malformed_whatsapp_body_is_an_input_error(payload: Any, why: str) -> None:
    with pytest.raises(InputError, match=why):
        _wa(payload)


def test_whatsapp_answers_only_gets_and_posts_and_needs_its_app_secret() -> None:
    with pytest.raises(MethodNotAllowed):
        ADAPTERS["whatsapp"].receive(_request(b"", {}, method="PUT"), WA, NOW)
    with pytest.raises(ConfigError, match="no signing secret"):
        ADAPTERS["whatsapp"].receive(_request(b"{}", {}), ChannelSecrets(signing_secret=None, verify_token="t"), NOW)


# Nextcloud Talk -------------------------------------------------------------------------------

TALK_SECRET = "a" * 40 + "talkbot"
TALK = ChannelSecrets(signing_secret=TALK_SECRET)
RANDOM = "pYhL3DgMRQKyTUhvmxKf5IMY5c9l0TSnXhr8sJTeiZiZxaHUoPGbuk0BL3dLzUMA"
BACKEND = "https://cloud.example.org/"


def _talk_headers(body: bytes, *, secret: str = TALK_SECRET, random: str = RANDOM) -> dict[str, str]:
    digest = hmac.new(secret.encode(), random.encode() + body, hashlib.sha256).hexdigest()
    return {
        "x-nextcloud-talk-random": random,
        "x-nextcloud-talk-signature": digest,
        "x-nextcloud-talk-backend": BACKEND,
    }


def _talk(payload: Any, **sign: Any) -> Received:
    body = _json(payload) if not isinstance(payload, bytes) else payload
    return ADAPTERS["talk"].receive(_request(body, _talk_headers(body, **sign)), TALK, NOW)


def _talk_note(content: Any, *, actor: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "Create",
        "actor": actor or {"type": "Person", "id": "users/layla", "name": "Layla Haddad"},
        "object": {
            "type": "Note",
            "id": "1567",
            "name": "message",
            "content": content if isinstance(content, str) else json.dumps(content),
            "mediaType": "text/markdown",
        },
        "target": {"type": "Collection", "id": "n3xtc10ud", "name": "Frontend"},
    }


def test_a_signed_talk_message_is_read_with_its_mentions_filled_in() -> None:
    content = {
        "message": f"{ARABIC} {{mention-user1}}",
        "parameters": {"mention-user1": {"type": "user", "id": "omar", "name": "Omar"}},
    }
    received = _talk(_talk_note(content))
    assert received.messages == [
        ChatMessage(
            event_id="n3xtc10ud:1567",
            speaker="Layla Haddad",
            speaker_id="users/layla",
            text=f"{ARABIC} Omar",
            sent_at=NOW,
            channel="n3xtc10ud",
            thread="n3xtc10ud",
            reply_to={"room": "n3xtc10ud", "reply_to": 1567},  # the unsigned backend header is not kept
        )
    ]


def test_talk_encodes_no_parameters_as_a_list_and_unknown_placeholders_stay() -> None:
    (message,) = _talk(_talk_note({"message": "hi {unknown} there", "parameters": []})).messages
    assert message.text == "hi {unknown} there"


def test_talk_takes_an_uppercase_signature() -> None:
    body = _json(_talk_note({"message": "hi", "parameters": []}))
    headers = _talk_headers(body)
    headers["x-nextcloud-talk-signature"] = headers["x-nextcloud-talk-signature"].upper()
    assert len(ADAPTERS["talk"].receive(_request(body, headers), TALK, NOW).messages) == 1


@pytest.mark.parametrize(
    "payload",
    [
        {
            "type": "Join",
            "actor": {"type": "Application", "id": "bots/bot-a78f", "name": "Bot"},
            "object": {"type": "Collection", "id": "n3xtc10ud"},
        },
        {
            "type": "Leave",
            "actor": {"type": "Application", "id": "bots/bot-a78f", "name": "Bot"},
            "object": {"type": "Collection", "id": "n3xtc10ud"},
        },
        _talk_note({"message": "hi", "parameters": []}) | {"type": "Like", "content": "👍"},
        _talk_note({"message": "{actor} started a call", "parameters": {}})
        | {"object": {"type": "Note", "id": "9", "name": "call_started", "content": "{}"}},
        _talk_note(
            {"message": "beep", "parameters": []},
            actor={"type": "Application", "id": "bots/bot-1", "name": "Other bot"},
        ),
        _talk_note({"message": "   ", "parameters": []}),
    ],
)
def test_talk_activities_that_no_person_wrote_yield_no_messages(payload: dict[str, Any]) -> None:
    assert _talk(payload).messages == []


def test_a_talk_request_signed_with_another_secret_or_random_is_refused() -> None:
    body = _json(_talk_note({"message": "hi", "parameters": []}))
    headers = _talk_headers(body)
    headers["x-nextcloud-talk-random"] = "another-random"
    with pytest.raises(Unauthenticated, match="bad signature"):
        ADAPTERS["talk"].receive(_request(body, headers), TALK, NOW)
    with pytest.raises(Unauthenticated, match="bad signature") as caught:
        _talk(_talk_note({"message": "hi", "parameters": []}), secret="wrong")
    assert TALK_SECRET not in str(caught.value)


@pytest.mark.parametrize("missing", ["x-nextcloud-talk-signature", "x-nextcloud-talk-random"])
def test_a_talk_request_without_its_signature_headers_is_refused(missing: str) -> None:
    body = _json(_talk_note({"message": "hi", "parameters": []}))
    headers = _talk_headers(body)
    del headers[missing]
    with pytest.raises(Unauthenticated, match=f"missing signature.*{missing}"):
        ADAPTERS["talk"].receive(_request(body, headers), TALK, NOW)


def test_talk_checks_the_signature_before_reading_the_body() -> None:
    garbage = _request(b"<html>", {"x-nextcloud-talk-random": RANDOM, "x-nextcloud-talk-signature": "f" * 64})
    with pytest.raises(Unauthenticated):
        ADAPTERS["talk"].receive(garbage, TALK, NOW)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"<html>", "not JSON"),
        (_talk_note("not json"), "object.content is not JSON"),
        (_talk_note({"parameters": {}}), "no message string"),
        (_talk_note({"message": "hi"}) | {"target": None}, "target must be a JSON object"),
        (_talk_note({"message": "hi"}) | {"actor": {"type": "Person"}}, "actor.id"),
        (
            _talk_note({"message": "hi"})
            | {"object": {"type": "Note", "id": "x1", "name": "message", "content": "{}"}},
            "message number",
        ),
    ],
)
def test_a_verified_but_malformed_talk_body_is_an_input_error(payload: Any, why: str) -> None:
    with pytest.raises(InputError, match=why):
        _talk(payload)


def test_a_talk_channel_without_its_bot_secret_is_misconfigured() -> None:
    with pytest.raises(ConfigError):
        ADAPTERS["talk"].receive(_request(b"{}", {}), ChannelSecrets(signing_secret=""), NOW)


# Standard Webhooks ----------------------------------------------------------------------------

WH_KEY = b"\x13\x37" * 16
WH_SECRET = "whsec_" + base64.b64encode(WH_KEY).decode()
WH = ChannelSecrets(signing_secret=WH_SECRET)
MSG_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"


def _wh_headers(body: bytes, *, key: bytes = WH_KEY, msg_id: str = MSG_ID, timestamp: int = TS) -> dict[str, str]:
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }


def _wh(payload: Any, secrets: ChannelSecrets = WH, **sign: Any) -> Received:
    body = _json(payload) if not isinstance(payload, bytes) else payload
    return ADAPTERS["webhook"].receive(_request(body, _wh_headers(body, **sign)), secrets, NOW)


def test_a_signed_webhook_message_is_read_with_every_field() -> None:
    received = _wh(
        {
            "id": "m-1",
            "speaker": "ليلى",
            "speaker_id": "u-42",
            "text": ARABIC,
            "sent_at": "2024-05-01T12:00:00+03:00",
            "channel": "support",
            "thread": "ticket-7",
        }
    )
    assert received.event_id == MSG_ID
    assert received.messages == [
        ChatMessage(
            event_id="m-1",
            speaker="ليلى",
            speaker_id="u-42",
            text=ARABIC,
            sent_at=datetime(2024, 5, 1, 9, 0, tzinfo=UTC),
            channel="support",
            thread="ticket-7",
            reply_to={"channel": "support", "thread": "ticket-7"},
        )
    ]


def test_a_webhook_batch_fills_in_what_its_messages_leave_out() -> None:
    received = _wh(
        {
            "messages": [
                {"id": "a", "speaker": "Ana", "text": "first", "channel": "ops"},
                {"id": 2, "speaker_id": "u-9", "text": "second", "sent_at": "2024-04-30T08:00:00Z"},
            ]
        }
    )
    first, second = received.messages
    assert (first.speaker, first.speaker_id, first.sent_at, first.channel, first.thread) == (
        "Ana",
        "Ana",
        NOW,
        "ops",
        "ops",
    )
    assert first.reply_to == {"channel": "ops", "thread": "ops"}
    assert (second.event_id, second.speaker, second.sent_at) == ("2", "u-9", datetime(2024, 4, 30, 8, tzinfo=UTC))
    assert (second.channel, second.thread) == ("webhook", "webhook")
    assert _wh({"messages": []}).messages == []


def test_a_webhook_secret_without_the_whsec_prefix_is_used_as_its_bytes() -> None:
    received = _wh(
        {"id": "a", "speaker": "Ana", "text": "hi"}, ChannelSecrets(signing_secret="plain secret"), key=b"plain secret"
    )
    assert [m.text for m in received.messages] == ["hi"]


def test_a_webhook_signature_list_is_taken_when_any_v1_signature_matches() -> None:
    body = _json({"id": "a", "speaker": "Ana", "text": "hi"})
    headers = _wh_headers(body)
    old = _wh_headers(body, key=b"old key")["webhook-signature"]
    headers["webhook-signature"] = f"v1a,c29tZXRoaW5n {old} {headers['webhook-signature']}"
    assert len(ADAPTERS["webhook"].receive(_request(body, headers), WH, NOW).messages) == 1


def test_a_webhook_signature_of_another_version_is_not_taken() -> None:
    body = _json({"id": "a", "speaker": "Ana", "text": "hi"})
    headers = _wh_headers(body)
    headers["webhook-signature"] = headers["webhook-signature"].replace("v1,", "v2,")
    with pytest.raises(Unauthenticated, match="bad signature"):
        ADAPTERS["webhook"].receive(_request(body, headers), WH, NOW)


def test_a_webhook_signed_with_another_key_or_for_another_id_is_refused() -> None:
    body = _json({"id": "a", "speaker": "Ana", "text": "hi"})
    with pytest.raises(Unauthenticated, match="bad signature") as caught:
        _wh(body, key=b"another key")
    assert WH_SECRET not in str(caught.value) and WH_SECRET[6:] not in str(caught.value)
    headers = _wh_headers(body)
    headers["webhook-id"] = "msg_replayed_under_another_id"
    with pytest.raises(Unauthenticated, match="bad signature"):
        ADAPTERS["webhook"].receive(_request(body, headers), WH, NOW)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_webhook_without_its_signature_headers_is_refused(missing: str) -> None:
    body = _json({"id": "a", "speaker": "Ana", "text": "hi"})
    headers = _wh_headers(body)
    del headers[missing]
    with pytest.raises(Unauthenticated, match=f"missing signature.*{missing}"):
        ADAPTERS["webhook"].receive(_request(body, headers), WH, NOW)


@pytest.mark.parametrize("skew", [-301, 301])
def test_a_webhook_signed_more_than_five_minutes_from_now_is_refused(skew: int) -> None:
    with pytest.raises(Unauthenticated, match="stale timestamp"):
        _wh({"id": "a", "speaker": "Ana", "text": "hi"}, timestamp=TS + skew)


def test_a_webhook_timestamp_that_is_not_unix_seconds_is_refused() -> None:
    body = _json({"id": "a", "speaker": "Ana", "text": "hi"})
    headers = _wh_headers(body)
    headers["webhook-timestamp"] = "2024-05-01T09:30:00Z"
    with pytest.raises(Unauthenticated, match="malformed timestamp"):
        ADAPTERS["webhook"].receive(_request(body, headers), WH, NOW)


def test_a_webhook_checks_the_signature_before_reading_the_body() -> None:
    garbage = {"webhook-id": "x", "webhook-timestamp": str(TS), "webhook-signature": "v1,AAAA"}
    with pytest.raises(Unauthenticated):
        ADAPTERS["webhook"].receive(_request(b"\xff garbage", garbage), WH, NOW)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\xff garbage", "not valid UTF-8"),
        (b"{", "not JSON"),
        ([{"id": "a", "text": "hi"}], "must be a JSON object"),
        ({"messages": {"id": "a"}}, "messages must be a JSON list"),
        ({"messages": ["hi"]}, r"messages\[0\] must be a JSON object"),
        ({"speaker": "Ana", "text": "hi"}, r"the message\.id is required"),
        ({"id": "", "speaker": "Ana", "text": "hi"}, r"\.id is required"),
        ({"id": "a", "speaker": "Ana"}, r"\.text is required"),
        ({"id": "a", "speaker": "Ana", "text": "  \n"}, r"\.text is empty"),
        ({"id": "a", "speaker": "Ana", "text": "x" * 100_001}, "100,001 characters, over the 100,000"),
        ({"id": "a", "text": "hi"}, "needs a speaker"),
        ({"id": "a", "speaker": 7, "text": "hi"}, r"\.speaker must be a non-empty string"),
        ({"id": "a", "speaker": "Ana", "text": "hi", "sent_at": "last tuesday"}, "ISO-8601"),
        ({"id": "a", "speaker": "Ana", "text": "hi", "sent_at": "2024-05-01T09:30:00"}, "no time zone"),
        (
            {"messages": [{"id": "a", "speaker": "Ana", "text": "hi"}, {"id": "b", "speaker": "Ana"}]},
            r"messages\[1\]\.text",
        ),
    ],
)
def test_a_verified_but_malformed_webhook_body_is_an_input_error(payload: Any, why: str) -> None:
    with pytest.raises(InputError, match=why):
        _wh(payload)


def test_the_longest_webhook_text_is_taken() -> None:
    (message,) = _wh({"id": "a", "speaker": "Ana", "text": "x" * 100_000}).messages
    assert len(message.text) == 100_000


def test_webhook_sign_makes_the_headers_receive_takes() -> None:
    body = _json({"id": "a", "speaker": "Ana", "text": ARABIC})
    headers = webhook.sign(WH_SECRET, MSG_ID, TS, body)
    assert headers == _wh_headers(body)
    received = ADAPTERS["webhook"].receive(_request(body, headers), WH, NOW)
    assert ([m.text for m in received.messages], received.event_id) == ([ARABIC], MSG_ID)
    assert webhook.sign("plain", "m", TS, b"{}") == _wh_headers(b"{}", key=b"plain", msg_id="m")


def test_a_whsec_secret_that_is_not_base64_is_misconfigured() -> None:
    with pytest.raises(ConfigError, match="not a base64 key"):
        _wh({"id": "a", "speaker": "Ana", "text": "hi"}, ChannelSecrets(signing_secret="whsec_not*base64!"))
    with pytest.raises(ConfigError, match="not a base64 key"):
        webhook.sign("whsec_", "m", TS, b"{}")


def test_a_webhook_sent_at_in_another_zone_comes_out_in_utc() -> None:
    (message,) = _wh({"id": "a", "speaker": "Ana", "text": "hi", "sent_at": "2024-05-01T05:30:00-04:00"}).messages
    assert message.sent_at == NOW and message.sent_at.tzinfo is UTC


# The registry ---------------------------------------------------------------------------------


def test_every_adapter_is_registered_under_its_kind() -> None:
    assert sorted(ADAPTERS) == ["slack", "talk", "webhook", "whatsapp"]
    assert all(adapter(kind).kind == kind for kind in ADAPTERS)
    kinds = {slack.KIND, whatsapp.KIND, talk.KIND, webhook.KIND}
    assert kinds == set(ADAPTERS)


def test_an_unknown_channel_kind_names_the_known_ones() -> None:
    with pytest.raises(InputError, match="unknown channel kind 'telegram'") as caught:
        adapter("telegram")
    assert caught.value.hint == "use one of: slack, talk, webhook, whatsapp"


def test_received_times_are_aware_utc_even_when_now_is_given_in_another_zone() -> None:
    riyadh_now = NOW.astimezone(timezone(timedelta(hours=3)))
    body = _json(_talk_note({"message": "hi", "parameters": []}))
    (message,) = ADAPTERS["talk"].receive(_request(body, _talk_headers(body)), TALK, riyadh_now).messages
    assert message.sent_at == NOW and message.sent_at.utcoffset() == timedelta(0)


def test_the_accepted_clock_skew_is_the_channels_setting() -> None:
    message = {"id": "m-9", "speaker": "Ana", "text": "ten minutes late"}
    with pytest.raises(Unauthenticated, match="at most 300 s"):
        _wh(message, timestamp=TS - 600)
    wide = ChannelSecrets(signing_secret=WH_SECRET, max_skew_s=900)
    assert [m.text for m in _wh(message, wide, timestamp=TS - 600).messages] == ["ten minutes late"]
