"""An agent's page as an admin uses it (issue 36, item 12): the agent's real role (a live agent is
shown as live, not as "agent"), its role changed behind a confirmation, its daily caps set and
removed, its usage of the week drawn; other agents get no such page and make no such change."""

from __future__ import annotations

import re

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from playwright.async_api import Browser, expect

from tests.service.conftest import Service, sign_in
from tests.service.test_console import _signed_in_client, shot

AGENT = "agt-subject"
NS = "agents/usage"


def _csrf(client: httpx.Client, path: str) -> str:
    return client.get(path).text.split('name="csrf" value="')[1].split('"')[0]


def _make_live_agent(service: Service) -> None:
    with service.client("admin") as admin:
        made = admin.post("/v1/agents", json={"id": AGENT})
        if made.status_code == 201:
            service.keys[AGENT] = made.json()["key"]
        assert AGENT in service.keys, made.text
        assert admin.put(f"/v1/agents/{AGENT}/role", json={"role": "live"}).status_code == 200
    with service.client("alice") as alice:  # something it reads, so its recalls count
        if alice.post("/v1/namespaces", json={"name": NS}).status_code == 201:
            assert alice.post("/v1/grants", json={"namespace": NS, "agent": AGENT}).status_code in (200, 201)
            body = {
                "content": "The usage report is mailed on the first of the month.",
                "namespace": NS,
                "visibility": "team",
            }
            assert alice.post("/v1/memories", json=body).status_code == 200
    with service.client(AGENT) as agent:
        for query in ("usage report", "first of the month", "mail"):
            assert agent.post("/v1/recall", json={"query": query, "namespace": NS}).status_code == 200


async def test_an_admin_sees_the_real_role_changes_it_and_the_caps_and_sees_usage(
    browser: Browser, service: Service
) -> None:
    _make_live_agent(service)
    page = await sign_in(browser, service, "admin", "/console/agents")
    row = page.locator("#agents tr", has=page.get_by_role("link", name=AGENT, exact=True))
    await expect(row).to_contain_text("live")
    await row.get_by_role("link", name=AGENT, exact=True).click()
    await expect(page.locator("#agent-role")).to_have_text("live")
    await expect(page.locator("#agent-admin")).to_have_text("no")

    # its usage of the week: the recalls it made, drawn as a line per day and bars per kind
    await expect(page.locator("#usage svg polyline")).to_have_count(1)
    await expect(page.locator("#usage-kinds")).to_contain_text("recall")
    await shot(page, "agent")

    # the role, behind its confirmation
    form = page.locator("#role-form")
    await form.get_by_label("Role").select_option("reader")
    await form.get_by_label(re.compile("Change what")).check()
    await form.get_by_role("button", name="Set the role").click()
    await expect(page.locator("#done")).to_contain_text("role reader")
    await expect(page.locator("#agent-role")).to_have_text("reader")
    refused = service.client(AGENT).post("/v1/grants/accept", json={"namespace": NS})
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "policy_denied"  # a reader's, at once

    # a cap, then its removal; the API answers by it at once
    caps = page.locator("#cap-form")
    await caps.get_by_label("Kind").select_option("recall")
    await caps.get_by_label("Calls per day").fill("0")
    await caps.get_by_role("button", name="Set the cap").click()
    await expect(page.locator("#done")).to_contain_text("cap on recall set")
    await expect(page.locator('#caps li[data-cap="recall"]')).to_contain_text("recall 0 a day")
    capped = service.client(AGENT).post("/v1/recall", json={"query": "usage", "namespace": NS})
    assert capped.status_code == 429
    await page.get_by_role("button", name="Remove the cap on recall").click()
    await expect(page.locator("#done")).to_contain_text("cap on recall removed")
    await expect(page.locator('#caps li[data-cap="recall"]')).to_have_count(0)
    assert service.client(AGENT).post("/v1/recall", json={"query": "usage", "namespace": NS}).status_code == 200

    # at a phone's width, nothing scrolls sideways
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.reload()
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await shot(page, "agent-phone")
    await page.goto(f"{service.url}/console/agents")
    await expect(page.locator("#agents")).to_contain_text(AGENT)
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await page.context.close()
    with service.client("admin") as admin:
        assert admin.put(f"/v1/agents/{AGENT}/role", json={"role": "live"}).status_code == 200


def test_a_role_change_needs_its_confirmation_and_an_admin(service: Service) -> None:
    _make_live_agent(service)
    with _signed_in_client(service, "admin") as client:
        token = _csrf(client, f"/console/agents/{AGENT}")
        unconfirmed = client.post(f"/console/agents/{AGENT}/role", data={"csrf": token, "role": "member"})
        assert unconfirmed.status_code == 400 and "confirmation" in unconfirmed.text
        unknown = client.post(f"/console/agents/{AGENT}/role", data={"csrf": token, "role": "boss", "confirm": "yes"})
        assert unknown.status_code == 400 and "unknown role" in unknown.text
        assert (
            client.post(f"/console/agents/{AGENT}/role", data={"role": "member", "confirm": "yes"}).status_code == 403
        )
    with _signed_in_client(service, "alice") as client:
        assert client.get(f"/console/agents/{AGENT}").status_code == 403
        token = _csrf(client, "/console/namespaces")
        refused = client.post(f"/console/agents/{AGENT}/role", data={"csrf": token, "role": "member", "confirm": "yes"})
        assert refused.status_code == 403
        capped = client.post(f"/console/agents/{AGENT}/caps", data={"csrf": token, "op": "recall", "per_day": "1"})
        assert capped.status_code == 403
    with service.client("admin") as admin:
        [agent] = [a for a in admin.get("/v1/agents").json()["agents"] if a["id"] == AGENT]
        assert agent["role"] == "live"


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(per_day=st.one_of(st.text(max_size=30), st.integers(min_value=-(2**70), max_value=2**70).map(str)))
def test_any_cap_typed_is_set_or_refused_clearly(service: Service, per_day: str) -> None:
    _make_live_agent(service)
    with _signed_in_client(service, "admin") as client:
        token = _csrf(client, f"/console/agents/{AGENT}")
        answer = client.post(
            f"/console/agents/{AGENT}/caps", data={"csrf": token, "op": "workflow", "per_day": per_day}
        )
        try:
            valid = 0 <= int(per_day.strip()) < 2**63
        except ValueError:
            valid = False
        if valid:
            assert answer.status_code == 303, answer.text
        else:
            # refused by the page ("calls per day: ...") or by the edge guard ("form field 'per_day' ...")
            assert answer.status_code == 400 and re.search("per.day", answer.text), answer.text
        client.post(f"/console/agents/{AGENT}/caps", data={"csrf": token, "op": "workflow", "clear": "yes"})
