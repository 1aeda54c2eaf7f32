"""The entity pages in a real browser: a memory's tags link to their entities; the list counts the
mentions the signed-in agent may read (never another agent's private memory) and sorts by them; a
merge and a rename from the entity page, each undone from the page it lands on; the graph labelled,
fitted inside its canvas, with a legend, entity-to-entity edges and keyboard navigation."""

from __future__ import annotations

import json

import pytest
from playwright.async_api import Browser, expect

from tests.conftest import cli_env, run_cli
from tests.mcp_helpers import call, call_error, http_session
from tests.service.conftest import Service, sign_in
from tests.service.test_console import shot

NS = "console/entities"
TEAM = [
    "The billing jobs run on Kestrel next to Osprey.",
    "We gave Kestrel a bigger disk this week.",
    "Osprey and Kestrel share one queue.",
    "The old cron server was replaced by Heron.",
]
BOB_PRIVATE = "My own note: both Heron and Kestrel keep failing after deploys."


@pytest.fixture(scope="module")
def seeded(service: Service) -> dict[str, str]:
    ids: dict[str, str] = {}
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": "bob", "can_write": True}).status_code in (
            200,
            201,
        )
        for text in TEAM:
            response = alice.post("/v1/memories", json={"content": text, "namespace": NS, "visibility": "team"})
            assert response.status_code == 200, response.text
            ids[text] = response.json()["memory_id"]
    with service.client("bob") as bob:
        assert bob.post("/v1/grants/accept", json={"namespace": NS}).status_code == 200
        response = bob.post("/v1/memories", json={"content": BOB_PRIVATE, "namespace": NS, "visibility": "private"})
        assert response.status_code == 200, response.text
        ids["bob"] = response.json()["memory_id"]
    return ids


# each node's place on the canvas and where its label ends (CSS px), as the page keeps them on its list item
POSITIONS = "items => items.map(i => [+i.dataset.x, +i.dataset.y, +i.dataset.right])"


def _mentions(text: str) -> int:
    return int(text.split(" mention")[0].strip())


async def test_tags_link_and_counts_leave_out_others_private_memories(
    browser: Browser, service: Service, seeded: dict
) -> None:
    page = await sign_in(browser, service, "alice", start=f"/console/memories/{seeded[TEAM[0]]}")
    await page.get_by_role("link", name="Kestrel").first.click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Kestrel")

    await page.goto(f"{service.url}/console/entities?namespace={NS}&sort=mentions")
    rows = page.locator("#entities li")
    counts = {}
    for i in range(await rows.count()):
        name = await rows.nth(i).locator("a").first.inner_text()
        counts[name] = _mentions(await rows.nth(i).locator(".mentions").inner_text())
    assert counts["Kestrel"] == 3 and counts["Heron"] == 1  # bob's private note is not counted for alice
    assert list(counts.values()) == sorted(counts.values(), reverse=True)
    await shot(page, "entities")
    await page.context.close()

    bob = await sign_in(browser, service, "bob", start=f"/console/entities?namespace={NS}")
    kestrel = bob.locator("#entities li", has_text="Kestrel").locator(".mentions")
    await expect(kestrel).to_contain_text("4 mentions")
    await expect(kestrel).to_contain_text("1 private, yours")
    await bob.context.close()


async def test_merge_then_revert_and_rename_then_revert(browser: Browser, service: Service, seeded: dict) -> None:
    page = await sign_in(browser, service, "alice", start=f"/console/entity?namespace={NS}&name=Osprey")
    with service.client("alice") as alice:
        before = {m["id"] for m in alice.get("/v1/entities/Osprey", params={"namespace": NS}).json()["memories"]}
        kestrel_before = {
            m["id"]
            for m in alice.get("/v1/entities/Kestrel", params={"namespace": NS, "limit": 200}).json()["memories"]
        }
    await page.get_by_text("Merge this entity into another…").click()
    await page.get_by_label("Into (name or id)").fill("Kestrel")
    await page.get_by_role("button", name="Merge").click()  # unconfirmed: not sent
    await expect(page.get_by_role("heading", level=1)).to_have_text("Osprey")
    await page.get_by_label("Every memory that mentions").check()
    await page.get_by_role("button", name="Merge").click()
    await expect(page.locator("#done")).to_contain_text("merged")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Kestrel")
    await shot(page, "entity-merged")
    with service.client("alice") as alice:
        merged = alice.get("/v1/entities/Osprey", params={"namespace": NS}).json()
        assert merged["memories"] == [] and merged["entity"]["merged_into"]
    await page.get_by_label("Undo this").check()
    await page.get_by_role("button", name="Revert").click()
    await expect(page.locator("#done")).to_contain_text("reverted")
    with service.client("alice") as alice:
        after = {m["id"] for m in alice.get("/v1/entities/Osprey", params={"namespace": NS}).json()["memories"]}
        kestrel_after = {
            m["id"]
            for m in alice.get("/v1/entities/Kestrel", params={"namespace": NS, "limit": 200}).json()["memories"]
        }
    assert after == before and kestrel_after == kestrel_before

    # rename, then undo it; a taken name is refused with the merge suggested
    await page.goto(f"{service.url}/console/entity?namespace={NS}&name=Heron")
    await page.get_by_text("Rename this entity…").click()
    await page.get_by_label("New name").fill("Grey Heron")
    await page.get_by_role("button", name="Rename").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Grey Heron")
    await page.get_by_label("Undo this").check()
    await page.get_by_role("button", name="Revert").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Heron")
    with service.client("alice") as alice:
        taken = alice.post("/v1/entities/Heron/rename", params={"namespace": NS}, json={"new_name": "kestrel"})
        assert taken.status_code == 409 and "merge" in taken.text
    await page.context.close()


