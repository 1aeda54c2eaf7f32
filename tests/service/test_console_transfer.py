"""Import and export in the console, in chromium (issue 36): a namespace's owner uploads a mem0
file (a dry run first, which writes nothing), watches the upload and the import, reads the summary
and finds the memories; downloads the namespace's export and reads its lines; an agent that may
not write the namespace is refused on the page, with the form as it sent it."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.service.conftest import Service, sign_in
from tests.service.test_console import _signed_in_client, shot

NS = "transfer/notes"
ADMIN_NS = "transfer/admin-notes"
FACTS = ["Dana prefers window seats on long flights.", "Dana works from the Lisbon office on Fridays."]


@pytest.fixture(scope="module")
def mem0_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mem0's get_all answer (v1.1): two memories of one user, and a graph relation (no memory)."""
    memories = [
        {"id": f"mem0-{i}", "memory": text, "user_id": "dana", "created_at": "2025-03-0{i}T10:00:00-07:00"}
        for i, text in enumerate(FACTS, 1)
    ]
    relations = [{"source": "dana", "relationship": "works_at", "target": "lisbon"}]
    path = tmp_path_factory.mktemp("mem0") / "dana-mem0.json"
    path.write_text(json.dumps({"results": memories, "relations": relations}))
    return path


def _contents(service: Service) -> list[str]:
    listed = service.client("alice").get("/v1/memories", params={"namespace": NS})
    assert listed.status_code == 200, listed.text
    return [m["content"] for m in listed.json()["memories"]]


async def test_an_owner_imports_a_mem0_file_dry_run_first_then_downloads_the_export(
    browser: Browser, service: Service, mem0_file: Path, tmp_path: Path
) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
    page = await sign_in(browser, service, "alice", "/console/transfer")

    async def fill(dry_run: bool) -> None:
        form = page.locator("#import-form")
        await form.get_by_label("File", exact=True).set_input_files(str(mem0_file))
        await form.get_by_label("Format").select_option("mem0")
        await form.get_by_label("Into namespace").fill(NS)
        await form.get_by_label("Dry run", exact=False).set_checked(dry_run)

    # the dry run: what would be done, nothing written
    await fill(dry_run=True)
    await page.get_by_role("button", name="Import").click()
    summary = page.locator("#import-summary")
    await expect(summary).to_contain_text("Dry run of dana-mem0.json: nothing was written")
    await expect(summary.locator('[data-count="added"]')).to_have_text("2")
    await expect(summary.locator('[data-count="read"]')).to_have_text("2")
    await expect(summary).to_contain_text("skipped")
    assert _contents(service) == []
    assert page.url == f"{service.url}/console/transfer"  # sent by the page's script, which showed its progress

    # the import itself: the page's status says what happens (uploading, then importing) while the
    # import button waits, then the summary takes its place
    await fill(dry_run=False)
    await page.evaluate(
        """() => {
            window.__states = [];
            const status = document.getElementById("upload-status");
            const button = document.querySelector("#import-form button[type=submit]");
            new MutationObserver(() => window.__states.push([status.textContent, button.disabled]))
                .observe(status, {childList: true, characterData: true, subtree: true});
        }"""
    )
    await page.get_by_role("button", name="Import").click()
    await expect(summary).to_contain_text("Imported dana-mem0.json")
    await expect(summary.locator('[data-count="added"]')).to_have_text("2")
    states = await page.evaluate("window.__states")
    assert states[0] == ["Uploading…", True], states
    assert ["Uploaded; importing…", True] in states, states
    assert ["importing mem0: 2 of 2 records", True] in states, states  # the server's own count
    await expect(page.get_by_role("button", name="Import")).to_be_enabled()  # the fresh form
    assert sorted(_contents(service)) == sorted(FACTS)
    await shot(page, "transfer")
    await page.emulate_media(color_scheme="dark")
    await shot(page, "transfer-dark")
    await page.emulate_media(color_scheme="light")

    # the memories are there, in the console too
    await summary.get_by_role("link", name=NS).click()
    await expect(page.locator("#memories")).to_contain_text(FACTS[0])

    # the export, downloaded: the namespace's lines, its memories among them, its end record last
    await page.goto(f"{service.url}/console/transfer")
    await page.locator("#export-form").get_by_label("Namespace").select_option(NS)
    async with page.expect_download() as waiting:
        await page.get_by_role("button", name="Download the export").click()
    download = await waiting.value
    assert download.suggested_filename == "cabrain-transfer_notes.jsonl"
    saved = tmp_path / download.suggested_filename
    await download.save_as(saved)
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    assert lines[0]["type"] == "cabrain-export" and lines[-1]["type"] == "end"
    assert sorted(r["content"] for r in lines if r["type"] == "memory") == sorted(FACTS)
    await page.context.close()

    # an admin brings a CaBrain export back: not over a namespace another agent owns (said on the
    # page), and its own namespace's export is checked line by line, what is stored already kept
    admin = await sign_in(browser, service, "admin", "/console/transfer")

    async def restore(path: Path) -> None:
        form = admin.locator("#import-form")
        await form.get_by_label("File", exact=True).set_input_files(str(path))
        await form.get_by_label("Format").select_option("cabrain")
        await form.get_by_role("button", name="Import").click()

    await restore(saved)
    await expect(admin.locator("#transfer-error")).to_contain_text("which agent 'alice' owns here")
    with service.client("admin") as api:
        assert api.post("/v1/namespaces", json={"name": ADMIN_NS}).status_code == 201
        body = {"content": "The backup bucket rotates its keys quarterly.", "namespace": ADMIN_NS, "visibility": "team"}
        assert api.post("/v1/memories", json=body).status_code == 200
    await admin.goto(f"{service.url}/console/transfer?namespace={urllib.parse.quote(ADMIN_NS)}")
    async with admin.expect_download() as waiting:
        await admin.get_by_role("button", name="Download the export").click()
    own = tmp_path / "admin-export.jsonl"
    await (await waiting.value).save_as(own)
    await restore(own)
    restored = admin.locator("#import-summary")
    await expect(restored).to_contain_text("Restored")
    await expect(restored).to_contain_text(ADMIN_NS)
    await expect(restored.locator('[data-count="skipped-memory"]')).to_have_text("1")
    await shot(admin, "transfer-restored")
    await admin.context.close()


