"""The console's server time per page on the bench corpus: each page requested through the console's
own routes and templates (an ASGI app in process: no network, no browser), as the bench agent with a
session cookie, timed from request to the last byte of the answer."""

from __future__ import annotations

import random
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
from fastapi import FastAPI

from cabrain.bench.corpus import AGENT, NAMESPACE, synthetic_queries
from cabrain.brain import Brain
from cabrain.eval import percentiles
from cabrain.facades import Facades
from cabrain.identity import Principal
from cabrain.serve import console
from cabrain.serve.console.session import COOKIE
from cabrain.store import bench as sql

ADMIN = "bench-admin"  # who reads the admin pages
T = TypeVar("T")


class LocalReplica(Facades):
    """What the console's routes ask of their replica, answered by a Brain in this process."""

    def __init__(self, brain: Brain) -> None:
        super().__init__(brain.settings, {})  # the console's pages read no credentials
        self.brain = brain
        self.models: dict[str, Any] = {}

    async def run(self, op: Callable[[Brain], Awaitable[T]]) -> T:
        return await op(self.brain)

    async def authenticate(self, key: str | None) -> Principal:
        return await self.brain.authenticate(key)

    async def ready(self) -> dict[str, Any]:
        await self.brain.ping()
        return {"ready": True, "version": "bench", "models": self.models}

    def forget_keys(self) -> None:
        return None


def console_app(brain: Brain) -> FastAPI:
    app = FastAPI()
    app.state.replica = LocalReplica(brain)
    console.mount(app)
    return app


async def _ids(brain: Brain, n: int, rng: random.Random) -> list[str]:
    async with brain.engine.pool.acquire() as conn:  # a spread of memories, not only the newest
        rows = await conn.fetch(sql.SAMPLED_IDS, NAMESPACE, n * 4)
        if len(rows) < n:  # a small corpus: a 1% sample of its pages may hold nothing
            rows = await conn.fetch(sql.SOME_IDS, NAMESPACE, n)
    ids = [str(r["id"]) for r in rows]
    rng.shuffle(ids)
    return ids[:n]


