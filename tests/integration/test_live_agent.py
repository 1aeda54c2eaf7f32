"""The live agent in process (issue 22): which messages it files (a prefix, or the chat model's
triage), what the issue carries, how it tells the thread (through the outbox), approvals from the
channel's approvers, a tracker that is down, and the merge request told once. GitLab, the chat
model and the webhook receiver are stand-ins on loopback; PostgreSQL is real."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cabrain.channels.facade import Channels
from cabrain.channels.live import LiveAgent
from cabrain.connectors.facade import Connectors
from cabrain.errors import AccessDenied, ConfirmationRequired, InputError
from cabrain.notify.facade import Notify
from cabrain.notify.outbox import Outbox
from cabrain.types import MemoryInput, RecallQuery, Visibility
from tests.conftest import REPO, brings, free_port, wait_for_port
from tests.integration.test_channels import HOOK_SECRET, TALK_SECRET, hook_request, talk_request
from tests.standins import Running, standing
from tests.unit.test_gitlab_source import TOKEN, issue, project

ENV = {"HOOK_SECRET": HOOK_SECRET, "TALK_SECRET": TALK_SECRET, "GITLAB_TOKEN": TOKEN}


@pytest.fixture(scope="module")
@brings("subprocess")
def chat_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.chat_server", "--port", str(port)], cwd=REPO)
    assert wait_for_port(port), "the chat server did not start"
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(10)


@pytest.fixture
@brings("subprocess")
def stands(tmp_path: Path) -> Iterator[tuple[Running, Running]]:
    with (
        standing("gitlab_server", tmp_path, TOKEN, projects=[project(0)]) as gitlab,
        standing("hook_server", tmp_path, HOOK_SECRET) as hook,
    ):
        yield gitlab, hook


@pytest.fixture
async def live(open_brain, chat_url: str, stands: tuple[Running, Running]) -> Any:
    gitlab, hook = stands
    brain = await open_brain(
        llm_url=chat_url, llm_model="scripted", connector_retries=1, notify_retry_backoff_s=0.0, live_watch_s=0.01
    )
    for agent in ("alice", "scout"):
        await brain.create_agent(agent)
    await brain.create_agent("root", is_admin=True)
    await brain.create_namespace("alice", "proj")
    await brain.set_role("scout", "live")
    await brain.share("alice", "proj", "scout", can_write=True)
    await brain.retain(
        "alice",
        MemoryInput("Safari users sign in through the SSO redirect since May.", "proj", visibility=Visibility.TEAM),
    )
    config = {"url": gitlab.url, "project": "team/app", "token_env": "GITLAB_TOKEN"}
    await Connectors(brain.engine, environ=ENV).add("root", "app-issues", "gitlab", "proj", config)
    await Notify(brain.engine).add_notifier("root", "hooks", "webhook", {"url": f"{hook.url}/replies"}, "HOOK_SECRET")
    hub = Channels(brain.engine, ENV)
    base = {"kind": "webhook", "namespace": "proj", "agent": "alice", "secret_env": "HOOK_SECRET", "notifier": "hooks",
            "live_agent": "scout", "tracker": "app-issues"}  # fmt: skip
    await hub.add("root", {**base, "name": "room"})
    await hub.add("root", {**base, "name": "triage", "options": {"file_issues": "model"}})
    # approvals come from a platform that vouches for who wrote (Talk signs the sender's id)
    talk = {**base, "kind": "talk", "secret_env": "TALK_SECRET", "options": {"approvers": ["users/huda"]}}
    await hub.add("root", {**talk, "name": "desk"})
    outbox = Outbox(brain.engine, ENV)
    yield brain, hub, LiveAgent(hub), outbox
    await outbox.aclose()


async def say(hub: Channels, agent: LiveAgent, channel: str, text: str, n: int, speaker: str = "huda") -> None:
    """A person writes ``text`` in ``channel``; the live agent answers it (as the replica does)."""
    message = {"id": f"{channel}-{n}", "speaker": speaker.title(), "speaker_id": speaker, "text": text, "thread": "t1"}
    delivery = await hub.receive(channel, hook_request([message], f"msg_{channel}_{n}"))
    found = await hub.get(channel)
    for stored, ids in delivery.stored:
        await agent.handle(found, stored, ids)


async def say_on_talk(hub: Channels, agent: LiveAgent, text: str, n: int, speaker: str = "huda") -> None:
    """A person writes ``text`` in the Talk room of channel ``desk``; the live agent answers it."""
    delivery = await hub.receive("desk", talk_request(text, n, actor=speaker))
    found = await hub.get("desk")
    for stored, ids in delivery.stored:
        await agent.handle(found, stored, ids)


async def replies(outbox: Outbox, hook: Running) -> list[str]:
    while await outbox.fan_out():
        pass
    while await outbox.deliver():
        pass
    return [d["body"]["text"] for d in hook.seen()]


def issues(gitlab: Running) -> list[dict[str, Any]]:
    return gitlab.read()["projects"][0]["issues"]


async def test_a_prefixed_report_is_filed_with_what_the_brain_knows_and_the_thread_hears_of_it(live, stands):
    _brain, hub, agent, outbox = live
    gitlab, hook = stands
    await say(hub, agent, "room", "good morning team", 1)
    assert issues(gitlab) == []
    await say(hub, agent, "room", "/issue Login loops on Safari\nIt started after the release.", 2)
    [filed] = issues(gitlab)
    assert filed["title"] == "Login loops on Safari" and filed["labels"] == ["from-chat"]
    assert "SSO redirect since May" in filed["description"]  # recalled context
    assert "Huda" in filed["description"] and "cabrain:room:room-2" in filed["description"]  # the key marker
    [told] = await replies(outbox, hook)
    assert told.startswith(f"Filed {gitlab.url}/team/app/-/issues/{filed['iid']}")

    assert await agent.watch() == 1  # no merge request yet

    def opened(data: dict[str, Any]) -> None:
        data["projects"][0]["merge_requests"].append(issue(5, title="Fix the Safari loop", description="Closes #1"))

    gitlab.edit(opened)
    # an issue is checked again once live_watch_s (10 ms here) has passed since its last check: on a
    # fast machine the first check and the edit take less than that
    await asyncio.sleep(0.05)
    assert await agent.watch() == 1
    assert await agent.watch() == 0  # told once: nothing more to watch
    texts = await replies(outbox, hook)
    assert len(texts) == 2 and "Fix the Safari loop" in texts[1] and "merge_requests/5" in texts[1]


async def test_the_chat_models_triage_decides_in_a_model_channel(live, stands):
    _brain, hub, agent, _outbox = live
    gitlab, _ = stands
    await say(hub, agent, "triage", "thanks, all good now", 1)
    await say(hub, agent, "triage", "The export button is broken on Safari", 2)
    assert [i["title"] for i in issues(gitlab)] == ["The export button is broken on Safari"]


async def test_an_approver_decides_a_held_action_from_the_chat(live, stands):
    brain, hub, agent, outbox = live
    _, hook = stands
    with pytest.raises(ConfirmationRequired) as accepting:
        await brain.accept_grant("scout", "proj")
    [memory] = (await brain.recall("alice", RecallQuery("SSO redirect", "proj"))).hits
    action = accepting.value.fix.params["action"]
    await say_on_talk(hub, agent, f"approve {action[:8]}", 1, speaker="mallory")  # not an approver: just a message
    assert [a["id"] for a in await brain.pending_actions("alice")] == [uuid.UUID(action)]
    await say_on_talk(hub, agent, f"approve {action[:8]}", 2)
    with pytest.raises(ConfirmationRequired) as forgetting:
        await brain.forget("scout", memory.memory.id)
    await say_on_talk(hub, agent, f"deny {forgetting.value.fix.params['action']}", 3)
    decided = {str(a["id"]): a for a in await brain.pending_actions("alice", status=None)}
    assert decided[action]["status"] == "done" and decided[action]["decided_by"] == "channel:desk:users/huda"
    assert decided[forgetting.value.fix.params["action"]]["status"] == "denied"
    texts = await replies(outbox, hook)
    assert any(t.endswith("done.") for t in texts) and any(t.endswith("denied.") for t in texts)


async def test_a_chat_approver_decides_nothing_outside_the_namespace_its_channel_serves(live, stands):
    """Finding 1 of issue 31: an approver of a channel serving proj approved a live agent's forget in
    a namespace the channel has nothing to do with; a webhook channel's sender named itself."""
    brain, hub, agent, _outbox = live
    await brain.create_namespace("alice", "payroll")
    [salary] = await brain.retain(
        "alice", MemoryInput("Payroll runs on the 25th.", "payroll", visibility=Visibility.TEAM)
    )
    await brain.share("alice", "payroll", "scout")
    with pytest.raises(ConfirmationRequired) as held:
        await brain.forget("scout", salary.memory_id)
    action = held.value.fix.params["action"]
    await say_on_talk(hub, agent, f"approve {action}", 7)  # huda approves proj's actions, not payroll's
    [pending] = await brain.pending_actions("alice")
    assert (str(pending["id"]), pending["status"], pending["namespace"]) == (action, "pending", "payroll")
    assert (await brain.get("alice", salary.memory_id)).memory.invalid_at is None
    with pytest.raises(AccessDenied, match="serves namespace 'proj'"):
        await hub.decide_from_chat("desk", "users/huda", uuid.UUID(action), approve=True)
    # a webhook's sender names itself: its channel has no approvers, and cannot decide anything
    with pytest.raises(InputError, match="cannot have approvers"):
        await hub.add("root", {"name": "forged", "kind": "webhook", "namespace": "payroll", "agent": "alice",
                               "secret_env": "HOOK_SECRET", "options": {"approvers": ["huda"]}})  # fmt: skip
    with pytest.raises(AccessDenied, match="name their own sender"):
        await hub.decide_from_chat("room", "huda", uuid.UUID(action), approve=True)
    assert (await brain.get("alice", salary.memory_id)).memory.invalid_at is None


async def test_a_tracker_that_is_down_is_said_in_the_thread(live, stands):
    _brain, hub, agent, outbox = live
    gitlab, hook = stands
    gitlab.edit(lambda d: d.update(faults=[{"match": "POST", "status": 503, "times": 10}]))
    await say(hub, agent, "room", "/issue Search returns nothing", 1)
    assert issues(gitlab) == []
    [told] = await replies(outbox, hook)
    assert told.startswith("I could not file an issue") and "503" in told
