"""The overview, the memory list's search and health, in a real browser (Debian's chromium, driven by
Playwright) against the running service, as a person meets them: /console opens on the overview;
its counts leave out other agents' private memories; the memory list searches words, filters by
speaker and thread, counts what matches and links each row by its first words, without counting a
use; health shows what the brain holds; every page fits a phone, in dark mode too. The API's
``GET /v1/overview`` and ``cabrain overview`` answer the same numbers."""

from __future__ import annotations

import os
import tempfile
import urllib.parse
from pathlib import Path

import asyncpg
import pytest
from playwright.async_api import Browser, Page, expect

from tests.conftest import cli_env, run_cli
from tests.service.conftest import Service, sign_in

NS = "overview/team"
SHOTS = Path(os.environ.get("CABRAIN_TEST_SHOTS") or Path(tempfile.gettempdir()) / "cabrain-console-shots")
SECRET = "Alice's private overview note: the vault code hint is the red door."
TURNS = (
    ("Dana", "standup-1", "The invoice service moves to Frankfurt next sprint."),
    ("Omar", "standup-1", "Then the invoice exports need the new bucket name."),
    ("Dana", "lunch-2", "Lunch on Friday is at the harbour."),
)


@pytest.fixture(scope="module")
def seeded(service: Service) -> dict[str, str]:
    """alice's namespace (bob may read it): three turns of two threads, a team note and her private one."""
    ids: dict[str, str] = {}
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        grant = {"namespace": NS, "agent": "bob", "can_write": False}
        assert alice.post("/v1/grants", json=grant).status_code in (200, 201)

        def retain(content: str, visibility: str = "team", **metadata: str) -> str:
            body = {"content": content, "namespace": NS, "visibility": visibility, "metadata": metadata}
            response = alice.post("/v1/memories", json=body)
            assert response.status_code == 200, response.text
            return response.json()["memory_id"]

        ids["private"] = retain(SECRET, "private")
        ids["note"] = retain("The team note: the office plants need water on Mondays.")
        for i, (speaker, thread, text) in enumerate(TURNS):
            ids[f"turn{i}"] = retain(text, speaker=speaker, thread=thread)
    return ids


async def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


async def fits_a_phone(page: Page, path: str) -> None:
    overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"{path} is {overflow}px wider than a phone"


def test_the_api_and_the_cli_answer_the_overview(service: Service, seeded: dict) -> None:
    with service.client("bob") as bob:  # the answer is checked against the OpenAPI document
        found = bob.get("/v1/overview", params={"namespace": NS})
        assert found.status_code == 200, found.text
        body = found.json()
        [ns] = body["namespaces"]
        assert ns == ns | {"name": NS, "current": 4, "private_of_others": 1}
        assert body["storage"]["hot_bytes"] is None and SECRET not in found.text
        assert bob.get("/v1/overview", params={"runs": 99}).status_code == 422
    with service.client("admin") as admin:
        whole = admin.get("/v1/overview").json()
        assert whole["storage"]["hot_bytes"] > 0
        assert next(n for n in whole["namespaces"] if n["name"] == NS)["current"] == 4
    shown = run_cli("overview", "-n", NS, env=cli_env(api_url=service.url, api_key=service.keys["bob"]))
    assert shown.returncode == 0, shown.stderr
    assert "4 current" in shown.stdout and "+1 private of others" in shown.stdout and SECRET not in shown.stdout
    refused = run_cli("overview", "--runs", "99", env=cli_env(api_url=service.url, api_key=service.keys["bob"]))
    assert refused.returncode != 0 and "runs" in refused.stderr


