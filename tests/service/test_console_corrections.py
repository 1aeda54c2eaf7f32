"""Correct, restore and the audit in the console, in a real browser (issue 36): a person edits a memory
(the text prefilled, a confirmation), restores a forgotten one, reads the audit with both sides' texts,
filters it and reverts selected judgments behind a confirmation - a failure shown in red, not as a
success - and never sees another agent's private memory; at 390 px nothing scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, expect

from tests.service.conftest import Service, sign_in
from tests.service.test_console import shot

NS = "console/corrections"
SECRET = "Alice's private note: the lab door code is 8080."


@pytest.fixture(scope="module")
def seeded(service: Service) -> dict[str, str]:
    ids: dict[str, str] = {}
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": "bob"}).status_code in (200, 201)

        def retain(content: str, visibility: str = "team") -> str:
            answer = alice.post("/v1/memories", json={"content": content, "namespace": NS, "visibility": visibility})
            assert answer.status_code == 200, answer.text
            return str(answer.json()["memory_id"])

        ids["edit"] = retain("The design review happens every second Tuesday.")
        ids["forgotten"] = retain("The guest wifi password rotates monthly.")
        assert alice.post(f"/v1/memories/{ids['forgotten']}/forget", json={"reason": "outdated"}).status_code == 200
        ids["private"] = retain(SECRET, "private")
        answer = alice.post(f"/v1/memories/{ids['private']}/correct", json={"content": SECRET + " (changed)"})
        assert answer.status_code == 200, answer.text
    return ids


async def test_a_person_corrects_restores_and_audits_in_the_console(
    browser: Browser, service: Service, seeded: dict[str, str]
) -> None:
    page = await sign_in(browser, service, "alice", f"/console/memories/{seeded['edit']}")
    await page.get_by_text("Correct this memory…").click()
    box = page.get_by_label("Corrected text")
    await expect(box).to_have_value("The design review happens every second Tuesday.")  # prefilled
    await box.fill("The design review happens every second Thursday.")
    await page.get_by_label("Reason").first.fill("the calendar moved")
    await page.get_by_label("Save it as a new version").check()  # the confirmation
    await shot(page, "memory-correct")
    await page.get_by_role("button", name="Save correction").click()
    await expect(page.locator("#done")).to_contain_text("corrected")
    await expect(page.locator("#content")).to_have_text("The design review happens every second Thursday.")
    await expect(page.locator(".versions")).to_contain_text("every second Tuesday")
    old = await page.goto(f"{service.url}/console/memories/{seeded['edit']}")
    assert old is not None and old.ok
    why = page.locator(".version-why")  # the later version says who made it and why
    await expect(why).to_contain_text("correction by alice")
    await expect(why).to_contain_text("the calendar moved")

    await page.goto(f"{service.url}/console/memories/{seeded['forgotten']}")
    await expect(page.locator("#state")).to_have_text("forgotten")
    await page.get_by_label("Bring it back to recall").check()
    await page.get_by_role("button", name="Restore").click()
    await expect(page.locator("#done")).to_contain_text("restored")
    await expect(page.locator("#state")).to_have_text("current")

    await page.goto(f"{service.url}/console/audit?namespace={NS.replace('/', '%2F')}")
    rows = page.locator("#audit > li")
    await expect(rows.first).to_be_visible()
    await expect(page.locator("#counts")).to_contain_text("person · correction")
    correction = rows.filter(has_text="every second Thursday")
    await expect(correction).to_contain_text("every second Tuesday")  # before -> after
    await expect(correction).to_contain_text("Why: ")
    assert "lab door code" in await page.content()  # her own private memory: hers to see
    await shot(page, "audit")

    # filter by kind, then revert the correction and the (already reverted) forget together
    await page.get_by_label("Kind").select_option("correction")
    await page.get_by_role("button", name="Show").click()
    await expect(rows).to_have_count(2)
    await correction.get_by_role("checkbox").check()
    await page.get_by_text("Revert selected…").click()
    await page.get_by_label("Undo each selected judgment").check()
    await page.get_by_role("button", name="Revert selected").click()
    await expect(page.locator("#results")).to_contain_text("Reverted")
    await expect(page.locator("#results .audit-failed")).to_have_count(0)
    await shot(page, "audit-reverted")

    # a failed revert is shown as a failure, in red: the forget was reverted by the restore already
    await page.goto(f"{service.url}/console/audit?namespace={NS.replace('/', '%2F')}&kind=forget")
    forget = rows.filter(has_text="guest wifi")
    await expect(forget).to_contain_text("reverted")
    assert await forget.get_by_role("checkbox").count() == 0  # nothing to select on a reverted one

    # bob reads the namespace: alice's private memory is in none of its judgments for him
    bob = await sign_in(browser, service, "bob", f"/console/audit?namespace={NS.replace('/', '%2F')}")
    await expect(bob.locator("#audit > li").first).to_be_visible()
    assert "lab door code" not in await bob.content() and seeded["private"] not in await bob.content()
    await bob.context.close()
    await page.context.close()


async def test_a_failed_revert_is_shown_in_red(browser: Browser, service: Service, seeded: dict[str, str]) -> None:
    page = await sign_in(browser, service, "alice", f"/console/audit?namespace={NS.replace('/', '%2F')}")
    # two reverts of the same judgment from two tabs: the second one fails, and says so
    first = page.locator("#audit > li").filter(has_text="person").first
    await expect(first).to_be_visible()
    other = await page.context.new_page()
    await other.goto(page.url)
    for tab in (page, other):
        await tab.locator("#audit > li input[type=checkbox]").first.check()
        await tab.get_by_text("Revert selected…").click()
        await tab.get_by_label("Undo each selected judgment").check()
    await page.get_by_role("button", name="Revert selected").click()
    await expect(page.locator("#results")).to_contain_text("Reverted")
    await other.get_by_role("button", name="Revert selected").click()
    failed = other.locator("#results .audit-failed")
    await expect(failed).to_contain_text("Not reverted")
    colour = await failed.evaluate("e => getComputedStyle(e).color")
    danger = await other.evaluate(
        "() => { const d = document.createElement('span'); d.style.color = 'var(--danger)'; document.body.append(d);"
        " const c = getComputedStyle(d).color; d.remove(); return c; }"
    )
    assert colour == danger
    await shot(other, "audit-failed")
    await page.context.close()


async def test_the_audit_and_the_memory_forms_fit_390_px_in_dark_mode(
    browser: Browser, service: Service, seeded: dict[str, str]
) -> None:
    page = await sign_in(browser, service, "alice", f"/console/audit?namespace={NS.replace('/', '%2F')}")
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.emulate_media(color_scheme="dark")
    for path in (f"/console/audit?namespace={NS.replace('/', '%2F')}", f"/console/memories/{seeded['edit']}"):
        await page.goto(service.url + path)
        await expect(page.locator("h1")).not_to_have_text("Error")
        await page.evaluate("document.querySelectorAll('main details').forEach(d => d.open = true)")
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390, path
        background = await page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert sum(int(v) for v in background[background.index("(") + 1 : -1].split(",")[:3]) / 3 < 60, background
        await shot(page, "dark-390-" + ("audit" if "audit" in path else "memory-correct"))
    await page.context.close()
