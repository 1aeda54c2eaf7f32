"""Every console page as a person meets it on a phone, on a desktop and in dark mode, and errors that
keep the form (issue 36, items 14 and 15), in a real browser (Debian's chromium, driven by
Playwright) against the running service.

At 390 x 844 no page scrolls sideways, the navigation is one row (a "Menu" disclosure), and the
controls a person came for (a sleep run's counts, Approve and Deny) are on screen; at 1280 nothing
scrolls sideways either and the links need no "Menu" to open. In dark mode the text's colours meet WCAG AA contrast on their background.
A bad filter value shows the same page again with what was typed and the error (400); a wrong key
shows the sign-in page again with its ``next`` (401); a refused change shows the page it came from
with the error, worded for the console. Screenshots go to ``$CABRAIN_TEST_SHOTS`` (or a temp dir).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, expect

from cabrain.serve.console import MODULES
from tests.service.conftest import Service, sign_in
from tests.unit.test_chat_notices import slack_zip

NS = "layout/team"
SHOTS = Path(os.environ.get("CABRAIN_TEST_SHOTS") or Path(tempfile.gettempdir()) / "cabrain-console-shots")
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
LONG = (
    "The runbook for the billing export lives at https://wiki.example.internal/engineering/billing/exports/"
    "nightly-reconciliation-and-retry-procedure-for-the-ledger-service-v2 (ticket BILL-20931-RECONCILE)."
)
WORDINGS = (  # two wordings of one fact: a dedup sleep run merges them
    "The layout test's staging database runs PostgreSQL 16 on host db-layout-1.",
    "The layout test's staging database is PostgreSQL 16 on the host db-layout-1.",
)
# GET pages that are not pages a person reads (a script's feed, the sign-in page, redirects)
NOT_PAGES = {"", "/", "/login", "/events", "/capture.json", "/graph.json", "/transfer/export"}


def console_pages() -> set[str]:
    """Every GET page the console registers (paths under /console, path parameters as written)."""
    found = set()
    for module in MODULES:
        for route in module.routes.routes:
            path = getattr(route, "path", "")
            if "GET" in (getattr(route, "methods", None) or ()):
                found.add(path.removeprefix("/console"))
    return found - NOT_PAGES


@pytest.fixture(scope="module")
def world(service: Service) -> dict[str, Any]:
    """alice's namespace with a long unbroken line, a finished sleep run over it, and a forget held
    for a person's approval (the live agent 'layout-scout' asked it)."""
    ids: dict[str, Any] = {}
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        long = alice.post("/v1/memories", json={"content": LONG, "namespace": NS, "visibility": "team"})
        assert long.status_code == 200, long.text
        ids["long"] = long.json()["memory_id"]
        for text in WORDINGS:
            item = {"content": text, "namespace": NS, "visibility": "team", "network": "fact"}
            stored = alice.post("/v1/memories/batch", json={"items": [item], "decide": False})
            assert stored.status_code == 200, stored.text
        listed = alice.get("/v1/entities", params={"namespace": NS})
        assert listed.status_code == 200, listed.text
        ids["entity"] = next((e["name"] for e in listed.json()["entities"]), "PostgreSQL")
    with service.client("admin") as operator:
        started = operator.post("/v1/sleep/runs", json={"namespaces": [NS], "steps": ["dedup"]})
        assert started.status_code in (200, 201, 202), started.text
        ids["run"] = started.json()["run_id"]
        deadline = time.monotonic() + 600
        while operator.get(f"/v1/sleep/runs/{ids['run']}").json()["status"] == "running":
            assert time.monotonic() < deadline, "the sleep run did not finish"
            time.sleep(0.2)
        made = operator.post("/v1/agents", json={"id": "layout-scout"})
        assert made.status_code == 201, made.text
        service.keys["layout-scout"] = made.json()["key"]
        assert operator.put("/v1/agents/layout-scout/role", json={"role": "live"}).json()["role"] == "live"
        # a connector into alice's namespace, for the connectors' pages
        shared = Path(service.settings.connector_roots[0])
        shared.mkdir(parents=True, exist_ok=True)
        talk = [{"type": "message", "user": "U01", "text": "Who is on call tonight?", "ts": "1705312700.000050"}]
        export = slack_zip(shared / "layout-slack.zip", {"ops/2024-01-15.json": talk})
        body = {"name": "layout-slack", "kind": "slack-export", "namespace": NS, "config": {"path": str(export)}}
        assert operator.post("/v1/connectors", json=body).status_code == 201
    with service.client("alice") as alice:
        granted = alice.post("/v1/grants", json={"namespace": NS, "agent": "layout-scout"})
        assert granted.status_code in (200, 201), granted.text
    with service.client("layout-scout") as scout:
        held = scout.post(f"/v1/memories/{ids['long']}/forget", json={"reason": "layout test"})
        assert held.status_code == 403 and held.json()["error"]["type"] == "confirmation_required", held.text
        ids["action"] = held.json()["error"]["fix"]["params"]["action"]
    return ids