async def test_an_agent_that_may_not_write_the_namespace_is_refused_on_the_page(
    browser: Browser, service: Service, mem0_file: Path
) -> None:
    with service.client("alice") as alice:
        alice.post("/v1/namespaces", json={"name": NS})  # made by the test above, or now
    before = _contents(service)
    page = await sign_in(browser, service, "bob", "/console/transfer")
    form = page.locator("#import-form")
    await form.get_by_label("File", exact=True).set_input_files(str(mem0_file))
    await form.get_by_label("Format").select_option("mem0")
    await form.get_by_label("Into namespace").fill(NS)
    await form.get_by_role("button", name="Import").click()
    refused = page.locator("#transfer-error")
    await expect(refused).to_contain_text("The import was refused (dana-mem0.json)")
    await expect(refused).to_contain_text(NS)
    assert "POST /v1" not in (await refused.text_content() or "")
    await expect(page.locator("#import-form").get_by_label("Into namespace")).to_have_value(NS)  # the form kept
    assert _contents(service) == before
    await shot(page, "transfer-refused")
    # nor may bob take alice's namespace away
    response = await page.goto(f"{service.url}/console/transfer/export?namespace={urllib.parse.quote(NS)}")
    assert response is not None and response.status in (403, 404)

    # at a phone's width the page fits
    await page.goto(f"{service.url}/console/transfer")
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.reload()
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await shot(page, "transfer-phone")
    await page.context.close()


def test_the_upload_needs_its_csrf_token_a_file_and_a_namespace(service: Service, mem0_file: Path) -> None:
    with _signed_in_client(service, "alice") as client:
        token = client.get("/console/transfer").text.split('name="csrf" value="')[1].split('"')[0]
        files = {"file": ("dana-mem0.json", mem0_file.read_bytes(), "application/json")}
        refused = client.post("/console/transfer/import", data={"format": "mem0", "namespace": NS}, files=files)
        assert refused.status_code == 403 and "CSRF" in refused.text
        nothing = client.post("/console/transfer/import", data={"csrf": token, "format": "mem0", "namespace": NS})
        assert nothing.status_code == 400 and "choose a file" in nothing.text
        nowhere = client.post("/console/transfer/import", data={"csrf": token, "format": "mem0"}, files=files)
        assert nowhere.status_code == 400 and "choose the namespace" in nowhere.text
        odd = client.post(
            "/console/transfer/import", data={"csrf": token, "format": "zip", "namespace": NS}, files=files
        )
        assert odd.status_code == 400 and "format" in odd.text


def test_the_import_streams_its_progress_then_the_page_it_would_have_answered(service: Service) -> None:
    """Asked for it (as the page's script asks), the import answers with its counts as it runs, one
    JSON event a line, then the page the form would have answered, with its status: the summary, or
    a refusal found once the import began (403 in the event, not a lost form)."""
    ns = "transfer/streamed"
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": ns}).status_code == 201
    notes = "\n".join(f"- The rack {i} in Lisbon was moved to row {i + 10} on Tuesday." for i in range(30))
    files = {"file": ("racks.md", f"# Racks\n\n{notes}\n".encode(), "text/markdown")}

    def streamed(agent: str) -> list[dict]:
        with _signed_in_client(service, agent) as client:
            token = client.get("/console/transfer").text.split('name="csrf" value="')[1].split('"')[0]
            data = {"csrf": token, "format": "markdown", "namespace": ns}
            headers = {"Accept": "application/x-ndjson, text/html"}
            with client.stream("POST", "/console/transfer/import", data=data, files=files, headers=headers) as answer:
                assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
                assert "default-src" in answer.headers["content-security-policy"]
                return [json.loads(line) for line in answer.iter_lines() if line]

    events = streamed("alice")
    counts = [e for e in events if "done" in e]
    assert counts and counts[0]["done"] == 0 and counts[0]["total"] == 30 and counts[0]["unit"] == "records"
    assert counts[-1] == {"what": "importing markdown", "done": 30, "total": 30, "unit": "records", "final": True}
    last = events[-1]
    assert last["status"] == 200 and 'id="import-summary"' in last["html"] and "Imported racks.md" in last["html"]
    assert 'data-count="added">30<' in last["html"]
    listed = service.client("alice").get("/v1/memories", params={"namespace": ns, "limit": 100}).json()["memories"]
    assert len(listed) == 30

    refused = streamed("bob")  # bob may not write alice's namespace: found when the import begins
    assert refused[-1]["status"] == 403 and 'id="transfer-error"' in refused[-1]["html"]
    assert f'value="{ns}"' in refused[-1]["html"]  # the form as it was sent
    assert (
        len(service.client("alice").get("/v1/memories", params={"namespace": ns, "limit": 100}).json()["memories"])
        == 30
    )
