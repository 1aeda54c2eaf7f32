"""The notification senders against stand-ins that speak each platform's wire format on loopback
(tests/fakes/slack_server.py, whatsapp_server.py, talk_server.py, push_server.py, hook_server.py):
what each platform receives, and how its failures read (retry, retry_after, gone)."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from cabrain.channels.inbound.webhook import sign as sign_webhook
from cabrain.errors import ConfigError, InputError
from cabrain.notify.senders import DeliveryError, Notice, Sender, sender
from cabrain.notify.senders.webpush import MAX_PAYLOAD, payload
from tests.conftest import brings, free_port, loopback_egress
from tests.standins import Running, standing

TOKEN = "xoxb-stand-token-0123456789"
WRONG = "xoxb-wrong-token-9876543210"

NOTICE = Notice(
    key="evt-42:dest-7",
    title="Memory updated",
    text="alice changed the deploy runbook: https://brain.example.com/m/42",
    links=["https://brain.example.com/m/42"],
    data={"kind": "memory.updated", "memory_id": 42, "namespace": "proj"},
)


@pytest.fixture
async def make() -> AsyncIterator[Any]:
    """Build senders for a test (closed when it ends)."""
    made: list[Sender] = []

    def build(kind: str, config: dict[str, Any], secret: str | None, **options: Any) -> Sender:
        made.append(sender(kind, config, secret, **{"egress": loopback_egress(), **options}))
        return made[-1]

    yield build
    for each in made:
        await each.aclose()


async def refused(send: Any, *args: Any) -> DeliveryError:
    with pytest.raises(DeliveryError) as caught:
        await send(*args)
    return caught.value


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(InputError, match="unknown notification kind 'pager'"):
        sender("pager", {}, None)


# -- Slack -----------------------------------------------------------------------------------------


@pytest.fixture
@brings("subprocess")
def slack(tmp_path: Path) -> Iterator[Running]:
    with standing("slack_server", tmp_path, TOKEN, channels={"C0ALERTS": {}, "C0OLD": {"archived": True}}) as s:
        yield s


def slack_config(stand: Running) -> dict[str, Any]:
    return {"base_url": f"{stand.url}/api/", "timeout_s": 5}


async def test_slack_posts_the_text_without_link_previews(slack: Running, make: Any) -> None:
    ts = await make("slack", slack_config(slack), TOKEN).send({"channel": "C0ALERTS"}, NOTICE)
    assert slack.seen() == [
        {
            "path": "/api/chat.postMessage",
            "channel": "C0ALERTS",
            "text": NOTICE.text,
            "thread_ts": None,
            "unfurl_links": False,
            "ts": ts,
        }
    ]


async def test_slack_reply_lands_in_the_thread(slack: Running, make: Any) -> None:
    post = make("slack", slack_config(slack), TOKEN)
    first = await post.send({"channel": "C0ALERTS"}, NOTICE)
    reply = await post.send({"channel": "C0ALERTS", "thread_ts": first}, NOTICE)
    assert reply != first
    assert [m["thread_ts"] for m in slack.seen()] == [None, first]


async def test_slack_wrong_token_is_not_retried(slack: Running, make: Any) -> None:
    error = await refused(make("slack", slack_config(slack), WRONG).send, {"channel": "C0ALERTS"}, NOTICE)
    assert (error.retry, error.gone) == (False, False)
    assert "invalid_auth" in str(error) and "token" in (error.hint or "")
    assert WRONG not in str(error) and WRONG not in repr(error.args)


async def test_slack_server_error_is_retried(slack: Running, make: Any) -> None:
    slack.set(faults=[{"match": "chat.postMessage", "status": 503}])
    error = await refused(make("slack", slack_config(slack), TOKEN).send, {"channel": "C0ALERTS"}, NOTICE)
    assert (error.retry, error.status_code) == (True, 503)


async def test_slack_rate_limit_is_retried_after_what_it_asks(slack: Running, make: Any) -> None:
    slack.set(faults=[{"match": "chat.postMessage", "status": 429, "retry_after": 7}])
    error = await refused(make("slack", slack_config(slack), TOKEN).send, {"channel": "C0ALERTS"}, NOTICE)
    assert (error.retry, error.retry_after) == (True, 7)
    assert "ratelimited" in str(error)


async def test_slack_missing_or_archived_channel_is_gone(slack: Running, make: Any) -> None:
    post = make("slack", slack_config(slack), TOKEN)
    for channel in ("C0NOPE", "C0OLD"):
        error = await refused(post.send, {"channel": channel}, NOTICE)
        assert (error.gone, error.retry) == (True, False)


async def test_slack_unreachable_is_retried(make: Any) -> None:
    post = make("slack", {"base_url": f"http://127.0.0.1:{free_port()}/api/"}, TOKEN)
    error = await refused(post.send, {"channel": "C0ALERTS"}, NOTICE)
    assert error.retry is True


# -- WhatsApp --------------------------------------------------------------------------------------


@pytest.fixture
@brings("subprocess")
def whatsapp(tmp_path: Path) -> Iterator[Running]:
    with standing("whatsapp_server", tmp_path, TOKEN, phone_numbers=["106540352242922"]) as s:
        yield s


def whatsapp_config(stand: Running) -> dict[str, Any]:
    return {"base_url": stand.url, "phone_number_id": "106540352242922", "timeout_s": 5}


async def test_whatsapp_sends_a_text_with_link_preview(whatsapp: Running, make: Any) -> None:
    wamid = await make("whatsapp", whatsapp_config(whatsapp), TOKEN).send({"to": "+4915112345678"}, NOTICE)
    assert wamid is not None and wamid.startswith("wamid.")
    assert whatsapp.seen() == [
        {
            "path": "/v21.0/106540352242922/messages",
            "phone_number_id": "106540352242922",
            "to": "+4915112345678",
            "body": NOTICE.text,
            "preview_url": True,
            "context": None,
            "id": wamid,
        }
    ]


async def test_whatsapp_reply_quotes_the_message(whatsapp: Running, make: Any) -> None:
    target = {"to": "+4915112345678", "message_id": "wamid.HBgLMTY0NjcwNDM1OTUVAgASGBQzQTdC"}
    await make("whatsapp", whatsapp_config(whatsapp), TOKEN).send(target, NOTICE)
    assert whatsapp.seen()[0]["context"] == {"message_id": "wamid.HBgLMTY0NjcwNDM1OTUVAgASGBQzQTdC"}


async def test_whatsapp_wrong_token_is_not_retried(whatsapp: Running, make: Any) -> None:
    error = await refused(make("whatsapp", whatsapp_config(whatsapp), WRONG).send, {"to": "+4915112345678"}, NOTICE)
    assert (error.retry, error.status_code) == (False, 401)
    assert "code 190" in str(error) and "token" in (error.hint or "")
    assert WRONG not in str(error)


async def test_whatsapp_server_error_is_retried(whatsapp: Running, make: Any) -> None:
    whatsapp.set(faults=[{"match": "/messages", "status": 503}])
    error = await refused(make("whatsapp", whatsapp_config(whatsapp), TOKEN).send, {"to": "+4915112345678"}, NOTICE)
    assert (error.retry, error.status_code) == (True, 503)


async def test_whatsapp_rate_limit_is_retried_after_what_it_asks(whatsapp: Running, make: Any) -> None:
    whatsapp.set(faults=[{"match": "/messages", "status": 429, "code": 130429, "retry_after": 7}])
    error = await refused(make("whatsapp", whatsapp_config(whatsapp), TOKEN).send, {"to": "+4915112345678"}, NOTICE)
    assert (error.retry, error.retry_after) == (True, 7)


async def test_whatsapp_outside_the_24_hour_window_is_not_retried(whatsapp: Running, make: Any) -> None:
    whatsapp.set(faults=[{"match": "/messages", "status": 400, "code": 131047, "message": "Re-engagement message"}])
    error = await refused(make("whatsapp", whatsapp_config(whatsapp), TOKEN).send, {"to": "+4915112345678"}, NOTICE)
    assert error.retry is False and "24 hours" in (error.hint or "")


# -- Nextcloud Talk --------------------------------------------------------------------------------

BOT_SECRET = "a-talk-bot-shared-secret-of-forty-characters"


@pytest.fixture
@brings("subprocess")
def talk(tmp_path: Path) -> Iterator[Running]:
    with standing("talk_server", tmp_path, BOT_SECRET, rooms={"abc123": {"messages": [17]}}) as s:
        yield s


async def test_talk_posts_a_signed_message(talk: Running, make: Any) -> None:
    posted = await make("talk", {"url": talk.url}, BOT_SECRET).send({"room": "abc123"}, NOTICE)
    assert posted is None  # Talk answers 201 without the message
    [seen] = talk.seen()
    assert seen["verified"] is True
    assert (seen["room"], seen["message"], seen["replyTo"], seen["silent"]) == ("abc123", NOTICE.text, None, False)
    assert seen["referenceId"] == hashlib.sha256(NOTICE.key.encode()).hexdigest()


async def test_talk_reply_names_the_message(talk: Running, make: Any) -> None:
    await make("talk", {"url": "http://127.0.0.1:9"}, BOT_SECRET).send(
        {"room": "abc123", "reply_to": 17, "backend": talk.url}, NOTICE
    )
    assert talk.seen()[0]["replyTo"] == 17


async def test_talk_wrong_secret_is_not_retried(talk: Running, make: Any) -> None:
    wrong = "not-the-bot-secret-at-all-0000000000000"
    error = await refused(make("talk", {"url": talk.url}, wrong).send, {"room": "abc123"}, NOTICE)
    assert (error.retry, error.status_code) == (False, 401)
    assert "secret" in (error.hint or "") and wrong not in str(error)
    assert talk.seen() == []


async def test_talk_server_error_is_retried(talk: Running, make: Any) -> None:
    talk.set(rooms={"abc123": {}}, faults=[{"match": "/bot/abc123/", "status": 503}])
    error = await refused(make("talk", {"url": talk.url}, BOT_SECRET).send, {"room": "abc123"}, NOTICE)
    assert (error.retry, error.status_code) == (True, 503)


async def test_talk_rate_limit_is_retried_after_what_it_asks(talk: Running, make: Any) -> None:
    talk.set(rooms={"abc123": {}}, faults=[{"match": "/message", "status": 429, "retry_after": 7}])
    error = await refused(make("talk", {"url": talk.url}, BOT_SECRET).send, {"room": "abc123"}, NOTICE)
    assert (error.retry, error.retry_after) == (True, 7)


async def test_talk_missing_conversation_is_gone(talk: Running, make: Any) -> None:
    talk.set(rooms={"abc123": {}}, faults=[{"match": "/bot/abc123/", "status": 404}])
    error = await refused(make("talk", {"url": talk.url}, BOT_SECRET).send, {"room": "abc123"}, NOTICE)
    assert (error.gone, error.retry) == (True, False)


# -- Web Push --------------------------------------------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def p256() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def public_raw(key: ec.EllipticCurvePrivateKey) -> str:
    point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return b64url(point)


def pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@dataclass
class PushSetup:
    stand: Running
    vapid: ec.EllipticCurvePrivateKey  # the server's VAPID key pair
    browser: ec.EllipticCurvePrivateKey  # the subscription's key pair (the browser keeps the private half)
    auth: bytes

    def subscription(self, name: str = "s1") -> dict[str, Any]:
        return {
            "endpoint": f"{self.stand.url}/push/{name}",
            "keys": {"p256dh": public_raw(self.browser), "auth": b64url(self.auth)},
        }

    def state(self, **more: Any) -> dict[str, Any]:
        held = {"private_key": pem(self.browser), "auth": b64url(self.auth)}
        return {"subscriptions": {"s1": held | {"application_server_key": public_raw(self.vapid)}}} | more


PUSH_CONFIG = {"vapid_subject": "mailto:ops@example.com", "allow_http": True, "ttl": 3600, "timeout_s": 5}


@pytest.fixture
@brings("subprocess")
def push(tmp_path: Path) -> Iterator[PushSetup]:
    setup_keys = (p256(), p256(), os.urandom(16))
    with standing("push_server", tmp_path, "unused") as stand:
        setup = PushSetup(stand, *setup_keys)
        stand.set(**setup.state(gone=["s0"]))
        yield setup


async def test_web_push_payload_decrypts_to_the_notice(push: PushSetup, make: Any) -> None:
    location = await make("webpush", PUSH_CONFIG, pem(push.vapid)).send(push.subscription(), NOTICE)
    [seen] = push.stand.seen()
    assert seen["payload"] == {"title": NOTICE.title, "body": NOTICE.text, "links": NOTICE.links, "data": NOTICE.data}
    assert (seen["ttl"], seen["aud"], seen["sub"]) == (3600, push.stand.url, "mailto:ops@example.com")
    assert location == seen["location"]


async def test_web_push_takes_a_raw_base64url_vapid_key(push: PushSetup, make: Any) -> None:
    raw = b64url(push.vapid.private_numbers().private_value.to_bytes(32, "big"))
    await make("webpush", PUSH_CONFIG, raw).send(push.subscription(), NOTICE)
    assert len(push.stand.seen()) == 1


async def test_web_push_long_text_is_cut_to_fit(push: PushSetup, make: Any) -> None:
    long = Notice(NOTICE.key, NOTICE.title, "é" * 5000, NOTICE.links, NOTICE.data)
    assert len(payload(long).encode()) <= MAX_PAYLOAD
    await make("webpush", PUSH_CONFIG, pem(push.vapid)).send(push.subscription(), long)
    body = push.stand.seen()[0]["payload"]["body"]
    assert body.endswith("…") and 1000 < len(body) < 5000


async def test_web_push_with_another_vapid_key_is_not_retried(push: PushSetup, make: Any) -> None:
    error = await refused(make("webpush", PUSH_CONFIG, pem(p256())).send, push.subscription(), NOTICE)
    assert (error.retry, error.status_code) == (False, 403)
    assert "applicationServerKey" in (error.hint or "")


async def test_web_push_server_error_is_retried(push: PushSetup, make: Any) -> None:
    push.stand.set(**push.state(faults=[{"match": "/push/s1", "status": 503}]))
    error = await refused(make("webpush", PUSH_CONFIG, pem(push.vapid)).send, push.subscription(), NOTICE)
    assert (error.retry, error.status_code) == (True, 503)


async def test_web_push_rate_limit_is_retried_after_what_it_asks(push: PushSetup, make: Any) -> None:
    push.stand.set(**push.state(faults=[{"match": "/push/", "status": 429, "retry_after": 7}]))
    error = await refused(make("webpush", PUSH_CONFIG, pem(push.vapid)).send, push.subscription(), NOTICE)
    assert (error.retry, error.retry_after) == (True, 7)


async def test_web_push_expired_subscription_is_gone(push: PushSetup, make: Any) -> None:
    error = await refused(make("webpush", PUSH_CONFIG, pem(push.vapid)).send, push.subscription("s0"), NOTICE)
    assert (error.gone, error.retry, error.status_code) == (True, False, 410)


async def test_web_push_refuses_plain_http_unless_allowed(push: PushSetup, make: Any) -> None:
    strict = PUSH_CONFIG | {"allow_http": False}
    error = await refused(make("webpush", strict, pem(push.vapid)).send, push.subscription(), NOTICE)
    assert error.retry is False and "https" in str(error)
    assert push.stand.seen() == []


def test_web_push_unreadable_vapid_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="VAPID private key could not be read") as caught:
        sender("webpush", PUSH_CONFIG, "not-a-key!")
    assert "not-a-key!" not in str(caught.value)


# -- Webhooks --------------------------------------------------------------------------------------

HOOK_SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


@pytest.fixture
@brings("subprocess")
def hook(tmp_path: Path) -> Iterator[Running]:
    with standing("hook_server", tmp_path, HOOK_SECRET, gone=["/old"]) as s:
        yield s


def test_webhook_signature_matches_the_standard_webhooks_test_vector() -> None:
    headers = sign_webhook(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
    )
    assert headers == {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }


async def test_webhook_delivers_signed_json(hook: Running, make: Any) -> None:
    before = int(datetime.now(UTC).timestamp())
    assert await make("webhook", {}, HOOK_SECRET).send({"url": f"{hook.url}/hook"}, NOTICE) is None
    [seen] = hook.seen()
    assert (seen["verified"], seen["id"], seen["path"]) == (True, NOTICE.key, "/hook")
    assert seen["content_type"] == "application/json" and seen["timestamp"] >= before
    body = seen["body"]
    assert datetime.fromisoformat(body.pop("timestamp")).timestamp() == pytest.approx(seen["timestamp"], abs=1)
    assert body == {
        "type": "memory.updated",
        "data": NOTICE.data,
        "title": NOTICE.title,
        "text": NOTICE.text,
        "links": NOTICE.links,
    }


async def test_webhook_is_stamped_by_the_clock(hook: Running, make: Any) -> None:
    then = (datetime.now(UTC) - timedelta(minutes=2)).replace(microsecond=0)
    await make("webhook", {}, HOOK_SECRET, clock=lambda: then).send({"url": f"{hook.url}/hook"}, NOTICE)
    [seen] = hook.seen()
    assert (seen["timestamp"], seen["body"]["timestamp"]) == (int(then.timestamp()), then.isoformat())
    stale = then - timedelta(minutes=10)  # outside the receiver's tolerance: a replay, as it sees it
    error = await refused(
        make("webhook", {}, HOOK_SECRET, clock=lambda: stale).send, {"url": f"{hook.url}/hook"}, NOTICE
    )
    assert (error.retry, error.status_code) == (False, 401)


@pytest.mark.subprocess
async def test_webhook_with_a_raw_secret(tmp_path: Path, make: Any) -> None:
    with standing("hook_server", tmp_path, "plain-shared-secret") as stand:
        await make("webhook", {}, "plain-shared-secret").send({"url": f"{stand.url}/hook"}, NOTICE)
        assert stand.seen()[0]["verified"] is True


async def test_webhook_wrong_secret_is_not_retried(hook: Running, make: Any) -> None:
    wrong = "whsec_" + base64.b64encode(b"another key entirely, 32 bytes!!").decode()
    error = await refused(make("webhook", {}, wrong).send, {"url": f"{hook.url}/hook"}, NOTICE)
    assert (error.retry, error.status_code) == (False, 401)
    assert wrong not in str(error)


async def test_webhook_server_error_is_retried(hook: Running, make: Any) -> None:
    hook.set(faults=[{"match": "/hook", "status": 503}])
    error = await refused(make("webhook", {}, HOOK_SECRET).send, {"url": f"{hook.url}/hook"}, NOTICE)
    assert (error.retry, error.status_code) == (True, 503)


async def test_webhook_rate_limit_is_retried_after_what_it_asks(hook: Running, make: Any) -> None:
    hook.set(faults=[{"match": "/hook", "status": 429, "retry_after": 7}])
    error = await refused(make("webhook", {}, HOOK_SECRET).send, {"url": f"{hook.url}/hook"}, NOTICE)
    assert (error.retry, error.retry_after) == (True, 7)


async def test_webhook_gone_receiver(hook: Running, make: Any) -> None:
    error = await refused(make("webhook", {}, HOOK_SECRET).send, {"url": f"{hook.url}/old"}, NOTICE)
    assert (error.gone, error.retry) == (True, False)


async def test_webhook_unreachable_is_retried(make: Any) -> None:
    error = await refused(make("webhook", {}, HOOK_SECRET).send, {"url": f"http://127.0.0.1:{free_port()}/"}, NOTICE)
    assert error.retry is True


async def test_webhook_url_with_credentials_is_refused(hook: Running, make: Any) -> None:
    url = hook.url.replace("http://", "http://user:hunter2@") + "/hook"
    error = await refused(make("webhook", {}, HOOK_SECRET).send, {"url": url}, NOTICE)
    assert error.retry is False and "hunter2" not in str(error)
    assert hook.seen() == []