async def measure_console(brain: Brain, rng: random.Random, requests: int = 50) -> dict[str, Any]:
    """p50/p95/p99 server time in ms of each console page, ``requests`` times each."""
    key = (await brain.create_key(AGENT, label="bench-console")).key
    session_id, _ = await brain.open_console_session(key)  # as signing in does: the cookie holds its id
    ns = urllib.parse.quote(NAMESPACE)
    ids = await _ids(brain, requests, rng)
    queries = synthetic_queries(rng, requests)
    words = [max(q.split(), key=len).strip("?.,!") for q in queries]  # a word of each query, to search for
    async with brain.engine.pool.acquire() as conn:  # a month in the middle of the corpus' time span
        middle = await conn.fetchval(sql.MIDDLE_VALID_AT, NAMESPACE)
    start = (middle or datetime.now(UTC)).date().replace(day=1)
    month = (start.isoformat(), (start + timedelta(days=27)).isoformat())
    out: dict[str, Any] = {"requests_per_page": requests}
    transport = httpx.ASGITransport(app=console_app(brain))
    async with httpx.AsyncClient(transport=transport, base_url="http://bench", cookies={COOKIE: session_id}) as client:
        # a page 20 pages deep: its cursor, from walking there once
        deep = f"/console/memories?namespace={ns}"
        for _ in range(20):
            page = await client.get(deep)
            marker = 'id="next-page" href="'
            if marker not in page.text:
                break
            deep = page.text.split(marker)[1].split('"')[0].replace("&amp;", "&")
        # the most mentioned entity, as the entities page sorted by mentions links it
        ranked = (await client.get(f"/console/entities?namespace={ns}&sort=mentions")).text
        top = (
            ranked.split("/console/entity?", 1)[1].split('"')[0].replace("&amp;", "&")
            if "/console/entity?" in ranked
            else ""
        )
        pages: dict[str, Callable[[int], str]] = {
            "memories, first page": lambda i: f"/console/memories?namespace={ns}",
            "memories, 20 pages deep": lambda i: deep,
            "memories, filtered (fact, with history)": lambda i: (
                f"/console/memories?namespace={ns}&network=fact&history=1"
            ),
            "memories, filtered (importance >= 0.9)": lambda i: f"/console/memories?namespace={ns}&min_importance=0.9",
            "memories, filtered (one month)": lambda i: (
                f"/console/memories?namespace={ns}&from={month[0]}&to={month[1]}"
            ),
            "memories, search (one word)": lambda i: (
                f"/console/memories?namespace={ns}&q={urllib.parse.quote(words[i])}"
            ),
            "memories, search (two words)": lambda i: (
                f"/console/memories?namespace={ns}&q={urllib.parse.quote(words[i] + ' ' + words[i - 1])}"
            ),
            "a memory": lambda i: f"/console/memories/{ids[i % len(ids)]}",
            "recall playground": lambda i: f"/console/recall?namespace={ns}&q={urllib.parse.quote(queries[i])}",
            "entities": lambda i: f"/console/entities?namespace={ns}",
            "entities, most mentioned first": lambda i: f"/console/entities?namespace={ns}&sort=mentions",
            "entities, a name filter": lambda i: (
                f"/console/entities?namespace={ns}&q={urllib.parse.quote(words[i][:4])}"
            ),
            "the most mentioned entity": lambda i: f"/console/entity?{top}",
            "its graph (300 memories)": lambda i: f"/console/graph.json?{top.replace('name=', 'entity=')}&limit=300",
            "capture feed": lambda i: f"/console/capture?namespace={ns}",
            "sleep runs": lambda i: "/console/sleep",
            "namespaces": lambda i: "/console/namespaces",
            "workflows": lambda i: "/console/workflows",
            "health": lambda i: "/console/health",
            "overview": lambda i: "/console/overview",
            "overview, one namespace": lambda i: f"/console/overview?namespace={ns}",
            "audit of judgments": lambda i: f"/console/audit?namespace={ns}",
            "audit, a person's judgments": lambda i: f"/console/audit?namespace={ns}&origin=person",
            "recall playground, why not a memory": lambda i: (
                f"/console/recall?namespace={ns}&q={urllib.parse.quote(queries[i])}&why_not={ids[-1 - i % len(ids)]}"
            ),
            "actions": lambda i: "/console/actions",
            "pushes": lambda i: "/console/pushes",
            "connectors": lambda i: "/console/connectors",
            "import/export": lambda i: "/console/transfer",
        }
        admin_pages: dict[str, Callable[[int], str]] = {
            "agents (an admin)": lambda i: "/console/agents",
            "an agent, its usage chart (an admin)": lambda i: f"/console/agents/{AGENT}",
        }
        if not top:  # a corpus loaded without retain's entity linking names no entity: said, not an error
            del pages["the most mentioned entity"], pages["its graph (300 memories)"]
            out["the most mentioned entity, its graph"] = "not timed: no entity in this corpus"
        await _time_pages(client, pages, requests, out)
        await brain.create_agent(ADMIN, is_admin=True)
        admin_key = (await brain.create_key(ADMIN, label="bench-console")).key
        admin_session, _ = await brain.open_console_session(admin_key)
        client.cookies.set(COOKIE, admin_session)
        await _time_pages(client, admin_pages, requests, out)
    return out


async def _time_pages(
    client: httpx.AsyncClient, pages: dict[str, Callable[[int], str]], requests: int, out: dict[str, Any]
) -> None:
    """Each page's server time, ``requests`` times after one untimed request, into ``out``."""
    for name, url in pages.items():
        first = await client.get(url(0))  # warm-up, and a check that the page answers
        if first.status_code != 200:
            out[name] = {"error": f"HTTP {first.status_code}"}
            continue
        times = []
        for i in range(requests):
            t0 = time.perf_counter()
            answer = await client.get(url(i))
            times.append((time.perf_counter() - t0) * 1000)
            if answer.status_code != 200:
                raise RuntimeError(f"console page {name!r} answered {answer.status_code}")
        out[name] = percentiles(times)


def render_console(result: dict[str, Any]) -> list[str]:
    lines = [f"  console pages, server time in process (ms, {result.get('requests_per_page')} requests each)"]
    lines.append(f"  {'page':<44} {'p50':>8} {'p95':>8} {'p99':>8}")
    for name, r in result.items():
        if isinstance(r, str):
            lines.append(f"  {name:<44} {r}")
        if not isinstance(r, dict):
            continue
        if "error" in r:
            lines.append(f"  {name:<44} {r['error']}")
        else:
            lines.append(f"  {name:<44} {r['p50']:8.1f} {r['p95']:8.1f} {r['p99']:8.1f}")
    return lines
