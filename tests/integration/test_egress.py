"""The egress policy where requests are made (cabrain/egress.py; issue 31, findings 5 and 9): a name
that resolves to loopback is refused after resolution, a redirect to a refused address is not
followed, and a workflow model's key comes only from a variable the operator lists: any other
variable's value never reaches the model's server. Real PostgreSQL, real outbox, real connector
sync, real model calls, against loopback servers that record every request they get."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cabrain.connectors.facade import Connectors
from cabrain.connectors.retry import Retry
from cabrain.egress import EgressDenied
from cabrain.errors import AccessDenied, ConfigError, InputError, SourceAuthError
from cabrain.notify.facade import Notify
from cabrain.notify.outbox import Outbox
from cabrain.types import MemoryInput, Visibility
from cabrain.workflows.dispatch import TaskRequest
from cabrain.workflows.facade import Workflows
from tests.recorder import recording

HOOK_SECRET = "whsec-egress-test-0001"


async def _agents(brain: Any) -> None:
    for agent in ("alice", "bob"):
        await brain.create_agent(agent)
    await brain.create_agent("root", is_admin=True)
    await brain.create_namespace("alice", "proj")


async def _contradiction(brain: Any) -> None:
    await brain.retain("alice", MemoryInput("The team offsite is on March 14.", "proj", visibility=Visibility.TEAM))
    [gone] = await brain.retain(
        "alice", MemoryInput("The team offsite on March 14 has been cancelled.", "proj", visibility=Visibility.TEAM)
    )
    assert gone.superseded, gone.reason


async def _work(outbox: Outbox) -> None:
    while await outbox.fan_out():
        pass
    while await outbox.deliver():
        pass


async def test_a_name_that_resolves_to_loopback_is_refused_when_the_push_is_sent(open_brain) -> None:
    brain = await open_brain(egress_allow=[], notify_retry_backoff_s=0.0)
    await _agents(brain)
    hub = Notify(brain.engine)
    with recording("127.0.0.1") as hook:
        # a host name passes when it is set (what it resolves to may change); its addresses are checked when used
        url = f"http://localhost:{hook.port}/cabrain"
        await hub.add_notifier("root", "hooks", "webhook", {"url": url}, "HOOK_SECRET")
        await hub.subscribe("alice", subscriber="alice", kinds=["contradiction"], namespace="proj", notifier="hooks")
        outbox = Outbox(brain.engine, {"HOOK_SECRET": HOOK_SECRET})
        try:
            await _contradiction(brain)
            await _work(outbox)
        finally:
            await outbox.aclose()
        [push] = await hub.outbox("root")
        assert push["status"] == "failed" and push["attempts"] == 1  # refused for good, never retried
        assert "egress policy refuses requests to localhost (127.0.0.1)" in push["last_error"]
        assert hook.seen == []

        # the operator lists the host: the same push goes out once released
        brain.engine.settings = brain.settings.model_copy(update={"egress_allow": ["localhost"]})
        assert await hub.release("root", push["id"])
        outbox = Outbox(brain.engine, {"HOOK_SECRET": HOOK_SECRET})
        try:
            await _work(outbox)
        finally:
            await outbox.aclose()
        [delivered] = await hub.outbox("root")
        assert delivered["status"] == "delivered", delivered["last_error"]
        assert [r["path"] for r in hook.seen] == ["/cabrain"]


async def test_a_redirect_to_a_refused_address_is_not_followed(open_brain) -> None:
    brain = await open_brain(egress_allow=["127.0.0.1"])
    await _agents(brain)
    hub = Connectors(brain.engine, environ={"GITLAB_TOKEN": "glpat-egress-0001"}, retry=Retry(sleep=lambda s: None))
    with recording("127.0.0.2") as inside, recording("127.0.0.1", redirect_to=inside.url) as allowed:
        config = {"url": allowed.url, "project": "team/app", "token_env": "GITLAB_TOKEN"}
        await hub.add("root", "app", "gitlab", "proj", config, check=False)  # the sync's requests, below
        with pytest.raises(EgressDenied, match=r"refuses requests to 127\.0\.0\.2"):
            await hub.sync("root", "app")
        assert allowed.seen and allowed.seen[0]["path"].startswith("/api/v4/projects/team%2Fapp")
        assert inside.seen == []  # the hop outside the policy never connected
        [run] = await hub.runs("root", "app")
        assert run["status"] == "failed" and "egress policy" in run["error"]


async def test_urls_to_refused_addresses_are_refused_when_set(open_brain) -> None:
    brain = await open_brain(egress_allow=["127.0.0.1"])
    await _agents(brain)
    notify, hub = Notify(brain.engine), Connectors(brain.engine, environ={})
    for url in ("http://127.0.0.2:8080/hook", "http://[::1]/hook", "http://169.254.169.254/latest/meta-data/"):
        with pytest.raises(AccessDenied, match="CABRAIN_EGRESS_ALLOW") as refused:
            await notify.add_notifier("root", "hooks", "webhook", {"url": url}, "HOOK_SECRET")
        assert isinstance(refused.value, EgressDenied)
    for url in ("http://2130706434/", "http://0x7f000002/", "http://[::ffff:10.0.0.1]/", "http://100.64.0.1/"):
        with pytest.raises(EgressDenied):
            await hub.add("root", "app", "gitlab", "proj", {"url": url, "project": "a/b", "token_env": "GITLAB_TOKEN"})
    assert await notify.notifiers("root") == [] and await hub.listing("root") == []


async def test_a_model_key_comes_only_from_a_variable_the_operator_lists(open_brain, monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-never-sent-0001")
    monkeypatch.setenv("MODEL_KEY", "model-key-sent-0001")
    brain = await open_brain(egress_allow=["127.0.0.1"], secret_env_allow=["MODEL_KEY"])
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "ops")
    flows = Workflows(brain.engine)
    with recording("127.0.0.1") as model:
        entry = {"name": "big", "layer": "frontier", "provider": "openai", "model": "m", "endpoint": f"{model.url}/v1"}
        with pytest.raises(AccessDenied, match="CABRAIN_SECRET_ENV_ALLOW"):
            await flows.add_model({**entry, "api_key_env": "AWS_SECRET_ACCESS_KEY"})
        with pytest.raises(InputError, match="may not name a CaBrain setting"):
            await flows.add_model({**entry, "api_key_env": "CABRAIN_DATABASE_URL"})
        await flows.add_model({**entry, "api_key_env": "MODEL_KEY"})
        with pytest.raises(AccessDenied, match="CABRAIN_SECRET_ENV_ALLOW"):
            await flows.update_model("big", {"api_key_env": "AWS_SECRET_ACCESS_KEY"})

        task = TaskRequest("ops", "Say done.", task_type="text")
        done = await flows.dispatch("alice", task)
        assert done.output == "Done." and model.seen[-1]["headers"]["authorization"] == "Bearer model-key-sent-0001"

        # a row that names another variable (written before the policy, or by hand) is refused when used
        secrets = ("aws-secret-never-sent-0001", brain.settings.database_url.get_secret_value())
        for variable in ("AWS_SECRET_ACCESS_KEY", "CABRAIN_DATABASE_URL"):
            async with brain.engine.pool.acquire() as conn:
                await conn.execute("UPDATE llm_agents SET api_key_env = $1 WHERE name = 'big'", variable)
            before = len(model.seen)
            with pytest.raises(ConfigError, match=variable):
                await flows.dispatch("alice", task)
            assert len(model.seen) == before  # no request at all
        assert not any(secret in json.dumps(request) for request in model.seen for secret in secrets)


async def test_a_stored_credential_name_outside_the_policy_is_refused_when_used(open_brain, monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-never-sent-0002")
    environ = {"GITLAB_TOKEN": "glpat-egress-0002", "AWS_SECRET_ACCESS_KEY": "aws-secret-never-sent-0002"}
    brain = await open_brain(egress_allow=["127.0.0.1"], notify_retry_backoff_s=0.0)
    await _agents(brain)
    notify, hub = Notify(brain.engine), Connectors(brain.engine, environ=environ, retry=Retry(sleep=lambda s: None))
    with recording("127.0.0.1") as server:
        with pytest.raises(AccessDenied, match="CABRAIN_SECRET_ENV_ALLOW"):
            await hub.add(
                "root",
                "app",
                "gitlab",
                "proj",
                {"url": server.url, "project": "a/b", "token_env": "AWS_SECRET_ACCESS_KEY"},
            )
        await hub.add(
            "root",
            "app",
            "gitlab",
            "proj",
            {"url": server.url, "project": "a/b", "token_env": "GITLAB_TOKEN"},
            check=False,  # a recording server, not GitLab
        )
        await notify.add_notifier("root", "hooks", "webhook", {"url": f"{server.url}/hook"}, "HOOK_SECRET")
        await notify.subscribe("alice", subscriber="alice", kinds=["contradiction"], namespace="proj", notifier="hooks")
        async with brain.engine.pool.acquire() as conn:  # rows from before the policy, or written by hand
            await conn.execute(
                "UPDATE connectors SET config = jsonb_set(config, '{token_env}', '\"AWS_SECRET_ACCESS_KEY\"')"
            )
            await conn.execute("UPDATE notifiers SET secret_env = 'AWS_SECRET_ACCESS_KEY'")
        with pytest.raises(SourceAuthError, match="AWS_SECRET_ACCESS_KEY"):
            await hub.sync("root", "app")
        outbox = Outbox(brain.engine, environ)
        try:
            await _contradiction(brain)
            await _work(outbox)
        finally:
            await outbox.aclose()
        [push] = await notify.outbox("root")
        assert push["status"] == "failed" and "AWS_SECRET_ACCESS_KEY" in push["last_error"]
        assert server.seen == []  # neither the sync nor the push sent anything
