"""The recall playground as a person uses it (issue 36, item 8), in chromium against the running
service: a playground query is a look, not a use (access counts, last-used times and recall events
in PostgreSQL are the same after it); each hit is compact, numbered, badged when superseded, linked
by its full id, with its formula behind a disclosure whose numbers recompute its score; timings are
in words; "why not this memory?" says what cut one, and "not found" for one the agent may not read;
with no reranker, the rerank box is disabled and says why. The API's explain answers are checked
against OpenAPI, and a plain recall still counts its hits."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import urllib.parse
import uuid
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from cabrain.serve.console import filters
from cabrain.serve.console.playground import FIELDS, NO_RERANKER, stages
from cabrain.serve.console.render import ENV
from cabrain.store.db import connect
from cabrain.types import MemoryInput, RecallQuery
from tests.conftest import cli_env, run_cli
from tests.service.conftest import Service, sign_in

NS = "playground/team"
PRIVATE_NS = "playground/alice-private"
SHOTS = Path(os.environ.get("CABRAIN_TEST_SHOTS") or Path(tempfile.gettempdir()) / "cabrain-console-shots")
QUESTION = "when does the release freeze start"


async def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def seeded(service: Service) -> dict[str, str]:
    ids: dict[str, str] = {}
    with service.client("alice") as alice:
        for name in (NS, PRIVATE_NS):
            assert alice.post("/v1/namespaces", json={"name": name}).status_code == 201
        assert alice.post("/v1/grants", json={"namespace": NS, "agent": "bob"}).status_code in (200, 201)

        def retain(content: str, namespace: str = NS, visibility: str = "team") -> dict:
            answer = alice.post(
                "/v1/memories", json={"content": content, "namespace": namespace, "visibility": visibility}
            )
            assert answer.status_code == 200, answer.text
            return answer.json()

        ids["old"] = retain("The release freeze starts on March 3.")["memory_id"]
        new = retain("The release freeze now starts on March 10.")
        assert new["decision"] == "UPDATE" and new["superseded"] == [ids["old"]]
        ids["new"] = new["memory_id"]
        ids["notes"] = retain("Release notes are written by whoever merges the last feature before the freeze.")[
            "memory_id"
        ]
        ids["lunch"] = retain("Team lunch is on Thursdays at the noodle bar.")["memory_id"]
        ids["private"] = retain("Alice's private reminder: the freeze party is a surprise.", PRIVATE_NS, "private")[
            "memory_id"
        ]
    return ids


async def usage(service: Service, ids: list[str]) -> tuple[dict, int]:
    conn = await connect(service.dsn)
    try:
        rows = await conn.fetch(
            "SELECT id::text, access_count, last_accessed_at FROM memories WHERE id = ANY($1::uuid[])", ids
        )
        events = await conn.fetchval("SELECT count(*) FROM memory_events WHERE op = 'recall' AND namespace = $1", NS)
    finally:
        await conn.close()
    return {r["id"]: (r["access_count"], r["last_accessed_at"]) for r in rows}, events


def evaluate(expression: str) -> float:
    plain = expression.replace("×", "*").replace("−", "-")
    assert re.fullmatch(r"[0-9.+\-*/() ]+", plain), plain
    return float(eval(plain))  # digits and arithmetic only, checked above


async def recomputes(hit) -> None:
    """The hit's disclosed terms: each printed formula gives its printed value, they add up to the
    printed fused score, and the shown score is the printed score formula's."""
    await hit.locator("details.formula summary").click()
    values = []
    for term in await hit.locator(".terms li").all():
        expression = await term.locator(".expression").text_content()
        value = float(await term.locator(".term-value").text_content() or "nan")
        assert evaluate(expression or "") == pytest.approx(value, abs=1e-4), expression
        values.append(value)
    fused_text = await hit.locator(".fused-formula").text_content() or ""
    fused = float(fused_text.rsplit(" = ", 1)[1])
    assert sum(values) == pytest.approx(fused, abs=1e-4 * len(values)), fused_text
    score_text = await hit.locator(".score-formula").text_content() or ""
    score = float(re.search(r"score = (?:fused = |rerank )([0-9.]+)", score_text).group(1))  # type: ignore[union-attr]
    shown = await hit.locator(".places strong").text_content() or ""
    assert shown == f"score {score:.3f}"
    if score_text.startswith("score = fused"):
        assert score == pytest.approx(fused, abs=1e-4)


