"""Salience-gated pushes (issue 22): a judgment a write or a sleep cycle makes becomes an event; the
gate decides per subscriber (threshold, rate, quiet hours, the same finding once); the outbox
delivers each event to each subscriber once, retrying a notifier that is down; a push shows only
what its subscriber may read. Real PostgreSQL, real sleep steps, stand-in Slack and webhook
receivers on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cabrain.errors import AccessDenied, ConfirmationRequired, InputError, NotFound
from cabrain.notify.facade import Notify
from cabrain.notify.outbox import Outbox, quiet_until
from cabrain.notify.patterns import find_patterns
from cabrain.sleep.cycle import run_cycle
from cabrain.store import notify as notify_sql
from cabrain.types import MemoryInput, MemoryType, Network, Visibility
from tests.conftest import brings
from tests.standins import Running, standing

HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SLACK_TOKEN = "xoxb-stand-token-0123456789"
ENV = {"HOOK_SECRET": HOOK_SECRET, "SLACK_BOT_TOKEN": SLACK_TOKEN}


@pytest.fixture
@brings("subprocess")
def hook(tmp_path: Path) -> Iterator[Running]:
    with standing("hook_server", tmp_path, HOOK_SECRET) as running:
        yield running


@pytest.fixture
@brings("subprocess")
def slack(tmp_path: Path) -> Iterator[Running]:
    with standing("slack_server", tmp_path, SLACK_TOKEN, channels={"C0NORA": {}}) as running:
        yield running


@pytest.fixture
async def pushes(open_brain, hook: Running) -> Any:
    brain = await open_brain(notify_retry_backoff_s=0.0)
    for agent in ("alice", "bob", "carol"):
        await brain.create_agent(agent)
    await brain.create_agent("root", is_admin=True)
    await brain.create_namespace("alice", "proj")
    hub = Notify(brain.engine)
    await hub.add_notifier("root", "hooks", "webhook", {"url": f"{hook.url}/cabrain"}, "HOOK_SECRET")
    outbox = Outbox(brain.engine, ENV)
    yield brain, hub, outbox
    await outbox.aclose()


async def _contradiction(brain: Any, when: str = "March 14") -> tuple[Any, Any]:
    [offsite] = await brain.retain(
        "alice", MemoryInput(f"The team offsite is on {when}.", "proj", visibility=Visibility.TEAM)
    )
    [gone] = await brain.retain(
        "alice", MemoryInput(f"The team offsite on {when} has been cancelled.", "proj", visibility=Visibility.TEAM)
    )
    assert gone.superseded == (offsite.memory_id,), gone.reason
    return offsite, gone


async def _work(outbox: Outbox) -> None:
    while await outbox.fan_out():
        pass
    while await outbox.deliver():
        pass


async def test_a_contradiction_on_write_is_pushed_once_with_the_memories_behind_it(pushes, hook):
    brain, hub, outbox = pushes
    await hub.subscribe("alice", subscriber="alice", kinds=["contradiction"], namespace="proj", notifier="hooks")
    offsite, _ = await _contradiction(brain)
    await _work(outbox)
    [delivery] = hook.seen()
    body = delivery["body"]
    assert body["type"] == "contradiction" and body["data"]["namespace"] == "proj"
    assert body["data"]["memory_ids"] == [str(offsite.memory_id)]  # the retraction itself is not stored
    # the memory behind it, and (to its writer) the statement that retracted it
    assert "The team offsite is on March 14." in body["text"] and "has been cancelled" in body["text"]
    await _work(outbox)  # nothing new: exactly once
    assert len(hook.seen()) == 1
    [push] = await hub.outbox("alice")
    assert (push["status"], push["attempts"], push["kind"]) == ("delivered", 1, "contradiction")


async def test_a_notifier_that_is_down_gets_the_push_later_once(pushes, hook):
    brain, hub, outbox = pushes
    await hub.subscribe("alice", subscriber="alice", kinds=["contradiction"], namespace="proj", notifier="hooks")
    hook.set(faults=[{"match": "/cabrain", "status": 503, "times": 2}])
    await _contradiction(brain)
    await outbox.fan_out()
    assert await outbox.deliver() == 1  # refused: 503
    [push] = await hub.outbox("alice")
    assert (push["status"], push["attempts"]) == ("pending", 1) and "503" in push["last_error"]
    await outbox.deliver()  # 503 again
    assert hook.seen() == []
    await outbox.deliver()  # up: delivered
    await _work(outbox)
    assert len(hook.seen()) == 1
    [push] = await hub.outbox("alice")
    assert (push["status"], push["attempts"], push["last_error"]) == ("delivered", 3, None)


async def test_quiet_hours_hold_a_push_until_they_end(pushes, hook):
    brain, hub, outbox = pushes
    now = brain.engine.clock()
    start, end = (now - timedelta(hours=1)).time(), (now + timedelta(hours=1)).time()
    await hub.subscribe(
        "alice",
        subscriber="alice",
        kinds=["contradiction"],
        namespace="proj",
        notifier="hooks",
        quiet_start=start.strftime("%H:%M"),
        quiet_end=end.strftime("%H:%M"),
    )
    await _contradiction(brain)
    await _work(outbox)
    assert hook.seen() == []
    [push] = await hub.outbox("alice")
    assert push["status"] == "pending" and push["reason"].startswith("quiet hours until")
    later = now + timedelta(hours=1, minutes=2)
    brain.engine.clock = lambda: later
    hook.set(tolerance_s=3 * 3600)  # the push is signed as of CaBrain's clock, an hour ahead of the receiver's
    await _work(outbox)
    assert len(hook.seen()) == 1


def test_quiet_hours_wrap_past_midnight_in_the_subscribers_time_zone():
    from datetime import time

    night = datetime(2026, 12, 1, 20, 30, tzinfo=UTC)  # 23:30 in Riyadh
    ends = quiet_until(night, time(22), time(7), "Asia/Riyadh")
    assert ends is not None and ends.astimezone(UTC) == datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
    assert quiet_until(datetime(2026, 12, 1, 9, 0, tzinfo=UTC), time(22), time(7), "Asia/Riyadh") is None


async def test_the_gate_suppresses_below_threshold_over_the_rate_and_a_finding_told_before(pushes, hook):
    brain, hub, outbox = pushes
    strict = await hub.subscribe(
        "alice", subscriber="strict", kinds=["contradiction"], namespace="proj", notifier="hooks", min_importance=1.0
    )
    once = await hub.subscribe(
        "alice", subscriber="once", kinds=["contradiction"], namespace="proj", notifier="hooks", max_per_hour=1
    )
    await _contradiction(brain, "March 14")
    await _contradiction(brain, "June 2")
    await _work(outbox)
    rows = await hub.outbox("alice")
    by = {(str(r["subscription_id"]), r["status"], (r["reason"] or "").split(" (")[0]) for r in rows}
    assert (str(strict["id"]), "suppressed", "below threshold") in by
    assert (str(once["id"]), "delivered", "") in by and (str(once["id"]), "suppressed", "rate limit") in by
    assert len(hook.seen()) == 1
    # the same finding again (one more event of it) is not told twice
    async with brain.engine.pool.acquire() as conn:
        event = await conn.fetchrow("SELECT * FROM notify_events ORDER BY seq LIMIT 1")
        await notify_sql.insert_event(
            conn, "contradiction", "proj", event["finding"], now=brain.engine.clock(), memory_ids=event["memory_ids"]
        )
    await _work(outbox)
    latest = next(r for r in await hub.outbox("alice") if r["subscription_id"] == once["id"])
    assert latest["reason"] == "duplicate finding"
    # every suppression can be undone: released, it goes out once
    held = next(r for r in rows if r["reason"] and r["reason"].startswith("below threshold"))
    assert await hub.release("alice", held["id"])
    await _work(outbox)
    assert len(hook.seen()) == 2


async def test_a_push_never_shows_what_its_subscriber_may_not_read(pushes, hook):
    brain, hub, outbox = pushes
    await hub.subscribe("bob", subscriber="bob", kinds=["contradiction"], notifier="hooks")  # all bob reads
    with pytest.raises(NotFound):
        await hub.subscribe("carol", subscriber="carol", kinds=["contradiction"], namespace="proj", notifier="hooks")
    await _contradiction(brain)
    await _work(outbox)
    assert hook.seen() == [] and await hub.outbox("bob") == []
    assert await hub.events("bob") == []
    [event] = await hub.events("alice")
    assert event["kind"] == "contradiction" and [m["current"] for m in event["memories"]] == [False]


async def test_a_push_names_no_memory_its_subscriber_may_not_read(pushes, hook):
    """Finding 19 of issue 31: a webhook push listed, in data.memory_ids, the id of a private memory
    its subscriber may not read (the text was left out)."""
    brain, hub, outbox = pushes
    await brain.share("alice", "proj", "bob")
    await hub.subscribe(
        "bob", subscriber="bob", kinds=["contradiction"], namespace="proj", notifier="hooks", min_importance=0
    )
    [team] = await brain.retain(
        "alice", MemoryInput("The release train leaves on Thursdays.", "proj", visibility=Visibility.TEAM)
    )
    [mine] = await brain.retain(
        "alice", MemoryInput("I think the release train is doomed.", "proj", visibility=Visibility.PRIVATE)
    )
    async with brain.engine.pool.acquire() as conn:  # one finding about both, as a merge across them makes
        await notify_sql.insert_event(
            conn, "contradiction", "proj", "both", now=brain.engine.clock(), memory_ids=[team.memory_id, mine.memory_id]
        )
    await _work(outbox)
    [delivery] = hook.seen()
    assert delivery["body"]["data"]["memory_ids"] == [str(team.memory_id)]
    assert str(mine.memory_id) not in str(delivery["body"]) and "doomed" not in str(delivery["body"])


async def test_a_contradiction_found_in_sleep_reaches_its_subscriber_once(pushes, slack, db_dsn, settings_for):
    brain, hub, outbox = pushes
    await hub.add_notifier("root", "slack", "slack", {"base_url": f"{slack.url}/api/"}, "SLACK_BOT_TOKEN")
    await hub.subscribe(
        "alice",
        subscriber="nora",
        kinds=["contradiction"],
        namespace="proj",
        notifier="slack",
        target={"channel": "C0NORA"},
    )
    start = datetime.now(UTC) - timedelta(days=2)
    facts = [
        "The public API rate limit is 100 requests per minute.",
        "The public API rate limit is 250 requests per minute now.",
    ]
    for n, text in enumerate(facts):
        item = MemoryInput(
            text,
            "proj",
            visibility=Visibility.TEAM,
            network=Network.FACT,
            memory_type=MemoryType.SEMANTIC,
            valid_at=start + timedelta(hours=n),
        )
        await brain.retain("alice", item, decide=False)  # both stored: the write made no judgment
    await _work(outbox)
    assert slack.seen() == []
    report = await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["proj"], steps=["reconsolidate"], use_ray=False)
    assert report.steps["reconsolidate"]["superseded"] == 1
    await _work(outbox)
    await _work(outbox)
    [message] = slack.seen()
    assert message["channel"] == "C0NORA"
    assert "100 requests per minute" in message["text"] and "250 requests per minute" in message["text"]
    assert "Contradiction resolved in proj" in message["text"]


async def test_the_same_problem_in_several_sessions_is_a_pattern(pushes, hook):
    brain, hub, outbox = pushes
    await hub.subscribe("alice", subscriber="alice", kinds=["pattern"], namespace="proj", notifier="hooks")
    reports = [
        "The RTL layout breaks on the feed page again.",
        "RTL layout broke on the feed page for Arabic users.",
        "The feed page RTL layout is broken.",
    ]
    for n, text in enumerate(reports):
        item = MemoryInput(text, "proj", visibility=Visibility.TEAM, importance=0.9, metadata={"thread": f"s{n}"})
        await brain.retain("alice", item, decide=False)
    assert await find_patterns(brain.engine) >= 1
    assert await find_patterns(brain.engine) == 0  # looked at already
    await _work(outbox)
    [delivery] = hook.seen()
    assert delivery["body"]["type"] == "pattern" and "Seen in 3 sessions" in delivery["body"]["text"]


async def test_a_held_action_is_pushed_to_who_decides_it(pushes, hook):
    brain, hub, outbox = pushes
    await brain.create_agent("scout")
    await brain.set_role("scout", "live")
    await brain.share("alice", "proj", "scout")
    [kept] = await brain.retain("alice", MemoryInput("The feed page is RTL-aware.", "proj", visibility=Visibility.TEAM))
    await hub.subscribe("alice", subscriber="alice", kinds=["action_pending"], namespace="proj", notifier="hooks")
    with pytest.raises(ConfirmationRequired) as held:
        await brain.forget("scout", kept.memory_id)
    await _work(outbox)
    [delivery] = hook.seen()
    body = delivery["body"]
    assert body["type"] == "action_pending" and held.value.fix.params["action"] in body["text"]
    assert "The feed page is RTL-aware." in body["text"]


async def test_an_event_that_cannot_be_fanned_out_holds_up_no_other(pushes, hook):
    brain, hub, outbox = pushes
    await hub.subscribe("alice", subscriber="alice", kinds=["contradiction"], namespace="proj", notifier="hooks")
    async with brain.engine.pool.acquire() as conn:  # a thread reply that names no thread: it cannot be routed
        await notify_sql.insert_event(conn, "reply", "proj", "reply:broken", now=brain.engine.clock(), data={})
    await _contradiction(brain)
    await _work(outbox)
    assert [d["body"]["type"] for d in hook.seen()] == ["contradiction"]
    async with brain.engine.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM notify_events WHERE fanned_at IS NULL") == 0


async def test_bad_subscriptions_and_notifiers_are_refused_with_what_to_fix(pushes):
    _brain, hub, _outbox = pushes
    ask = {"subscriber": "alice", "namespace": "proj", "notifier": "hooks"}
    with pytest.raises(InputError, match="kinds must be some of"):
        await hub.subscribe("alice", kinds=["gossip"], **ask)
    with pytest.raises(InputError, match="unknown time zone 'Mars/Olympus'"):
        await hub.subscribe("alice", kinds=["stale"], timezone="Mars/Olympus", **ask)
    with pytest.raises(InputError, match="both quiet_start and quiet_end"):
        await hub.subscribe("alice", kinds=["stale"], quiet_start="22:00", **ask)
    with pytest.raises(InputError, match="a time of day"):
        await hub.subscribe("alice", kinds=["stale"], quiet_start="late", quiet_end="07:00", **ask)
    with pytest.raises(NotFound, match="notifier 'nope'"):
        await hub.subscribe("alice", kinds=["stale"], subscriber="alice", namespace="proj", notifier="nope")
    with pytest.raises(AccessDenied, match="its notifier's url only"):
        await hub.subscribe("alice", kinds=["stale"], target={"url": "http://10.0.0.1/steal"}, **ask)
    with pytest.raises(InputError, match="holds no credential"):
        await hub.add_notifier("root", "leaky", "slack", {"token": "xoxb-1"}, "SLACK_BOT_TOKEN")
    with pytest.raises(InputError, match="CaBrain setting"):
        await hub.add_notifier("root", "leaky", "slack", {}, "CABRAIN_DATABASE_URL")
    with pytest.raises(AccessDenied):
        await hub.add_notifier("alice", "mine", "slack", {}, "SLACK_BOT_TOKEN")
    assert await hub.subscriptions("alice") == []  # nothing half-made
