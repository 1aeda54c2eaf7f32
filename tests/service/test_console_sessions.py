"""Console sessions are the server's (issue 31, finding 10): the console's cookie held the raw API
key, and browsers do not separate cookies by port, so any other local web app on the host received
it. Now the cookie holds a random session id, PostgreSQL only its digest; revoking the key,
disabling the agent, signing out and signing in again each end the session.

Signed in with the real browser; the ended sessions replayed over HTTP as another app would.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from playwright.async_api import Browser, Page, expect

from tests.service.conftest import Service, sign_in, table_texts


def _new_agent(service: Service) -> dict[str, Any]:
    """An agent of its own (its key is revoked or it is disabled here), with a key."""
    name = f"sess-{uuid.uuid4().hex[:8]}"
    with service.client("admin") as admin:
        made = admin.post("/v1/agents", json={"id": name})
        assert made.status_code == 201, made.text
        service.keys[name] = made.json()["key"]
        return made.json()


async def _session_cookie(page: Page) -> str:
    [cookie] = [c for c in await page.context.cookies() if c["name"] == "cabrain_console"]
    return cookie["value"]


def _page_with(service: Service, session_id: str) -> httpx.Response:
    """A console page asked for with ``session_id`` as the cookie, as any other app holding it would."""
    return httpx.get(
        f"{service.url}/console/memories", cookies={"cabrain_console": session_id}, follow_redirects=False, timeout=60
    )


def _signed_in(answer: httpx.Response) -> bool:
    if answer.status_code == 200:
        return True
    assert answer.status_code == 303 and answer.headers["location"].startswith("/console/login"), answer.text[:300]
    return False


async def test_the_cookie_holds_a_session_id_never_the_key(service: Service, browser: Browser) -> None:
    agent = _new_agent(service)
    page = await sign_in(browser, service, agent["agent_id"])
    cookies = await page.context.cookies()
    assert cookies, "signed in without a cookie"
    for cookie in cookies:
        assert agent["key"] not in cookie["value"] and cookie["value"] not in agent["key"]
        assert agent["key"][4:20] not in cookie["value"]  # not even a part of it
    session_id = await _session_cookie(page)
    assert len(session_id) >= 40 and not session_id.startswith("cbk_")
    assert _signed_in(_page_with(service, session_id))
    stored = await table_texts(service.dsn)
    assert stored["console_sessions"], "the session is kept by the server"
    assert not [t for t, text in stored.items() if session_id in text]  # its digest only
    await page.context.close()


async def test_revoking_the_key_ends_its_session(service: Service, browser: Browser) -> None:
    agent = _new_agent(service)
    page = await sign_in(browser, service, agent["agent_id"])
    session_id = await _session_cookie(page)
    assert _signed_in(_page_with(service, session_id))
    with service.client("admin") as admin:
        revoked = admin.delete(f"/v1/agents/{agent['agent_id']}/keys/{agent['key_id']}")
        assert revoked.status_code == 200, revoked.text
    assert not _signed_in(_page_with(service, session_id))
    await page.goto(f"{service.url}/console/memories")
    await expect(page).to_have_url(f"{service.url}/console/login?next=%2Fconsole%2Fmemories")
    await page.context.close()


async def test_disabling_the_agent_ends_its_session(service: Service, browser: Browser) -> None:
    agent = _new_agent(service)
    page = await sign_in(browser, service, agent["agent_id"])
    session_id = await _session_cookie(page)
    with service.client("admin") as admin:
        assert admin.post(f"/v1/agents/{agent['agent_id']}/disable").status_code == 200
    assert not _signed_in(_page_with(service, session_id))
    await page.context.close()


async def test_a_new_sign_in_rotates_the_session_and_sign_out_ends_it(service: Service, browser: Browser) -> None:
    agent = _new_agent(service)
    page = await sign_in(browser, service, agent["agent_id"])
    first = await _session_cookie(page)
    # signing in again in the same browser: a new id, and the old one no longer works
    await page.goto(f"{service.url}/console/login")
    await page.get_by_label("API key").fill(agent["key"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    second = await _session_cookie(page)
    assert second != first
    assert not _signed_in(_page_with(service, first))
    assert _signed_in(_page_with(service, second))
    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(f"{service.url}/console/login")
    assert not _signed_in(_page_with(service, second))  # signing out deleted it on the server
    assert not _signed_in(_page_with(service, agent["key"]))  # and a key is no session
    await page.context.close()
