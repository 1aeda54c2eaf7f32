"""The console in a real browser (Debian's chromium, driven by Playwright) against the running service:
sign in, browse, open a memory, recall with its score breakdown, revert a supersession, and the
safety rules: no other agent's private memory through the pages or a crafted URL, no script from a
memory's text, no change without its CSRF token, Arabic rendered right to left. Each page is
screenshotted; ``CABRAIN_TEST_SHOTS=docs/console`` saves them where the README shows them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from tests.service.conftest import Service, sign_in

NS = "console/team"
PRIVATE_NS = "console/alice-private"
SHOTS = Path(os.environ.get("CABRAIN_TEST_SHOTS") or Path(tempfile.gettempdir()) / "cabrain-console-shots")
SCRIPT = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2"> and <a href="javascript:window.__pwned=3">a link</a>'
ARABIC = "يعمل خادم الفواتير على قاعدة بيانات PostgreSQL في مركز البيانات بالرياض."
SECRET_TEXT = "Alice's private note: the offsite backup passphrase hint is the blue lighthouse."


@pytest.fixture(scope="module")
def seeded(service: Service) -> dict[str, str]:
    """alice's team namespace (bob may read it) and her private one, with the memories the tests read."""
    ids: dict[str, str] = {}
    with service.client("alice") as alice:
        for name in (NS, PRIVATE_NS):
            assert alice.post("/v1/namespaces", json={"name": name}).status_code == 201
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": "bob"}).status_code in (200, 201)

        def retain(content: str, namespace: str = NS, visibility: str = "team") -> dict:
            body = {"content": content, "namespace": namespace, "visibility": visibility}
            response = alice.post("/v1/memories", json=body)
            assert response.status_code == 200, response.text
            return response.json()

        ids["old"] = retain("The deploy freeze starts on December 10.")["memory_id"]
        new = retain("The deploy freeze now starts on December 17.")
        assert new["decision"] == "UPDATE" and new["superseded"] == [ids["old"]]
        ids["new"] = new["memory_id"]
        ids["script"] = retain(SCRIPT)["memory_id"]
        ids["arabic"] = retain(ARABIC)["memory_id"]
        ids["pager"] = retain("Kafka topics of the billing service are partitioned by customer id.")["memory_id"]
        ids["private"] = retain(SECRET_TEXT, PRIVATE_NS, "private")["memory_id"]
    return ids


