"""Correct, restore and the audit of judgments through the running service (issue 36): over HTTP
(answers checked against OpenAPI), the typed client, MCP (memory_correct, memory_restore, and
memory_revert of a forget) and the command line (correct, unforget, audit, revert of a forget)."""

from __future__ import annotations

import pytest

from cabrain.errors import AccessDenied, InputError, NotFound
from tests.conftest import cli_env, run_cli
from tests.mcp_helpers import call, call_error, http_session
from tests.service.conftest import Service

NS = "corrections/api"


@pytest.fixture(scope="module")
def namespace(service: Service) -> str:
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": "bob"}).status_code in (200, 201)  # read
    return NS


def _retain(service: Service, content: str, visibility: str = "team") -> str:
    with service.client("alice") as alice:
        answer = alice.post("/v1/memories", json={"content": content, "namespace": NS, "visibility": visibility})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["memory_id"])


def test_correct_restore_and_the_audit_over_http(service: Service, namespace: str) -> None:
    old = _retain(service, "The quarterly review is on March 3.")
    with service.client("alice") as alice:
        answer = alice.post(
            f"/v1/memories/{old}/correct", json={"content": "The quarterly review is on March 5.", "reason": "moved"}
        )
        assert answer.status_code == 200, answer.text
        new = answer.json()["memory_id"]
        assert answer.json()["superseded"] == [old]
        gone = _retain(service, "The shared drive is mounted at /mnt/old-share.")
        assert alice.post(f"/v1/memories/{gone}/forget", json={"reason": "unmounted"}).status_code == 200
        page = alice.get(f"/v1/namespaces/{NS}/judgments", params={"origin": "person"})
        assert page.status_code == 200, page.text
        kinds = [j["kind"] for j in page.json()["judgments"]]
        assert kinds[:2] == ["forget", "correction"]
        correction = page.json()["judgments"][1]
        assert correction["before"][0]["content"] == "The quarterly review is on March 3."
        assert correction["after"][0] == {"memory_id": new, "content": "The quarterly review is on March 5."}
        restored = alice.post(f"/v1/memories/{gone}/restore", json={"reason": "mounted again"})
        assert restored.status_code == 200, restored.text
        assert alice.get(f"/v1/memories/{gone}").json()["memory"]["invalid_at"] is None
        again = alice.post(f"/v1/memories/{gone}/restore")
        assert again.status_code == 400 and "not forgotten" in again.text
        bulk = alice.post("/v1/judgments/revert", json={"ids": [correction["id"], correction["id"]], "reason": "no"})
        assert bulk.status_code == 200, bulk.text
        assert [r["ok"] for r in bulk.json()["results"]] == [True]
        assert alice.get(f"/v1/memories/{old}").json()["memory"]["invalid_at"] is None
        twice = alice.post("/v1/judgments/revert", json={"ids": [correction["id"]]}).json()["results"]
        assert twice[0]["ok"] is False and twice[0]["status"] == 409
        for params in ({"kind": "nope"}, {"origin": "robot"}, {"from": "yesterday"}, {"cursor": "***"}, {"limit": 0}):
            bad = alice.get(f"/v1/namespaces/{NS}/judgments", params=params)
            assert 400 <= bad.status_code < 500, (params, bad.text)
        for body in ({"content": "a\u0000b"}, {"content": ""}, {"content": "x" * 200_000}, {}):
            bad = alice.post(f"/v1/memories/{new}/correct", json=body)
            assert 400 <= bad.status_code < 500, (body, bad.status_code)
    with service.client("bob") as bob:  # may read, may not write
        assert bob.post(f"/v1/memories/{new}/correct", json={"content": "No."}).status_code == 403
        assert bob.get(f"/v1/namespaces/{NS}/judgments").status_code == 200
    with service.client("carol") as carol:  # nothing here for her
        assert carol.post(f"/v1/memories/{new}/correct", json={"content": "No."}).status_code == 404
        assert carol.get(f"/v1/namespaces/{NS}/judgments").status_code == 404