def page_urls(world: dict[str, Any]) -> dict[str, str]:
    """A URL for every registered page (path parameters filled in from ``world``)."""
    ns = urllib.parse.quote(NS)
    return {
        "/memories": f"/console/memories?namespace={ns}",
        "/memories/{memory_id}": f"/console/memories/{world['long']}",
        "/recall": f"/console/recall?namespace={ns}&q=staging+database+host",
        "/entities": f"/console/entities?namespace={ns}",
        "/entity": f"/console/entity?namespace={ns}&name={urllib.parse.quote(world['entity'])}",
        "/capture": "/console/capture",
        "/sleep": "/console/sleep",
        "/sleep/{run_id}": f"/console/sleep/{world['run']}",
        "/workflows": "/console/workflows",
        "/connectors": "/console/connectors",
        "/connectors/{name}": "/console/connectors/layout-slack",
        "/namespaces": "/console/namespaces",
        "/actions": "/console/actions",
        "/pushes": "/console/pushes",
        "/agents": "/console/agents",
        "/agents/{agent_id}": "/console/agents/alice",
        "/health": "/console/health",
        "/overview": "/console/overview",
        "/audit": f"/console/audit?namespace={ns}",
        "/transfer": "/console/transfer",
    }


def test_every_registered_page_is_measured() -> None:
    """A page added to the console is added to this file's list, so its layout is tested too."""
    missing = console_pages() - set(page_urls({"long": "x", "entity": "x", "run": "x"}))
    assert not missing, f"add these console pages to page_urls: {sorted(missing)}"


async def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


_SIGNED: dict[str, Any] = {}


async def context_for(browser: Browser, service: Service, agent: str, **options: Any) -> BrowserContext:
    """A new browser context signed in as ``agent`` (its cookies from one sign-in per agent)."""
    if agent not in _SIGNED:
        first = await sign_in(browser, service, agent)
        _SIGNED[agent] = await first.context.storage_state()
        await first.context.close()
    return await browser.new_context(storage_state=_SIGNED[agent], **options)


MEASURE = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    const box = el.getBoundingClientRect();
    if (box.width && box.right > width + 1) wide.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : ''));
  }
  const top = document.querySelector('header.top');
  return {scroll: document.documentElement.scrollWidth, width, header: top ? top.getBoundingClientRect().height : 0, wide: wide.slice(0, 8)};
}"""


async def visit(browser: Browser, service: Service, world: dict[str, Any], name: str, **options: Any) -> Page:
    """The page ``name`` open in a new context: as alice, or as the admin where alice may not see it."""
    assert name in console_pages(), f"{name}: the console no longer registers this page"
    url = page_urls(world)[name]
    context = await context_for(browser, service, "alice", **options)
    page = await context.new_page()
    answer = await page.goto(service.url + url)
    assert answer is not None
    if answer.status == 403:
        await context.close()
        context = await context_for(browser, service, "admin", **options)
        page = await context.new_page()
        answer = await page.goto(service.url + url)
        assert answer is not None
    assert answer.status == 200, (url, answer.status, (await page.locator("main").inner_text())[:500])
    await page.wait_for_load_state("networkidle")
    return page


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "page"


async def on_screen(page: Page, locator: Any, what: str) -> None:
    """Every element ``locator`` finds lies within the viewport's width."""
    count = await locator.count()
    assert count, f"no {what} on the page"
    width = await page.evaluate("document.documentElement.clientWidth")
    for i in range(count):
        box = await locator.nth(i).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (what, box, width)