async def test_the_graph_is_labelled_fitted_with_a_legend_and_keyboard(
    browser: Browser, service: Service, seeded: dict
) -> None:
    page = await sign_in(browser, service, "alice", start=f"/console/entity?namespace={NS}&name=Kestrel")
    canvas = page.locator("#graph")
    await expect(canvas).to_have_attribute("data-settled", "true", timeout=30_000)
    assert int(await canvas.get_attribute("data-labels") or 0) >= 3
    await expect(page.locator("#graph-legend")).to_contain_text("mentioned together")
    await expect(page.locator("#graph-edges li", has_text="Osprey")).to_contain_text("mentioned together")
    shared = page.locator("#graph-list li", has_text="share one queue")
    await expect(shared).to_contain_text("mentions")  # a memory's edges, in words
    await expect(shared).to_contain_text("Osprey")
    box = await canvas.evaluate("c => [c.clientWidth, c.clientHeight]")
    points = await page.locator("#graph-list li").evaluate_all(POSITIONS)
    assert points and all(0 <= x <= right <= box[0] and 0 <= y <= box[1] for x, y, right in points), json.dumps(
        [box, points]
    )
    await shot(page, "entity-graph")

    # refitted on resize (a phone's width): still inside
    await page.set_viewport_size({"width": 390, "height": 800})
    await page.wait_for_timeout(300)
    box = await canvas.evaluate("c => [c.clientWidth, c.clientHeight]")
    points = await page.locator("#graph-list li").evaluate_all(POSITIONS)
    assert all(0 <= x <= right <= box[0] and 0 <= y <= box[1] for x, y, right in points), json.dumps([box, points])
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    await shot(page, "entity-graph-390")
    await page.set_viewport_size({"width": 1200, "height": 900})
    # dark mode: the canvas is drawn in the page's colours (read from its CSS variables)
    light = await canvas.evaluate("c => c.toDataURL()")
    await page.emulate_media(color_scheme="dark")
    await page.wait_for_timeout(300)
    assert await canvas.evaluate("c => c.toDataURL()") != light
    await shot(page, "entity-graph-dark")
    await page.emulate_media(color_scheme="light")

    # keyboard: focus selects the entity, arrows move the selection, Enter opens it
    await canvas.focus()
    center = await canvas.get_attribute("data-selected")
    assert center and center.startswith("e:")
    for key in ("ArrowRight", "ArrowDown", "ArrowLeft", "ArrowUp"):
        await page.keyboard.press(key)
        if await canvas.get_attribute("data-selected") != center:
            break
    chosen = await canvas.get_attribute("data-selected")
    assert chosen and chosen != center
    await page.keyboard.press("+")
    await page.keyboard.press("Enter")
    if chosen.startswith("m:"):
        await expect(page).to_have_url(f"{service.url}/console/memories/{chosen[2:]}")
    else:
        await expect(page).to_have_url(
            f"{service.url}/console/entity?namespace={NS.replace('/', '%2F')}&name={chosen[2:]}"
        )
    await page.context.close()


async def test_rename_and_merge_from_the_cli_and_mcp_are_judgments_revert_undoes(
    service: Service, seeded: dict
) -> None:
    alice = cli_env(api_url=service.url, api_key=service.keys["alice"])
    listed = run_cli("entities", NS, "--sort", "mentions", env=alice)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].startswith("Kestrel") and " mentions" in listed.stdout
    renamed = run_cli("entities", "rename", NS, "Heron", "Night Heron", "--json", env=alice)
    assert renamed.returncode == 0, renamed.stderr
    judgment = json.loads(renamed.stdout)
    assert (judgment["kind"], judgment["origin"]) == ("entity_rename", "person")
    taken = run_cli("entities", "rename", NS, "Osprey", "night heron", env=alice)
    assert taken.returncode == 1 and "merge" in taken.stderr
    undone = run_cli("revert", judgment["id"], "--judgment", env=alice)
    assert undone.returncode == 0, undone.stderr
    carol = run_cli(
        "entities", "merge", NS, "Heron", "Kestrel", env=cli_env(api_url=service.url, api_key=service.keys["carol"])
    )
    assert carol.returncode == 1  # carol may not even read the namespace

    async with http_session(service.url, service.keys["alice"]) as mcp:
        merged = await call(mcp, "memory_entity_merge", namespace=NS, name="Heron", into="Kestrel", reason="same box")
        assert merged["kind"] == "entity_merge" and merged["entities"][0]["name"] == "Heron"
        entities = {e["name"]: e for e in (await call(mcp, "memory_entities", namespace=NS))["entities"]}
        assert "Heron" not in entities and entities["Kestrel"]["mentions"] == 4
        await call(mcp, "memory_revert", judgment_id=merged["id"])
        entities = {e["name"]: e for e in (await call(mcp, "memory_entities", namespace=NS))["entities"]}
        assert entities["Heron"]["mentions"] == 1 and entities["Kestrel"]["mentions"] == 3
        assert "merge" in await call_error(mcp, "memory_entity_rename", namespace=NS, name="Heron", new_name="osprey")
