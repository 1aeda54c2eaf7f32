"""The console's connectors pages in a real browser against the running service: a connector's
recent syncs show what each did and what its source skipped, by reason; an agent that may not write
the connector's namespace sees neither the connector nor its page."""

from __future__ import annotations

import time
from pathlib import Path

from playwright.async_api import Browser, expect

from tests.service.conftest import Service, sign_in
from tests.service.test_console import shot
from tests.unit.test_chat_notices import INTEGRATION, slack_zip


def _synced(service: Service, name: str) -> dict:
    with service.client("admin") as admin:
        started = admin.post(f"/v1/connectors/{name}/sync")
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            run = admin.get(f"/v1/connectors/{name}/runs/{run_id}").json()
            if run["status"] != "running":
                return run
            time.sleep(0.3)
    raise AssertionError(f"connector {name}'s sync still running after 120 s")


async def test_a_connectors_syncs_show_what_its_source_skipped(browser: Browser, service: Service) -> None:
    shared = Path(service.settings.connector_roots[0])
    shared.mkdir(parents=True, exist_ok=True)
    talk = [{"type": "message", "user": "U01", "text": "Who is on call tonight?", "ts": "1705312700.000050"}]
    export = slack_zip(shared / "ops-slack.zip", {"ops/2024-01-15.json": talk + INTEGRATION})
    body = {"name": "ops-slack", "kind": "slack-export", "namespace": "proj", "config": {"path": str(export)}}
    with service.client("admin") as admin:
        made = admin.post("/v1/connectors", json=body)
        assert made.status_code == 201, made.text
    run = _synced(service, "ops-slack")
    assert run["status"] == "done" and run["counts"]["skipped"] == {"file": 1, "system": 1, "deleted": 1}

    page = await sign_in(browser, service, "alice", "/console/connectors")  # alice owns proj
    row = page.locator("#connectors tr", has_text="ops-slack")
    await expect(row).to_contain_text("slack-export")
    await expect(row).to_contain_text("ok")
    await row.get_by_role("link", name="ops-slack").click()
    await expect(page.locator("h1")).to_have_text("Connector ops-slack")
    await expect(page.locator("#last-sync")).not_to_have_text("-")
    runs = page.locator("#runs tbody tr")
    await expect(runs).to_have_count(1)
    await expect(runs.first).to_contain_text("listed 6")
    skipped = runs.first.locator(".skipped")
    for said in ("1 deleted", "1 file", "1 system"):
        await expect(skipped).to_contain_text(said)
    await shot(page, "connector")
    await page.context.close()

    page = await sign_in(browser, service, "carol", "/console/connectors")  # carol may not write proj
    await expect(page.locator("#connectors tr", has_text="ops-slack")).to_have_count(0)
    answer = await page.goto(f"{service.url}/console/connectors/ops-slack")
    assert answer is not None and answer.status == 404
    await page.context.close()