@pytest.mark.parametrize("name", sorted(page_urls({"long": "x", "entity": "x", "run": "x"})))
async def test_at_390_px_no_page_scrolls_sideways_and_the_menu_is_one_row(
    browser: Browser, service: Service, world: dict[str, Any], name: str
) -> None:
    page = await visit(browser, service, world, name, viewport=PHONE)
    measured = await page.evaluate(MEASURE)
    await shot(page, f"layout-390-{_slug(name)}")
    assert measured["scroll"] <= PHONE["width"], (name, measured)
    assert measured["header"] < 60, (name, measured)
    # the menu opens below the bar, every link on screen, and the bar stays one row
    menu = page.locator("details.menu > summary")
    await expect(menu).to_be_visible()
    await menu.click()
    links = page.locator("header.top nav a")
    await expect(links.first).to_be_visible()
    await on_screen(page, links, "navigation links")
    assert (await page.evaluate(MEASURE))["header"] < 60
    if name == "/memories":
        await shot(page, "layout-390-menu-open")
    if name == "/sleep/{run_id}":
        await menu.click()
        await expect(page.locator("#steps")).to_contain_text("merged 1")
        await on_screen(page, page.locator("#steps td.counts"), "a sleep step's counts")
    if name == "/actions":
        await menu.click()
        await on_screen(page, page.get_by_role("button", name=re.compile("^(Approve|Deny) ")), "Approve and Deny")
    if name == "/namespaces":
        await menu.click()
        await on_screen(page, page.locator("main button"), "the namespaces' buttons")
    await page.context.close()


@pytest.mark.parametrize("name", sorted(page_urls({"long": "x", "entity": "x", "run": "x"})))
async def test_at_1280_px_no_page_scrolls_sideways_and_the_menu_is_open(
    browser: Browser, service: Service, world: dict[str, Any], name: str
) -> None:
    page = await visit(browser, service, world, name, viewport=DESKTOP)
    measured = await page.evaluate(MEASURE)
    await shot(page, f"layout-1280-{_slug(name)}")
    assert measured["scroll"] <= DESKTOP["width"], (name, measured)
    assert measured["header"] < 90, (name, measured)  # one row of links (two for an admin's longer menu)
    await expect(page.locator("details.menu > summary")).to_be_hidden()
    await expect(page.get_by_role("link", name="Memories", exact=True)).to_be_visible()  # no click needed
    await page.context.close()


CONTRAST = """([text, back]) => {
  const rgb = (s) => (s.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => {
    const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const fg = getComputedStyle(document.querySelector(text)).color;
  const el = document.querySelector(back);
  const bg = getComputedStyle(el).backgroundColor;
  const [a, b] = [lum(rgb(fg)), lum(rgb(bg))].sort((x, y) => y - x);
  return {fg, bg, ratio: (a + 0.05) / (b + 0.05)};
}"""


@pytest.mark.parametrize("scheme", ["dark", "light"])
async def test_text_meets_wcag_aa_contrast_in_dark_and_light_mode(
    browser: Browser, service: Service, world: dict[str, Any], scheme: str
) -> None:
    page = await visit(browser, service, world, "/namespaces", viewport=DESKTOP, color_scheme=scheme)
    body = await page.evaluate("getComputedStyle(document.body).backgroundColor")
    level = sum(int(v) for v in re.findall(r"\d+", body)[:3]) / 3
    assert (level < 60) if scheme == "dark" else (level > 200), body  # the page follows the system's preference
    pairs = [
        ("main h1", "body"),  # text on the page
        ("main .meta", ".card"),  # muted text on a card
        ("main a", "body"),  # a link
        ("main button", "main button"),  # a button's label on the button
        ("header .who", "header.top"),
    ]
    for text, back in pairs:
        found = await page.evaluate(CONTRAST, [text, back])
        assert found["ratio"] >= 4.5, (scheme, text, back, found)
    field = await page.evaluate(
        "getComputedStyle(document.querySelector('main input:not([type=hidden])')).backgroundColor"
    )
    if scheme == "dark":
        assert sum(int(v) for v in re.findall(r"\d+", field)[:3]) / 3 < 60, field  # no white field in the dark
        for name in ("/namespaces", "/sleep/{run_id}", "/memories", "/recall", "/actions", "/overview", "/entities"):
            shown = await visit(browser, service, world, name, viewport=PHONE, color_scheme="dark")
            await shot(shown, f"dark-390-{_slug(name)}")
            await shown.context.close()
    await page.context.close()