def test_the_audit_hides_another_agents_private_memory_over_the_client(service: Service, namespace: str) -> None:
    private = _retain(service, "Alice's private reminder: renew the passport in May.", visibility="private")
    team = _retain(service, "The canteen opens at 8.")
    with service.api("alice") as alice:
        alice.correct(private, "Alice's private reminder: renew the passport in June.")
        mine = alice.audit(NS, kind="correction")
        assert any("passport" in (s["content"] or "") for j in mine["judgments"] for s in j["before"])
    with service.api("bob") as bob:
        seen = bob.audit(NS)
        assert "passport" not in str(seen) and private not in str(seen)
        with pytest.raises(NotFound):
            bob.restore(private)  # not his to read: not even there
        with pytest.raises(AccessDenied):
            bob.correct(team, "The canteen opens at 9.")  # his to read, not to write
    with service.api("carol") as carol, pytest.raises(NotFound):
        carol.audit(NS)
    with service.api("alice") as alice, pytest.raises(InputError):
        alice.audit(NS, kind="nonsense")


async def test_mcp_correct_restore_and_revert_a_forget(service: Service, namespace: str) -> None:
    memory = _retain(service, "The VPN profile is called corp-east.")
    async with http_session(service.url, service.keys["alice"]) as alice:
        done = await call(alice, "memory_correct", memory_id=memory, content="The VPN profile is called corp-west.")
        assert done["superseded"] == [memory]
        await call(alice, "memory_forget", memory_id=done["memory_id"], reason="wrong")
        back = await call(alice, "memory_revert", memory_id=done["memory_id"])  # a forget is revertible
        assert back["kind"] == "revert"
        await call(alice, "memory_forget", memory_id=done["memory_id"])
        restored = await call(alice, "memory_restore", memory_id=done["memory_id"], reason="needed")
        assert restored["decided_by"] == "person"
        assert "not forgotten" in await call_error(alice, "memory_restore", memory_id=done["memory_id"])
    async with http_session(service.url, service.keys["bob"]) as bob:
        assert await call_error(bob, "memory_correct", memory_id=done["memory_id"], content="No.")


def test_cli_correct_unforget_audit_and_revert_of_a_forget(service: Service, namespace: str) -> None:
    env = cli_env(api_url=service.url, api_key=service.keys["alice"])
    memory = _retain(service, "The build server is build-7.")
    corrected = run_cli("correct", memory, "The build server is build-9.", "--reason", "replaced", env=env)
    assert corrected.returncode == 0, corrected.stderr
    assert "its new version is" in corrected.stdout
    new = corrected.stdout.split("its new version is ")[1].split(" ")[0]
    assert run_cli("forget", new, env=env).returncode == 0
    reverted = run_cli("revert", new, env=env)  # the issue: "no judgment to revert" before
    assert reverted.returncode == 0, reverted.stderr
    assert run_cli("forget", new, env=env).returncode == 0
    back = run_cli("unforget", new, "--reason", "still used", env=env)
    assert back.returncode == 0 and "back in recall" in back.stdout, back.stderr
    listed = run_cli("audit", "-n", NS, "--origin", "person", "--kind", "correction", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "The build server is build-7." in listed.stdout and "The build server is build-9." in listed.stdout
    assert "why: " in listed.stdout and "replaced" in listed.stdout
    bad = run_cli("audit", "-n", NS, "--origin", "robot", env=env)
    assert bad.returncode == 2
    none = run_cli("audit", "--revert", "00000000-0000-0000-0000-000000000001", env=env)
    assert none.returncode == 1 and "NOT reverted" in none.stdout
    bob = run_cli("correct", new, "x", env=cli_env(api_url=service.url, api_key=service.keys["bob"]))
    assert bob.returncode == 1 and "may not write" in bob.stderr
