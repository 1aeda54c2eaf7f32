"""The ingress's Server-Timing (cabrain/serve/timing.py, CABRAIN_API_SERVER_TIMING), the proxy's own
entry (cabrain/serve/proxy.py) and how ``cabrain bench http`` reads them into stages. The whole path,
through a real Serve proxy and ingress, is tests/integration/test_bench_http.py."""

from __future__ import annotations

import asyncio
from typing import Annotated

import httpx
from fastapi import Depends, FastAPI

from cabrain.bench.http import STAGES, http_stages, server_timing
from cabrain.serve import timing
from cabrain.serve.edge_guard import EdgeGuard
from cabrain.serve.proxy import JsonErrors
from cabrain.serve.routing import router
from cabrain.serve.timing import ServerTiming
from cabrain.settings import load_settings

seen_inside: list[object] = []


async def _key() -> str:
    return await timing.timed("auth", asyncio.sleep(0.01, result="agent"))


def _app(timed: bool) -> FastAPI:
    routes = router()

    @routes.post("/v1/echo")
    async def echo(body: dict, agent: Annotated[str, Depends(_key)]) -> dict:
        seen_inside.append(timing.current())
        return await timing.timed("brain", asyncio.sleep(0.03, result={"agent": agent, **body}))

    app = FastAPI()
    app.include_router(routes)
    app.add_middleware(EdgeGuard)
    if timed:
        app.add_middleware(ServerTiming)
    return app


async def _post(app, body: dict | None = None) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        return await client.post("/v1/echo", json=body or {"q": "x"})


async def test_each_answer_says_its_stages_and_they_add_up_to_the_ingress():
    seen_inside.clear()
    response = await _post(_app(timed=True))
    assert response.status_code == 200 and response.json() == {"agent": "agent", "q": "x"}
    stages = server_timing(response.headers.get_list("server-timing"))
    assert set(stages) == {"app", "before", "auth", "brain", "encode"}
    assert stages["auth"] >= 10 and stages["brain"] >= 30  # the sleeps, each in its own stage
    assert stages["before"] < stages["auth"] + stages["brain"]  # the key check is not counted twice
    assert sum(stages[name] for name in ("before", "auth", "brain", "encode")) <= stages["app"] + 0.05
    assert isinstance(seen_inside[0], timing.Stages)
    assert timing.current() is None  # the request's stages end with it


async def test_off_by_default_there_is_no_header_and_nothing_is_timed():
    assert load_settings().api_server_timing is False
    seen_inside.clear()
    response = await _post(_app(timed=False))
    assert response.status_code == 200 and "server-timing" not in response.headers
    assert seen_inside == [None]


async def test_an_answer_the_edge_guard_refuses_still_says_the_ingress_time():
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_app(timed=True)), base_url="http://127.0.0.1"
    ) as client:
        response = await client.post(
            "/v1/echo", content=b'{"q": "\\ud800"}', headers={"content-type": "application/json"}
        )
    assert response.status_code == 400  # a lone surrogate: refused before any route runs
    assert set(server_timing(response.headers.get_list("server-timing"))) == {"app"}


async def _through_proxy(headers: list[tuple[bytes, bytes]]) -> dict[bytes, list[bytes]]:
    sent: list[dict] = []

    async def app(scope, receive, send):
        await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}", "more_body": False})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    await JsonErrors(app)({"type": "http", "method": "POST", "path": "/v1/recall"}, receive, send)
    out: dict[bytes, list[bytes]] = {}
    for name, value in sent[0]["headers"]:
        out.setdefault(name, []).append(value)
    return out


async def test_the_proxy_adds_its_own_time_only_to_an_answer_that_is_timed():
    timed = await _through_proxy([(b"content-type", b"application/json"), (b"server-timing", b"app;dur=2.00")])
    stages = server_timing([v.decode() for v in timed[b"server-timing"]])
    assert stages["app"] == 2.0 and stages["proxy"] >= 10
    plain = await _through_proxy([(b"content-type", b"application/json")])
    assert b"server-timing" not in plain


def test_the_bench_reads_server_timing_as_the_spec_writes_it():
    assert server_timing(['app;dur=12.5, auth;dur="0.25";desc="key", cache', "proxy;dur=20"]) == {
        "app": 12.5,
        "auth": 0.25,
        "proxy": 20.0,
    }
    assert server_timing(["brain;dur=abc, ;dur=3"]) == {}


def test_a_calls_stages_split_its_wall_time_without_gaps():
    server = {"proxy": 30.0, "app": 24.0, "before": 1.0, "auth": 0.5, "brain": 21.0, "encode": 0.5}
    stages = http_stages(40.0, server, {"total_ms": 20.0, "embed_ms": 12.0})
    assert stages["client"] == 10.0 and stages["proxy_hop"] == 6.0 and stages["other"] == 1.0
    assert stages["client"] + stages["proxy_hop"] + stages["app"] == stages["total"]
    assert set(stages) == {name for name, _ in STAGES}
    assert http_stages(25.0, {}, {"total_ms": 20.0}) == {"total": 25.0, "recall": 20.0}  # in process