async def test_the_playground_looks_without_using(browser: Browser, service: Service, seeded: dict) -> None:
    ids = list(seeded.values())
    before = await usage(service, ids)
    page = await sign_in(browser, service, "alice")
    await page.set_viewport_size({"width": 1280, "height": 900})
    await page.get_by_role("link", name="Recall").click()
    # a reranker is configured in this service: the box is offered, ticked on an empty form
    await expect(page.get_by_label("rerank")).to_be_enabled()
    await expect(page.get_by_label("rerank")).to_be_checked()
    await page.get_by_label("Query").fill(QUESTION)
    await page.get_by_label("Namespace").select_option(NS)
    await page.get_by_label("with history").check()
    await page.get_by_role("button", name="Recall").click()
    hits = page.locator("#hits > li")
    await expect(hits.first).to_contain_text("release freeze")
    await expect(page.locator("#rerank-state")).to_contain_text("applied")
    # timings in words, no key names
    timings = await page.locator("#timings").text_content() or ""
    assert "total" in timings and "_ms" not in timings, timings
    count = await hits.count()
    assert count >= 3
    for i in range(count):
        hit = hits.nth(i)
        await expect(hit.locator(".rank")).to_have_text(str(i + 1))
        box = await hit.bounding_box()
        assert box is not None and box["height"] <= 170, f"hit {i + 1} is {box} tall"
        link = hit.get_by_role("link", name="open")
        memory_id = await link.get_attribute("title")
        assert memory_id in seeded.values() and await link.get_attribute("href") == f"/console/memories/{memory_id}"
        await recomputes(hit)
    # with history, the superseded memory is badged wherever it ranks, linked to what replaced it
    old = hits.filter(has=page.locator(f"a[title='{seeded['old']}']", has_text="open"))
    badge = old.locator(".badge.superseded")
    await expect(badge).to_contain_text("superseded by")
    assert await badge.get_by_role("link").get_attribute("href") == f"/console/memories/{seeded['new']}"
    current = hits.filter(has=page.locator(f"a[title='{seeded['new']}']", has_text="open"))
    await expect(current.locator(".badge")).to_have_count(0)
    await shot(page, "recall-breakdown")

    # why not: the superseded memory without history, then one this agent may not read
    await page.get_by_label("with history").uncheck()
    await page.get_by_label("Why not this memory?").fill(seeded["old"])
    await page.get_by_role("button", name="Recall").click()
    await expect(page.locator("#why-not .reason")).to_contain_text(f"superseded by {seeded['new']}")
    await expect(page.locator("#why-not")).to_contain_text("It never reached the vector or keyword list")
    await shot(page, "recall-why-not")
    # at a phone's width and in dark mode, nothing scrolls sideways
    await page.emulate_media(color_scheme="dark")
    await page.set_viewport_size({"width": 390, "height": 844})
    overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the playground is {overflow}px wider than a phone"
    await shot(page, "recall-phone-dark")
    await page.emulate_media(color_scheme="light")
    await page.set_viewport_size({"width": 1280, "height": 900})
    await page.get_by_label("Why not this memory?").fill(seeded["lunch"])
    await page.get_by_label("k", exact=True).fill("1")
    await page.get_by_role("button", name="Recall").click()
    await expect(page.locator("#why-not .reason")).to_contain_text("below the cut-off")
    await expect(page.locator("#why-not")).to_contain_text("cut-off (the k-th hit)")
    await page.context.close()

    page = await sign_in(browser, service, "bob")  # bob reads the team namespace, not alice's private one
    base = f"{service.url}/console/recall?q={urllib.parse.quote(QUESTION)}&namespace={urllib.parse.quote(NS)}"
    await page.goto(f"{base}&why_not={seeded['private']}")
    hidden = await page.locator("#why-not").inner_text()
    await page.goto(f"{base}&why_not={uuid.uuid4()}")
    unknown = await page.locator("#why-not").inner_text()
    assert hidden == unknown and "Not found." in hidden and "surprise" not in await page.content()
    answer = await page.goto(f"{base}&why_not=not-a-uuid")  # a bad id is a clear 4xx naming its field
    assert answer is not None and answer.status == 400
    await expect(page.locator("body")).to_contain_text("why not: 'not-a-uuid' is not a memory id")
    await page.context.close()

    # nothing the playground showed was counted: an API recall now is, and once its event is
    # written (the bookkeeping is written in order), the playground's would have been too
    with service.client("alice") as alice:
        recalled = alice.post("/v1/recall", json={"query": QUESTION, "namespace": NS, "k": 2})
        assert recalled.status_code == 200
    counted = {h["memory"]["id"] for h in recalled.json()["hits"]}
    for _ in range(60):
        after = await usage(service, ids)
        if after[1] > before[1]:
            break
        await asyncio.sleep(0.5)
    assert after[1] == before[1] + 1, "one recall event: the API's"
    grown = {i for i in ids if after[0][i][0] != before[0][i][0]}
    assert grown == counted
    assert all(after[0][i] == before[0][i] for i in ids if i not in counted)