async def test_a_bad_filter_value_keeps_the_page_and_what_was_typed(
    browser: Browser, service: Service, world: dict[str, Any]
) -> None:
    context = await context_for(browser, service, "alice", viewport=PHONE)
    page = await context.new_page()
    url = f"/console/memories?namespace={urllib.parse.quote(NS)}&min_importance=abc&network=fact"
    answer = await page.goto(service.url + url)
    assert answer is not None and answer.status == 400
    alert = page.locator("#page-errors [role=alert]")
    await expect(alert).to_contain_text("min_importance")
    await expect(alert).to_contain_text("'abc' is not a number")
    await expect(page.locator("input[name=min_importance]")).to_have_value("abc")  # what was typed, to correct
    await expect(page.locator("select[name=namespace]")).to_have_value(NS)  # the other fields stay as chosen
    await expect(page.locator("select[name=network]")).to_have_value("fact")
    await expect(page.locator("main")).to_contain_text("PostgreSQL 16")  # the page, filtered by the good fields
    assert (await page.evaluate(MEASURE))["scroll"] <= PHONE["width"]
    await shot(page, "error-keeps-the-form")
    # corrected in the same form, the page answers without the error
    await page.locator("input[name=min_importance]").fill("0")
    await page.locator("input[name=min_importance]").press("Enter")
    await expect(page.locator("#page-errors")).to_have_count(0)
    await expect(page.locator("main")).to_contain_text("PostgreSQL 16")

    # two bad values: both named, each kept; a bad time too
    bad = f"/console/memories?namespace={urllib.parse.quote(NS)}&min_importance=7&as_of=last+tuesday"
    answer = await page.goto(service.url + bad)
    assert answer is not None and answer.status == 400
    await expect(alert).to_have_count(2)
    await expect(page.locator("#page-errors")).to_contain_text("min_importance must be between 0 and 1")
    await expect(page.locator("#page-errors")).to_contain_text("as_of: 'last tuesday' is not a date")
    await expect(page.locator("input[name=min_importance]")).to_have_value("7")
    # a page of mine whose form is its own: the workflows' period
    answer = await page.goto(service.url + "/console/workflows?days=many")
    assert answer is not None and answer.status == 400
    await expect(alert).to_contain_text("days")
    await expect(page.locator("input[name=days]")).to_have_value("many")
    await expect(page.locator("#totals")).to_be_visible()
    await context.close()


async def test_a_wrong_key_shows_the_sign_in_page_again_with_where_it_leads(browser: Browser, service: Service) -> None:
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    await page.goto(service.url + "/console/recall?q=staging")
    await expect(page).to_have_url(re.compile(r"/console/login\?next="))
    await page.get_by_label("API key").fill("cbk_not-a-key-anyone-was-given-0000000000")
    async with page.expect_response(lambda r: r.request.method == "POST") as posted:
        await page.get_by_role("button", name="Sign in").click()
    assert (await posted.value).status == 401
    alert = page.locator("#page-errors [role=alert]")
    await expect(alert).to_contain_text("This key was refused")
    await expect(alert).not_to_contain_text("/v1/")
    await expect(page.locator("input[name=next]")).to_have_value("/console/recall?q=staging")
    await shot(page, "sign-in-refused")
    # the right key then leads where the person was going
    await page.get_by_label("API key").fill(service.keys["alice"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(re.compile(r"/console/recall\?q=staging$"))
    await context.close()


async def test_a_refused_change_shows_the_page_it_came_from_in_the_console_s_words(
    browser: Browser, service: Service, world: dict[str, Any]
) -> None:
    # a forget without its confirmation (the browser's own check taken away): the memory's page again
    context = await context_for(browser, service, "alice", viewport=PHONE)
    page = await context.new_page()
    await page.goto(f"{service.url}/console/memories/{world['long']}")
    form = page.locator('form[action$="/forget"]')
    await form.evaluate("f => { f.closest('details').open = true; f.noValidate = true; }")
    async with page.expect_response(lambda r: r.request.method == "POST") as posted:
        await form.locator("button[type=submit]").click()
    assert (await posted.value).status == 400
    await expect(page.locator("#page-errors [role=alert]")).to_contain_text("tick the confirmation")
    await expect(page.locator("main")).to_contain_text("billing export")  # the memory's page, not an error page
    with service.client("alice") as alice:
        assert alice.get(f"/v1/memories/{world['long']}").json()["memory"]["invalid_at"] is None
    await context.close()

    # a live agent's forget is held: the console says where a person approves it, never an API route
    scout = await context_for(browser, service, "layout-scout", viewport=PHONE)
    page = await scout.new_page()
    await page.goto(f"{service.url}/console/memories/{world['long']}")
    form = page.locator('form[action$="/forget"]')
    await form.evaluate("f => { f.closest('details').open = true; }")
    await form.locator("input[name=confirm]").check()
    async with page.expect_response(lambda r: r.request.method == "POST") as posted:
        await form.locator("button[type=submit]").click()
    assert (await posted.value).status == 403
    alert = page.locator("#page-errors [role=alert]")
    await expect(alert).to_contain_text("Actions page")
    text = await alert.inner_text()
    assert "/v1/" not in text and "cabrain " not in text, text
    await expect(page.locator("main")).to_contain_text("billing export")
    await shot(page, "refused-change")
    await scout.close()