async def shot(page: Page, name: str, *, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


async def test_sign_in_browse_open_recall_and_revert(browser: Browser, service: Service, seeded: dict) -> None:
    page = await sign_in(browser, service, "alice")
    assert page.url.startswith(f"{service.url}/console/memories")
    # the session id (never the key) is in an HttpOnly, SameSite=Strict cookie for /console, never in a URL or the page
    [cookie] = [c for c in await page.context.cookies() if c["name"] == "cabrain_console"]
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/console")
    assert service.keys["alice"] not in page.url and service.keys["alice"] not in await page.content()
    assert await page.evaluate("document.cookie") == ""

    # browse: the team namespace, current memories only, then with history
    await page.get_by_label("Namespace").select_option(NS)
    await page.get_by_role("button", name="Show").click()
    rows = page.locator("#memories li")
    await expect(rows).to_have_count(4)  # the old freeze date is superseded
    await page.get_by_label("with history").check()
    await page.get_by_role("button", name="Show").click()
    await expect(rows).to_have_count(5)
    await expect(page.locator("#memories li.old")).to_contain_text("December 10")
    await shot(page, "memories")

    # the <script> memory is shown as text and runs nothing
    await expect(page.get_by_text("window.__pwned = 1", exact=False)).to_be_visible()
    assert await page.evaluate("window.__pwned") is None
    # Arabic renders right to left, English left to right
    arabic = page.locator("#memories .content", has_text="خادم الفواتير")
    assert await arabic.evaluate("e => getComputedStyle(e).direction") == "rtl"
    english = page.locator("#memories .content", has_text="Kafka topics")
    assert await english.evaluate("e => getComputedStyle(e).direction") == "ltr"

    # a memory's page: its content, provenance and the judgment that superseded it
    await page.locator("#memories li.old a").first.click()
    await expect(page.locator("#content")).to_have_text("The deploy freeze starts on December 10.")
    await expect(page.locator("#state")).to_have_text("superseded")
    await expect(page.locator(".judgment")).to_contain_text("supersede")
    await shot(page, "memory")

    # revert the supersession (behind a confirmation): the old memory is current again
    await page.get_by_text("Revert…").click()
    await page.get_by_label("Reason").first.fill("the freeze did not move")
    await page.get_by_role("button", name="Revert").click()  # unconfirmed: the form is not sent
    await expect(page.locator("#state")).to_have_text("superseded")
    await page.get_by_label("Undo this supersede").check()
    await page.get_by_role("button", name="Revert").click()
    await expect(page.locator("#done")).to_contain_text("reverted")
    await expect(page.locator("#state")).to_have_text("current")
    with service.client("alice") as alice:
        assert alice.get(f"/v1/memories/{seeded['old']}").json()["memory"]["invalid_at"] is None

    # the recall playground: hits with their score breakdown and the time of each stage
    # (tests/service/test_console_playground.py takes it apart)
    await page.get_by_role("link", name="Recall").click()
    await page.get_by_label("Query").fill("when does the deploy freeze start")
    await page.get_by_label("Namespace").select_option(NS)
    await page.get_by_role("button", name="Recall").click()
    first = page.locator("#hits > li").first
    await expect(first).to_contain_text("deploy freeze")
    await expect(first.locator(".places")).to_contain_text("vector #")
    await expect(page.locator("#timings")).to_contain_text("total")
    await shot(page, "recall")

    # Arabic search in the playground
    await page.get_by_label("Query").fill("قاعدة بيانات الفواتير")
    await page.get_by_role("button", name="Recall").click()
    await expect(page.locator("#hits li").first).to_contain_text("خادم الفواتير")

    # the memory's page shows that it was recalled (recalls are recorded off the response path) by an
    # agent's recall; the playground's are looks, not uses
    with service.client("alice") as alice:
        assert alice.post("/v1/recall", json={"query": "قاعدة بيانات الفواتير", "namespace": NS}).status_code == 200
    await page.locator("#hits > li").first.get_by_role("link", name="open").click()
    access = page.locator("#access")
    for _ in range(20):
        if "recall" in (await access.text_content() if await access.count() else ""):
            break
        await page.wait_for_timeout(500)
        await page.reload()
    await expect(access).to_contain_text("recall")
    await expect(access).to_contain_text("alice")
    await page.context.close()


async def test_pages_fit_a_phone_and_work_from_the_keyboard(browser: Browser, service: Service, seeded: dict) -> None:
    context = await browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = await context.new_page()
    await page.goto(service.url + "/console/login")
    assert await page.evaluate("document.activeElement.id") == "key"  # the key field has the focus
    await page.keyboard.type(service.keys["alice"])
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    await page.keyboard.press("Tab")  # the first stop is the skip link, which moves the focus to the page
    assert await page.evaluate("document.activeElement.textContent") == "Skip to content"
    await page.keyboard.press("Enter")
    assert await page.evaluate("document.activeElement.id") == "main"
    for path in (
        f"/console/memories?namespace={urllib.parse.quote(NS)}",
        f"/console/recall?q=deploy+freeze&namespace={urllib.parse.quote(NS)}",
        f"/console/memories/{seeded['new']}",
        "/console/health",
    ):
        await page.goto(service.url + path)
        overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{path} is {overflow}px wider than a phone"
    await page.goto(f"{service.url}/console/recall?namespace={urllib.parse.quote(NS)}")
    await page.keyboard.press("/")  # the console's shortcut to the query field
    assert await page.evaluate("document.activeElement.name") == "q"
    await context.close()


async def test_another_agent_sees_nothing_private(browser: Browser, service: Service, seeded: dict) -> None:
    page = await sign_in(browser, service, "carol")
    # carol may read neither namespace: neither is offered, and nothing of them is shown
    options = await page.locator("select[name=namespace] option").all_text_contents()
    assert NS not in options and PRIVATE_NS not in options
    # crafted URLs: the private memory is the API's 404, the private namespace lists nothing
    response = await page.goto(f"{service.url}/console/memories/{seeded['private']}")
    assert response is not None and response.status == 404
    await expect(page.locator("#error-message")).to_contain_text("does not exist or is not visible")
    assert "lighthouse" not in await page.content()
    await page.goto(f"{service.url}/console/memories?namespace={urllib.parse.quote(PRIVATE_NS)}&history=1")
    assert "lighthouse" not in await page.content()
    await page.goto(f"{service.url}/console/recall?q=backup+passphrase&namespace={urllib.parse.quote(PRIVATE_NS)}")
    assert "lighthouse" not in await page.content()
    await page.context.close()

    # bob holds a read grant on the team namespace, not on alice's private one
    page = await sign_in(browser, service, "bob")
    response = await page.goto(f"{service.url}/console/memories/{seeded['private']}")
    assert response is not None and response.status == 404
    response = await page.goto(f"{service.url}/console/memories/{seeded['pager']}")
    assert response is not None and response.status == 200
    await page.context.close()


@contextlib.contextmanager
def _signed_in_client(service: Service, agent: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=60, follow_redirects=False) as client:
        nonce = client.get("/console/login").cookies["cabrain_console_login"]
        done = client.post("/console/login", data={"key": service.keys[agent], "csrf": nonce, "next": "/console"})
        assert done.status_code == 303, done.text
        yield client


def test_changes_need_their_csrf_token_and_this_origin(service: Service, seeded: dict) -> None:
    with service.client("alice") as alice:  # a namespace of its own: the browsing test counts NS's memories
        assert alice.post("/v1/namespaces", json={"name": "console/csrf"}).status_code == 201
        target = alice.post(
            "/v1/memories", json={"content": "The on-call rota changes on Mondays.", "namespace": "console/csrf"}
        ).json()["memory_id"]
    with _signed_in_client(service, "alice") as client:
        page = client.get(f"/console/memories/{target}")
        assert page.status_code == 200
        token = page.text.split('name="csrf" value="')[1].split('"')[0]
        url = f"/console/memories/{target}/forget"
        unconfirmed = client.post(url, data={"csrf": token})
        assert unconfirmed.status_code == 400 and "confirmation" in unconfirmed.text
        refused = client.post(url, data={"confirm": "yes"})  # no token
        assert refused.status_code == 403 and "CSRF" in refused.text
        assert client.post(url, data={"confirm": "yes", "csrf": "0" * 64}).status_code == 403
        other_site = client.post(url, data={"confirm": "yes", "csrf": token}, headers={"Origin": "http://evil.example"})
        assert other_site.status_code == 403
        with service.client("alice") as alice:
            assert alice.get(f"/v1/memories/{target}").json()["memory"]["invalid_at"] is None
        done = client.post(url, data={"confirm": "yes", "csrf": token, "reason": "rota moved"})
        assert done.status_code == 303
        with service.client("alice") as alice:
            assert alice.get(f"/v1/memories/{target}").json()["memory"]["invalid_at"] is not None

    # signing in needs the sign-in form's own nonce, and a bad key signs nobody in
    with httpx.Client(base_url=service.url, timeout=60) as client:
        bare = client.post("/console/login", data={"key": service.keys["alice"]})
        assert bare.status_code == 403 and "cabrain_console" not in bare.cookies
        nonce = client.get("/console/login").cookies["cabrain_console_login"]
        bad = client.post("/console/login", data={"key": "cbk_not-a-key", "csrf": nonce})
        assert bad.status_code == 401 and "cabrain_console" not in bad.cookies
        # every page sets a policy that runs no inline script
        policy = client.get("/console/login").headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    # a page without a session leads to sign-in, and back; no open redirect after it
    with httpx.Client(base_url=service.url, timeout=60) as client:
        answer = client.get("/console/recall?q=x")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/console/login?next=%2Fconsole%2Frecall%3Fq%3Dx"
        page = client.get("/console/login?next=https://evil.example/steal")
        assert 'value="/console/memories"' in page.text
        feed = client.get("/console/capture.json?namespace=proj")  # a script's fetch: the API's 401
        assert feed.status_code == 401 and feed.json()["error"]["type"] == "unauthenticated"


SLEEPY = "console/sleepy"
WORDINGS = (  # two wordings of one fact: sleep's dedup merges them
    "The staging database runs PostgreSQL 16 on host db-stg-1.",
    "Staging's database is PostgreSQL 16 on the host db-stg-1.",
)
THIRD = "The staging database runs PostgreSQL 16 on the host db-stg-1."


async def test_an_admin_runs_a_sleep_cycle_and_reads_its_report(browser: Browser, service: Service) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": SLEEPY}).status_code == 201
        for text in WORDINGS:
            item = {"content": text, "namespace": SLEEPY, "visibility": "team", "network": "fact"}
            stored = alice.post("/v1/memories/batch", json={"items": [item], "decide": False})
            assert stored.status_code == 200, stored.text

    page = await sign_in(browser, service, "admin", "/console/sleep")
    await page.get_by_text("Start a sleep cycle…").click()
    await page.get_by_label("Namespaces").fill(SLEEPY)
    await page.get_by_label("Steps").fill("dedup")
    await page.get_by_role("button", name="Start").click()
    await expect(page).to_have_url(re.compile(r"/console/sleep/[0-9a-f-]{36}$"))
    run_url = page.url
    await expect(page.locator("#run-status")).to_have_text("done", timeout=120_000)  # the page refreshes itself
    await expect(page.locator("#steps")).to_contain_text("dedup")
    await expect(page.locator("#steps")).to_contain_text("merged 1")
    await expect(page.locator("#judgments .judgment")).to_have_count(1)
    await shot(page, "sleep")
    await page.get_by_role("link", name="Sleep").click()
    await expect(page.locator("#runs")).to_contain_text(SLEEPY)
    await page.context.close()

    # alice owns the namespace: she sees the run and undoes its merge; she may not start one
    page = await sign_in(browser, service, "alice", "/console/sleep")
    assert await page.get_by_text("Start a sleep cycle…").count() == 0
    await page.goto(run_url)
    judgment = page.locator("#judgments .judgment")
    await judgment.get_by_text("Revert…").click()
    await judgment.get_by_label("Undo this").check()
    await judgment.get_by_role("button", name="Revert").click()
    await expect(page.locator("#done")).to_contain_text("reverted")
    with service.client("alice") as alice:
        recalled = alice.post("/v1/recall", json={"query": "staging database host", "namespace": SLEEPY})
    assert sorted(h["memory"]["content"] for h in recalled.json()["hits"]) == sorted(WORDINGS)  # both current again
    await page.context.close()

    # a third wording comes, a second run merges it; alice reads what the run did and reverts the whole
    # run, then the revert (dedup compares what is new since its last run: the reverted pair stays apart)
    with service.client("alice") as alice:
        item = {"content": THIRD, "namespace": SLEEPY, "visibility": "team", "network": "fact"}
        assert alice.post("/v1/memories/batch", json={"items": [item], "decide": False}).status_code == 200
    with service.client("admin") as admin:
        started = admin.post("/v1/sleep/runs", json={"namespaces": [SLEEPY], "steps": ["dedup"]})
        assert started.status_code == 202, started.text
        second = started.json()["run_id"]
        for _ in range(600):
            if admin.get(f"/v1/sleep/runs/{second}").json()["status"] != "running":
                break
            await asyncio.sleep(0.2)
    page = await sign_in(browser, service, "alice", f"/console/sleep/{second}")
    await expect(page.locator("#did-merged")).to_contain_text("db-stg-1")
    await expect(page.locator("#did-facts")).to_contain_text("None.")
    await expect(page.locator("#did-sittings")).to_contain_text("None.")
    await page.get_by_text("Revert this run…").click()
    await page.locator("#revert-run").get_by_label("Undo everything").check()
    await page.get_by_role("button", name="Revert the run").click()
    await expect(page.locator("#done")).to_contain_text("reverted")
    await expect(page.locator("#did-merged")).to_contain_text("(reverted)")
    assert await page.locator("#revert-run").count() == 0  # nothing left to revert
    with service.client("alice") as alice:
        recalled = alice.post("/v1/recall", json={"query": "staging database host", "namespace": SLEEPY})
    assert len(recalled.json()["hits"]) == 3
    undo = page.locator("#run-reverts .judgment")
    await undo.get_by_text("Revert…").click()
    await undo.get_by_label("Undo this").check()
    await undo.get_by_role("button", name="Revert").click()
    await expect(page.locator("#done")).to_contain_text("reverted")
    await expect(page).to_have_url(re.compile(rf"/console/sleep/{second}\?done=reverted$"))
    with service.client("alice") as alice:
        recalled = alice.post("/v1/recall", json={"query": "staging database host", "namespace": SLEEPY})
    assert THIRD not in {h["memory"]["content"] for h in recalled.json()["hits"]}  # the run's merge is back
    await page.context.close()

    # carol reads neither the namespace nor the run, even by its URL
    page = await sign_in(browser, service, "carol", "/console/sleep")
    assert SLEEPY not in await page.content()
    response = await page.goto(run_url)
    assert response is not None and response.status == 404
    await page.context.close()


async def test_a_run_that_waits_says_why_and_an_admin_cancels_it(browser: Browser, service: Service) -> None:
    """A run whose driver is gone (it holds no namespace lock): its page says why it waited, and the
    admin's cancel ends it; a reader sees no cancel button."""
    import uuid

    import asyncpg

    with service.client("alice") as alice:
        alice.post("/v1/namespaces", json={"name": "console/stuck"})
    run_id = uuid.uuid4()
    conn = await asyncpg.connect(service.dsn)
    try:
        await conn.execute(
            "INSERT INTO sleep_runs (id, status, steps, namespaces, note) VALUES ($1, 'running', '{dedup}', "
            "'{console/stuck}', 'waiting for room on the cluster: dedup console/stuck asks for 1 CPU')",
            run_id,
        )
    finally:
        await conn.close()
    page = await sign_in(browser, service, "alice", f"/console/sleep/{run_id}")
    await expect(page.locator("#run-note")).to_contain_text("waiting for room on the cluster")
    assert await page.locator("#cancel-run").count() == 0  # cancelling is an admin's
    await page.context.close()
    page = await sign_in(browser, service, "admin", f"/console/sleep/{run_id}")
    await page.locator("#cancel-run").get_by_role("button", name="Cancel this run").click()
    await expect(page.locator("#run-status")).to_have_text("cancelled")
    await expect(page.locator("#run-note")).to_contain_text("its driver was gone")
    await page.context.close()


async def test_health_shows_each_part_and_admins_the_metrics(browser: Browser, service: Service) -> None:
    with service.client("alice") as alice:  # a recall or two, so the latency table has a row
        for _ in range(2):
            assert alice.post("/v1/recall", json={"query": "deploy freeze", "namespace": "proj"}).status_code == 200
    page = await sign_in(browser, service, "admin", "/console/health")
    parts = page.locator("#parts tbody tr")
    await expect(parts).to_have_count(5)
    for name in ("service and models", "database (hot tier)", "Redis (L1 cache)", "cold tier (Iceberg)"):
        await expect(parts.filter(has_text=name)).to_contain_text("ok")
    await expect(page.locator("#latency")).to_contain_text("/v1/recall", timeout=30_000)
    await expect(page.locator("#cache")).to_contain_text("L1 cache")
    await shot(page, "health")
    await page.context.close()

    page = await sign_in(browser, service, "bob", "/console/health")
    await expect(page.locator("#parts tbody tr")).to_have_count(5)
    assert await page.locator("#latency").count() == 0  # the metrics are an admin's
    await page.context.close()


GRAPH_NS = "console/graph"
TOOLS = ("Kafka", "Redis", "Grafana", "Terraform", "Nginx", "Jenkins", "Vault", "Consul")


async def test_entities_list_summaries_and_a_large_neighbourhood_graph(browser: Browser, service: Service) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": GRAPH_NS}).status_code == 201
        items = [
            {
                "content": f"The Valkey cluster {i} backs the {TOOLS[i % len(TOOLS)]} pipeline of Team{i % 97}.",
                "namespace": GRAPH_NS,
                "visibility": "team",
            }
            for i in range(1200)
        ]
        for start in range(0, len(items), 200):
            stored = alice.post("/v1/memories/batch", json={"items": items[start : start + 200], "decide": False})
            assert stored.status_code == 200, stored.text
        listed = alice.get("/v1/entities", params={"namespace": GRAPH_NS, "q": "valkey"}).json()
        assert [e["name"] for e in listed["entities"]] == ["Valkey"]

    page = await sign_in(browser, service, "alice", "/console/entities")
    await page.get_by_label("Namespace").select_option(GRAPH_NS)
    await page.get_by_label("Name contains").fill("valkey")
    await page.get_by_role("button", name="Find").click()
    await page.locator("#entities a", has_text="Valkey").click()
    await expect(page.locator("h1")).to_have_text("Valkey")
    await page.get_by_label("Memories in the graph").select_option("2000")
    await page.get_by_role("button", name="Draw").click()
    status = page.locator("#graph-status")
    await expect(status).to_contain_text("memories", timeout=30_000)
    nodes = int(await page.locator("#graph").get_attribute("data-nodes") or 0)
    assert nodes == 1 + 1200 + len(TOOLS) + 97  # the entity, its memories and the entities they mention
    await expect(page.locator("#graph-list a", has_text="entity: Kafka")).to_have_count(1)
    await page.wait_for_timeout(1500)  # the layout settles
    await shot(page, "entity", full_page=False)
    # the canvas answers a click: the centre node opens the entity's page again
    box = await page.locator("#graph").bounding_box()
    assert box is not None
    await page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    await expect(page).to_have_url(re.compile(r"/console/entity\?"))
    await page.context.close()

    page = await sign_in(browser, service, "carol", "/console/entities")
    response = await page.goto(
        f"{service.url}/console/graph.json?namespace={urllib.parse.quote(GRAPH_NS)}&entity=Valkey"
    )
    assert response is not None and response.status == 404
    assert "Kafka" not in await page.content()
    await page.context.close()


SHARED_NS = "console/shared"


async def test_admin_manages_agents_and_keys_and_owners_share(browser: Browser, service: Service) -> None:
    page = await sign_in(browser, service, "admin", "/console/agents")
    await page.get_by_label("Id").fill("dora")
    await page.get_by_label("Display name").fill("دورا")
    await page.get_by_role("button", name="Create the agent and its key").click()
    key = (await page.locator("#new-key-value").text_content() or "").strip()
    assert key.startswith("cbk_") and key not in page.url
    await expect(page.locator("#agents")).to_contain_text("dora")
    await shot(page, "agents")
    admin_page = page

    # dora signs in with the key she was shown once; alice shares a namespace, dora accepts it
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": SHARED_NS}).status_code == 201
        body = {"content": "The shared runbook lives in the ops wiki.", "namespace": SHARED_NS, "visibility": "team"}
        assert alice.post("/v1/memories", json=body).status_code == 200
    alice_page = await sign_in(browser, service, "alice", "/console/namespaces")
    section = alice_page.locator(f'section[data-namespace="{SHARED_NS}"]')
    await section.get_by_label("Share with agent").fill("dora")
    await section.get_by_role("button", name="Share").click()
    await expect(alice_page.locator("#done")).to_contain_text("shared")
    await expect(alice_page.locator(f'section[data-namespace="{SHARED_NS}"] .grants')).to_contain_text("offered")
    await shot(alice_page, "namespaces")

    context = await browser.new_context()
    dora = await context.new_page()
    await dora.goto(service.url + "/console/namespaces")
    await dora.get_by_label("API key").fill(key)
    await dora.get_by_role("button", name="Sign in").click()
    offer = dora.locator(f'section[data-namespace="{SHARED_NS}"]')
    await offer.get_by_role("button", name="Accept").click()
    await expect(dora.locator("#done")).to_contain_text("accepted")
    await dora.goto(f"{service.url}/console/memories?namespace={urllib.parse.quote(SHARED_NS)}")
    await expect(dora.locator("#memories")).to_contain_text("ops wiki")
    assert await dora.get_by_role("link", name="Agents").count() == 0  # not an admin's menu
    response = await dora.goto(service.url + "/console/agents")
    assert response is not None and response.status == 403

    # alice revokes the grant: dora reads nothing of it any more
    await alice_page.reload()
    await alice_page.get_by_role("button", name="Revoke dora").click()
    await expect(alice_page.locator("#done")).to_contain_text("revoked")
    await dora.goto(f"{service.url}/console/memories?namespace={urllib.parse.quote(SHARED_NS)}")
    assert "ops wiki" not in await dora.content()

    # the admin revokes dora's key: her next click leads to the sign-in page
    await admin_page.get_by_role("link", name="dora").click()
    await admin_page.get_by_text("Revoke…").click()
    await admin_page.get_by_label("Refuse this key from now on").check()
    await admin_page.get_by_role("button", name=re.compile("^Revoke cbk_")).click()
    await expect(admin_page.locator("#done")).to_contain_text("revoked")
    await dora.goto(service.url + "/console/memories")
    await expect(dora).to_have_url(re.compile(r"/console/login\?next="))
    await context.close()

    # and disables her, behind its confirmation; an agent that is not an admin may not
    await admin_page.get_by_text("Disable this agent…").click()
    await admin_page.get_by_label("Its keys stop working; its memories stay").check()
    await admin_page.get_by_role("button", name="Disable dora").click()
    await expect(admin_page.locator("#agent-state")).to_contain_text("disabled")
    with _signed_in_client(service, "alice") as client:
        token = client.get("/console/namespaces").text.split('name="csrf" value="')[1].split('"')[0]
        refused = client.post("/console/agents/bob/disable", data={"csrf": token, "confirm": "yes"})
        assert refused.status_code == 403
    with service.client("admin") as admin:
        [bob] = [a for a in admin.get("/v1/agents").json()["agents"] if a["id"] == "bob"]
        assert bob["disabled_at"] is None
    await alice_page.context.close()
    await admin_page.context.close()


def _capture(service: Service, text: str, session: str) -> str:
    item = {"content": text, "source_kind": "claude_code", "source_ref": session, "metadata": {"hook": "PostToolUse"}}
    with service.client("alice") as alice:
        answer = alice.post("/v1/capture", json={"project": "github.com/acme/console-demo", "items": [item]})
    assert answer.status_code == 202, answer.text
    return answer.json()["namespace"]


async def test_the_capture_feed_is_live_and_shows_redactions(browser: Browser, service: Service) -> None:
    token = "ghp_" + "Z7" * 18
    namespace = _capture(service, f"ran git push with GITHUB_TOKEN={token} on the release branch", "sess-console-1")
    page = await sign_in(browser, service, "alice", "/console/capture")
    await page.get_by_label("Project (namespace)").select_option(namespace)
    await page.get_by_role("button", name="Show").click()
    feed = page.locator("#feed")
    for _ in range(30):  # the inbox worker retains captures in the background
        if await feed.locator("li").count():
            break
        await page.wait_for_timeout(1000)
        await page.reload()
    await expect(feed.locator("li").first).to_contain_text("release branch")
    await expect(feed.locator("mark.redacted").first).to_have_text("[REDACTED]")
    assert token not in await page.content()

    # live: a capture stored while the page is open appears without a reload
    _capture(service, "opened a pull request for the console feed", "sess-console-2")
    await expect(feed.locator("li", has_text="pull request for the console feed")).to_have_count(1, timeout=60_000)
    await expect(feed.locator("li")).to_have_count(2)
    await shot(page, "capture")
    await page.context.close()

    page = await sign_in(browser, service, "bob", "/console/capture")  # alice's personal project namespace
    response = await page.goto(f"{service.url}/console/capture.json?namespace={urllib.parse.quote(namespace)}")
    assert response is not None and response.status == 200
    assert (await response.json())["items"] == []
    await page.context.close()


async def test_workflows_registry_clusters_queue_and_report(
    browser: Browser, service: Service, llm_server: str
) -> None:
    with service.client("admin") as admin, service.client("alice") as alice:
        model = {
            "name": "console-frontier",
            "layer": "frontier",
            "provider": "openai",
            "model": "frontier-console",
            "endpoint": f"{llm_server}/v1",
            "cost_in_per_1k": 0.01,
            "cost_out_per_1k": 0.03,
        }
        assert admin.post("/v1/workflows/agents", json=model).status_code == 201
        assert alice.post("/v1/namespaces", json={"name": "console/wf"}).status_code == 201
        task = {
            "namespace": "console/wf",
            "task_type": "json",
            "description": "Extract the invoice number, total and currency as JSON: invoice 7070 from Acme totals 15.00 EUR.",
        }
        assert alice.post("/v1/workflows/dispatch", json=task).status_code == 200
        assert alice.post("/v1/workflows/queue", json={**task, "priority": 3}).status_code == 202
        # what alice reads includes the other tests' tasks: the page shows the report the API gives
        frontier = alice.get("/v1/workflows/report").json()["tasks"]["frontier"]
        assert frontier >= 1

    page = await sign_in(browser, service, "alice", "/console/workflows")
    await expect(page.locator("#models")).to_contain_text("console-frontier")
    await expect(page.locator("#cluster-table")).to_contain_text("console/wf")
    await expect(page.locator("#queue-table")).to_contain_text("console/wf")
    await expect(page.locator("#totals")).to_contain_text(f"frontier {frontier}")
    await expect(page.locator("#costs")).to_contain_text("frontier spent")
    await shot(page, "workflows")
    await page.context.close()

    page = await sign_in(browser, service, "carol", "/console/workflows")  # reads none of it
    assert "console/wf" not in await page.content()
    await expect(page.locator("#totals")).to_contain_text("Tasks done0")
    await page.context.close()
    with service.client("admin") as admin:  # the session's other tests dispatch to frontier models of their own
        assert admin.patch("/v1/workflows/agents/console-frontier", json={"active": False}).status_code == 200


ARCHIVE_NS = "console/archive"


async def test_the_archive_is_browsed_and_searched_from_the_cold_tier(browser: Browser, service: Service) -> None:
    import asyncpg

    from cabrain.sleep.cycle import run_cycle
    from cabrain.types import MemoryInput, Visibility

    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": ARCHIVE_NS}).status_code == 201
    when = datetime.now(UTC) - timedelta(days=90)
    texts = [f"Release {n} of the billing service shipped with its migration plan." for n in range(1, 4)]
    with service.api("alice") as client:
        items = [MemoryInput(t, ARCHIVE_NS, visibility=Visibility.TEAM, valid_at=when) for t in texts]
        items.append(MemoryInput("Alice's private archive note about the lighthouse.", ARCHIVE_NS, valid_at=when))
        client.retain_batch(items, decide=False)
    conn = await asyncpg.connect(service.dsn)
    try:
        await conn.execute(
            "UPDATE memories SET created_at = now() - interval '90 days' WHERE namespace = $1", ARCHIVE_NS
        )
    finally:
        await conn.close()
    settings = service.settings.model_copy(update={"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0})
    report = await run_cycle(settings, service.dsn, namespaces=[ARCHIVE_NS], steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 4

    page = await sign_in(browser, service, "alice", "/console/memories")
    await page.get_by_label("Namespace").select_option(ARCHIVE_NS)
    await page.get_by_role("button", name="Show").click()
    await expect(page.locator("#empty")).to_be_visible()  # nothing is hot any more
    await page.get_by_label("Tier").select_option("cold")
    await page.get_by_role("button", name="Show").click()
    await expect(page.locator("#memories li")).to_have_count(4)
    await expect(page.locator("#memories")).to_contain_text("Release 2 of the billing service")
    await page.get_by_label("Network").select_option("fact")
    await page.get_by_role("button", name="Show").click()
    await expect(page.get_by_role("alert")).to_contain_text("browsed by time and source")
    await page.go_back()
    await page.get_by_role("link", name="Recall").click()
    await page.get_by_label("Query").fill("billing release migration plan")
    await page.get_by_label("Namespace").select_option(ARCHIVE_NS)
    await page.get_by_label("the archive (cold tier)").check()
    await page.get_by_role("button", name="Recall").click()
    await expect(page.locator("#hits li").first).to_contain_text("billing service")
    await expect(page.locator("#timings")).to_contain_text("cold rows read")
    await page.context.close()

    page = await sign_in(browser, service, "bob", "/console/memories")  # no grant: alice's archive stays hers
    await page.goto(f"{service.url}/console/memories?namespace={urllib.parse.quote(ARCHIVE_NS)}&tier=cold&history=1")
    assert "billing service" not in await page.content() and "lighthouse" not in await page.content()
    await page.context.close()