async def test_the_console_opens_on_the_overview_and_counts_no_private_memory_of_others(
    browser: Browser, service: Service, seeded: dict
) -> None:
    page = await sign_in(browser, service, "bob", "/console/overview")
    await page.goto(f"{service.url}/console")
    await expect(page).to_have_url(f"{service.url}/console/overview")
    await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    row = page.locator("#namespaces tbody tr", has_text=NS)
    await expect(row).to_contain_text("+1 private of others, not counted")
    await expect(row.locator("td").first).to_have_text("4")
    await expect(page.locator("#days figure")).to_have_count(4)
    await expect(page.locator("#hours figure")).to_have_count(4)
    await expect(page.locator("#days figure").first).to_contain_text("Retained per day")
    await expect(page.locator("#storage")).to_contain_text("shown to admins")
    assert SECRET not in await page.content()
    # one namespace's overview, from its row
    await row.get_by_role("link", name="overview", exact=True).click()
    await expect(page.get_by_role("heading", name=f"Overview: {NS}")).to_be_visible()
    await expect(page.locator("#sources")).to_contain_text("(none)")
    await shot(page, "overview")
    await page.context.close()

    admin = await sign_in(browser, service, "admin", "/console/overview")
    await expect(admin.locator("#storage")).to_contain_text("Hot tier")
    await expect(admin.locator("#storage dd").first).to_contain_text("B")
    await expect(admin.locator("#pending")).to_contain_text("pending action")
    await admin.context.close()


async def test_the_memory_list_searches_filters_and_counts_without_counting_a_use(
    browser: Browser, service: Service, seeded: dict
) -> None:
    page = await sign_in(browser, service, "bob", "/console/memories")
    # it opens on the namespace written to last that bob may read: this one
    await expect(page.get_by_label("Namespace")).to_have_value(NS)
    await expect(page.locator("#count")).to_have_text("4 memories match.")
    await page.get_by_label("Search words").fill("invoice")
    await page.get_by_role("button", name="Show").click()
    await expect(page.locator("#memories li")).to_have_count(2)
    await expect(page.locator("#count")).to_have_text("2 memories match.")
    # speaker and thread on each row, each a filter
    first = page.locator("#memories li").first
    await expect(first.locator("a.speaker")).to_be_visible()
    await expect(first.locator("a.thread")).to_have_text("standup-1")
    await page.goto(f"{service.url}/console/memories?namespace={urllib.parse.quote(NS)}")
    await page.locator("#memories a.speaker", has_text="Dana").first.click()
    await expect(page.locator("#memories li")).to_have_count(2)
    await expect(page.locator("#count")).to_have_text("2 memories match.")
    await page.locator("#memories a.thread", has_text="lunch-2").click()
    await expect(page.locator("#memories li")).to_have_count(1)
    # each row is linked by its first words
    link = page.locator("#memories a.memory-link")
    await expect(link).to_have_text("Lunch on Friday is at the harbour.")
    await link.click()
    await expect(page).to_have_url(f"{service.url}/console/memories/{seeded['turn2']}")
    # a search with no word the index keeps says so, and keeps the form
    await page.goto(f"{service.url}/console/memories?namespace={urllib.parse.quote(NS)}&q=%20-%20")
    await expect(page.locator("body")).to_contain_text("no word the keyword index keeps")
    await page.context.close()
    # browsing and searching counted no use
    conn = await asyncpg.connect(service.dsn)
    try:
        used = await conn.fetchval(
            "SELECT sum(access_count) FROM memories WHERE id = ANY($1::uuid[])",
            [seeded[k] for k in ("turn0", "turn1", "note")],
        )
    finally:
        await conn.close()
    assert used == 0


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_the_pages_fit_a_phone(browser: Browser, service: Service, seeded: dict, scheme: str) -> None:
    page = await sign_in(browser, service, "admin", "/console/overview")
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.emulate_media(color_scheme=scheme)
    ns = urllib.parse.quote(NS)
    for path, name in (
        ("/console/overview", "overview"),
        (f"/console/overview?namespace={ns}", "overview-namespace"),
        (f"/console/memories?namespace={ns}&q=invoice", "memories-search"),
        ("/console/health", "health"),
    ):
        await page.goto(service.url + path)
        await fits_a_phone(page, path)
        await shot(page, f"{name}-phone-{scheme}")
    await page.context.close()


async def test_health_shows_what_the_brain_holds(browser: Browser, service: Service, seeded: dict) -> None:
    page = await sign_in(browser, service, "admin", "/console/health")
    await expect(page.locator("#held")).to_contain_text("Memories")
    await expect(page.locator("#held")).to_contain_text("Hot tier")
    await expect(page.locator("#parts tbody tr", has_text="cold tier (Iceberg)")).to_contain_text("ok")
    await page.reload()  # the cold tier's check is the last one's now, its age shown
    await expect(page.locator("#parts tbody tr", has_text="cold tier (Iceberg)")).to_contain_text("s ago")
    await shot(page, "health")
    await page.context.close()
