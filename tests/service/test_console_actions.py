"""Held actions in the console, as the person who decides them meets them (issue 36, item 12): each
action said in words (the memory's text when the approver may read it, else that it may not; the
namespace; who asked and when), a live agent's "accept grant" held and shown as that and never as
a "share", a failed approval shown as a failure with its reason and no API route, and the page
usable on a phone."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Browser, Page, expect

from tests.service.conftest import Service, sign_in
from tests.service.test_console import shot

NS = "actions/team"
TEAM_TEXT = "The staging database is refreshed from production every Sunday night."
PRIVATE_TEXT = "Bob's private reminder: renew the wildcard certificate before the audit."
LIVE = "act-scout"


@pytest.fixture(scope="module")
def held(service: Service) -> dict[str, str]:
    """A live agent that reads alice's namespace and may not write it, and what it asked: a forget of
    a team memory alice reads, a forget of bob's private memory (which alice may not read), and the
    acceptance of the write grant alice offered it."""
    with service.client("admin") as admin:
        made = admin.post("/v1/agents", json={"id": LIVE})
        assert made.status_code == 201, made.text
        service.keys[LIVE] = made.json()["key"]
        assert admin.put(f"/v1/agents/{LIVE}/role", json={"role": "live"}).status_code == 200
    ids: dict[str, str] = {}
    with service.client("alice") as alice, service.client("bob") as bob, service.client(LIVE) as live:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": LIVE}).status_code in (200, 201)
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": "bob", "can_write": True}).status_code in (
            200,
            201,
        )
        assert bob.post("/v1/grants/accept", json={"namespace": NS}).status_code == 200
        ids["team"] = alice.post(
            "/v1/memories", json={"content": TEAM_TEXT, "namespace": NS, "visibility": "team"}
        ).json()["memory_id"]
        private = bob.post("/v1/memories", json={"content": PRIVATE_TEXT, "namespace": NS, "visibility": "private"})
        assert private.status_code == 200, private.text
        ids["private"] = private.json()["memory_id"]
        for name in ("team", "private"):
            asked = live.post(f"/v1/memories/{ids[name]}/forget", json={"reason": "stale"})
            assert asked.status_code == 403 and asked.json()["error"]["type"] == "confirmation_required"
            ids[f"forget_{name}"] = asked.json()["error"]["fix"]["params"]["action"]
        offered = alice.post("/v1/grants", json={"namespace": NS, "agent": LIVE, "can_write": True})
        assert offered.status_code in (200, 201)
        accept = live.post("/v1/grants/accept", json={"namespace": NS})
        error = accept.json()["error"]
        assert accept.status_code == 403 and error["type"] == "confirmation_required"
        assert "holds this accept grant" in error["message"]  # said as what it is, under the share policy
        ids["accept"] = error["fix"]["params"]["action"]
    return ids


def card(page: Page, action: str):
    return page.locator(f'#pending li[data-action="{action}"]')


async def test_each_held_action_is_said_in_words(browser: Browser, service: Service, held: dict[str, str]) -> None:
    listed = {a["id"]: a for a in service.client("alice").get("/v1/actions").json()["actions"]}
    assert listed[held["accept"]]["label"] == "accept grant" and listed[held["accept"]]["op"] == "share"
    assert listed[held["forget_team"]]["label"] == "forget"

    page = await sign_in(browser, service, "alice", "/console/actions")
    team = card(page, held["forget_team"])
    await expect(team).to_contain_text(f"{LIVE} asks to forget in {NS}")
    await expect(team.locator(".held-memory")).to_have_text(TEAM_TEXT)
    await expect(team).to_contain_text("stale")  # the reason it gave
    await expect(team).to_contain_text("Asked ")
    assert "memory_id=" not in (await team.text_content() or "")

    private = card(page, held["forget_private"])
    await expect(private.locator(".held-memory")).to_have_text("a memory you may not read")
    assert PRIVATE_TEXT not in await page.content()

    accept = card(page, held["accept"])
    await expect(accept).to_contain_text(f"{LIVE} asks to accept grant in {NS}")
    await expect(accept.get_by_role("button", name="Approve accept grant")).to_be_visible()
    assert await accept.get_by_role("button", name=re.compile("share")).count() == 0
    await shot(page, "actions")
    await page.context.close()


async def test_a_failed_approval_is_shown_as_a_failure_in_the_consoles_words(
    browser: Browser, service: Service, held: dict[str, str]
) -> None:
    page = await sign_in(browser, service, "alice", "/console/actions")
    # approval never widens grants: the live agent may not write NS yet, so its forget fails
    await card(page, held["forget_team"]).get_by_role("button", name="Approve forget").click()
    done = page.locator("#done")
    await expect(done).to_contain_text("failed")
    await expect(done).to_contain_text("write")
    assert await done.get_attribute("class") == "error" and await done.get_attribute("role") == "alert"
    colour, danger, accent = await page.evaluate(
        """() => {
            const probe = document.createElement("span");
            document.body.append(probe);
            const of = (value) => { probe.style.color = value; return getComputedStyle(probe).color; };
            const found = [getComputedStyle(document.querySelector("#done strong")).color, of("var(--danger)"), of("var(--accent)")];
            probe.remove();
            return found;
        }"""
    )
    assert colour == danger != accent
    text = await page.locator("main").text_content() or ""
    assert "POST /v1" not in text and "Done: failed" not in text
    await expect(page.locator(f'#decided li[data-action="{held["forget_team"]}"] .status-failed')).to_have_text(
        "failed"
    )
    await shot(page, "actions-failed")

    # the acceptance approved, the same forget asked again runs; the private one alice denies
    await card(page, held["accept"]).get_by_role("button", name="Approve accept grant").click()
    await expect(done).to_contain_text("done")
    await expect(done).to_contain_text("accept grant ran")
    again = service.client(LIVE).post(f"/v1/memories/{held['team']}/forget", json={"reason": "stale"})
    action = again.json()["error"]["fix"]["params"]["action"]
    await page.goto(f"{service.url}/console/actions")
    await card(page, action).get_by_role("button", name="Approve forget").click()
    await expect(done).to_contain_text("done")
    await card(page, held["forget_private"]).get_by_role("button", name="Deny forget").click()
    await expect(done).to_contain_text("denied")
    assert service.client("alice").get(f"/v1/memories/{held['team']}").json()["memory"]["invalid_at"] is not None
    assert service.client("bob").get(f"/v1/memories/{held['private']}").json()["memory"]["invalid_at"] is None
    await page.context.close()


async def test_the_actions_page_fits_a_phone(browser: Browser, service: Service, held: dict[str, str]) -> None:
    with service.client(LIVE) as live:  # something pending to decide
        asked = live.post(f"/v1/memories/{held['private']}/forget", json={"reason": "phone"})
        assert asked.status_code == 403
    page = await sign_in(browser, service, "alice", "/console/actions")
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.reload()
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    button = page.locator("#pending").get_by_role("button", name="Approve forget").first
    box = await button.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    await shot(page, "actions-phone")
    # and in dark mode: the page's own colours, the failure still in the danger colour
    await page.emulate_media(color_scheme="dark")
    background, text = await page.evaluate(
        """() => [getComputedStyle(document.body).backgroundColor,
                  getComputedStyle(document.querySelector("#pending .held-what")).color]"""
    )
    assert background != text and background != "rgb(247, 249, 250)"  # not the light page's background
    await shot(page, "actions-dark")
    await page.context.close()