async def test_the_explain_api_answers_as_openapi_says(service: Service, seeded: dict) -> None:
    with service.client("alice") as alice:
        body = {"query": QUESTION, "namespace": NS, "k": 2, "why_not": seeded["lunch"]}
        answer = alice.post("/v1/recall/explain", json=body)
        assert answer.status_code == 200, answer.text
        explained = answer.json()
        assert [h["rank"] for h in explained["hits"]] == [1, 2]
        assert explained["rerank"].startswith("applied")
        assert all(h["score_formula"].startswith("score = rerank ") for h in explained["hits"])
        assert explained["why_not"]["found"] and explained["why_not"]["returned"] is None
        bad = alice.post("/v1/recall/explain", json={**body, "why_not": "nope"})
        assert bad.status_code == 400 and "memory id" in bad.json()["error"]["message"]
        # the L1 cache is neither read nor written: the first recall after an explain is computed,
        # the next one answered from the cache
        asked = {"query": "who writes the release notes", "namespace": NS, "k": 3}
        assert alice.post("/v1/recall/explain", json=asked).status_code == 200
        assert alice.post("/v1/recall", json=asked).json()["cached"] is False
        assert alice.post("/v1/recall", json=asked).json()["cached"] is True
        again = alice.post("/v1/recall/explain", json=asked).json()
        assert "cached" not in again and again["timings_ms"]["total_ms"] > 0
    with service.api("alice") as client:  # the typed client's method
        again = client.explain_recall(RecallQuery(QUESTION, NS, k=2), why_not=seeded["old"])
        assert "superseded by" in again["why_not"]["reasons"][0]
    # and the command line's
    env = cli_env(api_url=service.url, api_key=service.keys["alice"])
    shown = run_cli("recall", QUESTION, "-n", NS, "-k", "2", "--why-not", seeded["lunch"], env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("not counted as a use;") and " 1. [" in shown.stdout
    assert any(line.strip().startswith("fused = vector ") for line in lines)
    assert lines[-2] == f"why not {seeded['lunch']}:" and "below the cut-off" in lines[-1]


async def test_without_a_reranker_the_box_is_disabled_and_says_why(browser: Browser, brain) -> None:
    """The page as the console renders it, on a brain with no reranker (this service has one)."""
    await brain.retain("alice", MemoryInput("The release freeze starts on March 10.", "proj"))
    result = await brain.explain_recall("alice", RecallQuery(QUESTION, "proj", rerank=True))
    html = ENV.get_template("recall.html").render(
        session=None,
        errors=[],
        title="Recall",
        namespaces=[{"name": "proj"}],
        values={**dict.fromkeys(FIELDS, ""), "q": QUESTION, "namespace": "proj"},
        flags={"rerank": True, "expand": True, "include_invalid": False, "archive": False},
        result=result,
        archive=None,
        timings=stages(dict(result.timings_ms)),
        asked=True,
        reranker=False,
        no_reranker=NO_RERANKER,
        modes=filters.MODES,
        networks=filters.NETWORKS,
        memory_types=filters.MEMORY_TYPES,
    )
    page = await browser.new_page()
    await page.set_content(html)
    box = page.get_by_label("rerank")
    await expect(box).to_be_disabled()
    await expect(box).not_to_be_checked()
    await expect(page.locator("#no-reranker")).to_have_text(NO_RERANKER)
    await expect(page.locator("#rerank-state")).to_contain_text("not applied: no reranker configured")
    await page.close()
