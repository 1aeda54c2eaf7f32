"""The hypothesis drive of the edge guard (issue 31): every route of the app - read from the app's own
route table, so a new route is driven without a change here - and every MCP tool - read from the
MCP server's tool list, over the real transport - filled with hostile values (NUL, lone surrogates,
names ending in a newline, integers past 64 bits, dates at year 0, 1 and 9999 with offsets, JSON
nested past the limit) mixed with plausible ones. Each answer is a 2xx/3xx or a 4xx error (JSON for
the API), never a 500; a refused call stores nothing (the rows a request can make are counted before
and after); and usage accounting still answers afterwards.

A fixed seed (``derandomize``) and ``CABRAIN_HYPOTHESIS_EXAMPLES`` examples per route and per tool
(default 6); set it higher for a longer drive.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import types
import urllib.parse
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel
from starlette.routing import Mount, Route

from cabrain.serve.api import create_api
from cabrain.serve.console.session import csrf_token
from cabrain.settings import load_settings
from tests.mcp_helpers import http_session
from tests.service.conftest import Service

EXAMPLES = int(os.environ.get("CABRAIN_HYPOTHESIS_EXAMPLES", "6"))
DRIVE = settings(
    derandomize=True,
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
# The rows a request can make: none may appear when a request was refused.
STORED = (
    "agents",
    "agent_keys",
    "namespaces",
    "namespace_grants",
    "memories",
    "channels",
    "notifiers",
    "subscriptions",
    "connectors",
    "llm_agents",
    "dispatch_queue",
    "pending_actions",
    "agent_caps",
    "live_issues",
    "retain_requests",
)
COUNT = "SELECT " + ", ".join(f"(SELECT count(*) FROM {t}) AS {t}" for t in STORED)


@dataclass(frozen=True)
class Deep:
    """JSON nested ``levels`` deep (written as text: deeper than ``json.dumps`` would go)."""

    levels: int


def dump(value: Any) -> str:
    """``value`` as JSON text, escapes for NUL and lone surrogates, :class:`Deep` as its nesting."""
    if isinstance(value, Deep):
        return '{"d":' * value.levels + "1" + "}" * value.levels
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value)  # ensure_ascii: a surrogate as its escape; inf as Infinity


HOSTILE_TEXT = st.one_of(
    st.text(max_size=12).map(lambda s: s + "\x00"),
    st.text(alphabet=st.characters(codec=None, categories=["Cs", "Ll"]), min_size=1, max_size=8),
    st.sampled_from(
        [
            "\ud800",
            "ok\udfff",
            "proj\n",
            "bob\r\n",
            " lead",
            "0001-01-01T00:00:00+05:00",
            "9999-12-31",
            "9999-12-31T23:59:59-05:00",
            "0000-01-01",
            "99999-01-01",
            str(2**63),
            str(-(2**63) - 1),
            "9" * 5000,
            "x" * 300,
            "../../etc/passwd",
            "@admin/x",
            "<script>alert(1)</script>",
            "",
        ]
    ),
)
HOSTILE = st.one_of(
    HOSTILE_TEXT,
    st.sampled_from([2**63, -(2**63) - 1, 10**9, 10**30, -1, 0, float("inf"), float("nan"), 1e308]),
    st.sampled_from([Deep(65), Deep(600), Deep(3000)]),
    st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT, max_size=3),
    st.lists(HOSTILE_TEXT, max_size=3),
)


def plausible(name: str, ns: str) -> st.SearchStrategy[Any]:
    """A value a field of this name could well hold, so a request gets past the shape to the work."""
    by_name: dict[str, list[Any]] = {
        "namespace": [ns],
        "agent": ["nobody-here"],  # never a real agent: a drawn disable or revoke must not end another test's
        "agent_id": ["nobody-here"],
        "content": ["The deploy freeze ends Thursday."],
        "query": ["deploy freeze"],
        "q": ["deploy"],
        "kind": ["webhook", "stale"],
        "format": ["mem0", "markdown"],
        "visibility": ["team"],
        "days": [7],
        "limit": [5],
        "k": [3],
        "seconds": [1],
        "after": [0],
    }
    return st.sampled_from(by_name.get(name, ["x", 1, True, None]))


def value_for(name: str, ns: str) -> st.SearchStrategy[Any]:
    return st.one_of(HOSTILE, plausible(name, ns))


def param_text(value: Any) -> str:
    if isinstance(value, Deep):
        return dump(value)
    if isinstance(value, dict | list):
        return dump(value)
    return str(value)


# --- the app's route table ------------------------------------------------------------------------------
def _routes() -> list[tuple[str, str, Any]]:
    """(method, path, route) for every route of the app, read from the app ``create_api`` builds."""
    stand = types.SimpleNamespace(settings=load_settings(), metrics=None)  # only read while building routes
    app = create_api(stand)  # type: ignore[arg-type]
    found = []

    def flat(routes: list[Any]) -> list[Any]:
        out = []
        for route in routes:
            included = getattr(route, "original_router", None)  # FastAPI's included router
            out += flat(included.routes) if included is not None else [route]
        return out

    for route in flat(app.routes):
        if isinstance(route, Mount):
            found.append(("GET", route.path + "/{path}", route))
        elif isinstance(route, Route | APIRoute) or hasattr(route, "methods"):
            for method in sorted(getattr(route, "methods", None) or {"GET"}):
                if method != "HEAD":
                    found.append((method, route.path, route))
    return found


ROUTES = _routes()
RAW_BODIES = {"/v1/import", "/v1/channels/{name}/events", "/mcp"}
SSE = {"/v1/events", "/console/events"}


def _fields(route: Any, kind: str) -> list[str]:
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return []
    seen: list[str] = []

    def walk(dep: Any) -> None:
        for param in getattr(dep, kind):
            if param.alias not in seen:
                seen.append(param.alias)
        for sub in dep.dependencies:
            walk(sub)

    walk(dependant)
    return seen


def _body_fields(route: Any) -> list[str] | None:
    """The body model's fields (None: no JSON body)."""
    dependant = getattr(route, "dependant", None)
    if dependant is None or not dependant.body_params:
        return None
    names: list[str] = []
    for param in dependant.body_params:
        annotation = param.field_info.annotation
        for member in getattr(annotation, "__args__", (annotation,)):
            if isinstance(member, type) and issubclass(member, BaseModel):
                names.extend(member.model_fields)
    return names or [p.alias for p in dependant.body_params]


@pytest.fixture(scope="module")
def driver(service: Service) -> Any:
    """The admin's API client, its console session, and the rows counted on the service's database."""
    loop = asyncio.new_event_loop()
    conn = loop.run_until_complete(asyncpg.connect(service.dsn))
    api = service.client("admin")
    api.event_hooks = {"response": []}  # hostile requests are not the OpenAPI document's business
    console = httpx.Client(base_url=service.url, timeout=60)
    form = console.get("/console/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert nonce
    signed = console.post("/console/login", data={"csrf": nonce.group(1), "key": service.keys["admin"]})
    assert signed.status_code == 303, signed.text[:300]
    session_id = console.cookies["cabrain_console"]
    ns = "edges-drive"
    api.post("/v1/namespaces", json={"name": ns})

    def counts() -> dict[str, int]:
        return dict(loop.run_until_complete(conn.fetchrow(COUNT)))

    yield types.SimpleNamespace(api=api, console=console, csrf=csrf_token(session_id), ns=ns, counts=counts)
    api.close()
    console.close()
    loop.run_until_complete(conn.close())
    loop.close()


def _send(driver: Any, method: str, path: str, route: Any, data: st.DataObject) -> httpx.Response:
    ns = driver.ns
    params = re.findall(r"{([^}:]+)(?::[^}]*)?}", path)
    url = path
    for name in params:
        value = data.draw(value_for(name, ns), label=f"path {name}")
        url = re.sub(
            r"{" + name + r"(:[^}]*)?}",
            urllib.parse.quote(param_text(value).encode("utf-8", "surrogatepass"), safe=""),
            url,
        )
    query: list[tuple[str, str]] = []
    for name in _fields(route, "query_params"):
        if data.draw(st.booleans(), label=f"send {name}"):
            query.append((name, param_text(data.draw(value_for(name, ns), label=f"query {name}"))))
    headers: dict[str, str] = {}
    for name in _fields(route, "header_params"):
        value = param_text(data.draw(value_for(name, ns), label=f"header {name}"))
        if value.isascii() and value.isprintable() and len(value) < 1000:
            headers[name] = value
    body_fields = _body_fields(route)
    content: bytes | None = None
    console = path.startswith("/console")
    if body_fields is not None:
        body = {name: data.draw(value_for(name, ns), label=f"body {name}") for name in body_fields}
        if data.draw(st.booleans(), label="an extra field"):
            body[data.draw(HOSTILE_TEXT, label="extra key")] = data.draw(HOSTILE, label="extra value")
        content, headers["Content-Type"] = dump(body).encode("utf-8", "surrogatepass"), "application/json"
    elif path in RAW_BODIES and method == "POST":
        content = dump(data.draw(st.dictionaries(HOSTILE_TEXT, HOSTILE, max_size=3), label="raw")).encode(
            "utf-8", "surrogatepass"
        )
        headers["Content-Type"] = "application/json"
    elif console and method == "POST":
        fields = {"csrf": driver.csrf if path != "/console/logout" else "stay-signed-in", "confirm": "yes"}
        for name in ("namespace", "content", "reason", "name", "agent", "q"):
            fields[name] = param_text(data.draw(value_for(name, ns), label=f"form {name}"))
        content = urllib.parse.urlencode(fields, encoding="utf-8", errors="surrogatepass").encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    if not params and not query and body_fields is None and path not in RAW_BODIES:
        # nothing of its own to fill: a hostile extra query parameter (the guard's alone to refuse)
        query.append(("x", data.draw(HOSTILE_TEXT.filter(lambda s: "\x00" in s or "\n" in s), label="extra")))
    if path in SSE:
        query = [(k, v) for k, v in query if k != "seconds"] + [("seconds", "1")]
    client = driver.console if console else driver.api
    target = url + ("?" + urllib.parse.urlencode(query, errors="surrogatepass") if query else "")
    with client.stream(method, target, content=content, headers=headers, follow_redirects=False) as answer:
        if "text/event-stream" not in answer.headers.get("content-type", ""):
            answer.read()
    return answer


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("method", "path", "route"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_route_answers_hostile_values_with_a_4xx_never_a_500(
    service: Service, driver: Any, method: str, path: str, route: Any
) -> None:
    @DRIVE
    @given(data=st.data())
    def drive(data: st.DataObject) -> None:
        before = driver.counts()
        answer = _send(driver, method, path, route, data)
        assert answer.status_code < 500, f"{method} {answer.request.url}: {answer.status_code} {answer.text[:300]}"
        if 400 <= answer.status_code < 500:
            if not path.startswith("/console") or answer.headers.get("content-type", "").startswith("application/json"):
                error = answer.json()["error"]
                assert error.get("type") or (path == "/mcp" and error.get("message")), answer.text[:300]  # JSON-RPC
            assert driver.counts() == before, f"{method} {answer.request.url} was refused but stored something"

    drive()
    assert driver.api.get("/v1/usage").status_code == 200  # usage accounting still answers


# --- every MCP tool, over the real transport -----------------------------------------------------------------
async def _tools(service: Service) -> dict[str, dict[str, Any]]:
    async with http_session(service.url, service.keys["admin"]) as session:
        return {t.name: t.input_schema for t in (await session.list_tools()).tools}


def _json_safe(value: Any) -> Any:
    """Arguments the MCP client can send: JSON values (deep ones as deep dicts; a lone surrogate,
    which the client cannot encode, as "?": the HTTP drive sends those)."""
    if isinstance(value, Deep):
        out: Any = 1
        for _ in range(min(value.levels, 200)):
            out = {"d": out}
        return out
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return 1e308
    if isinstance(value, str):
        return (
            value.encode("utf-8", "replace").decode("utf-8")
            if any(0xD800 <= ord(c) <= 0xDFFF for c in value)
            else value
        )
    if isinstance(value, dict):
        return {_json_safe(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _examples(fields: list[str], ns: str) -> list[dict[str, Any]]:
    """The arguments hypothesis draws for a tool of these fields (its fixed seed, EXAMPLES of them)."""
    found: list[dict[str, Any]] = []

    @DRIVE
    @given(data=st.data())
    def collect(data: st.DataObject) -> None:
        found.append({name: _json_safe(data.draw(value_for(name, ns), label=name)) for name in fields})

    collect()
    return found


async def _drive_tools(service: Service, ns: str) -> list[str]:
    """Every tool the server lists, called with its examples over one MCP session; what went wrong."""
    problems: list[str] = []
    conn = await asyncpg.connect(service.dsn)
    try:
        async with http_session(service.url, service.keys["admin"]) as session:
            tools = {t.name: t.input_schema for t in (await session.list_tools()).tools}
            assert tools, "the MCP server lists no tools"
            for tool, schema in sorted(tools.items()):
                for arguments in _examples(list((schema or {}).get("properties", {})), ns):
                    before = dict(await conn.fetchrow(COUNT))
                    try:
                        result = await session.call_tool(tool, arguments)
                        failed, text = result.is_error, " ".join(getattr(c, "text", "") for c in result.content)
                    except MCPError as exc:  # a JSON-RPC error: arguments the server would not parse
                        failed, text = True, f"JSON-RPC error {exc}"
                    # a crash is the SDK's bare "Error executing tool <name>"; a refusal says why
                    if text.strip() == f"Error executing tool {tool}" or "unexpected error" in text.lower():
                        problems.append(f"{tool} crashed on {arguments!r:.300}: {text[:200]}")
                    elif failed and dict(await conn.fetchrow(COUNT)) != before:
                        problems.append(f"{tool} refused {arguments!r:.300} but stored something")
    finally:
        await conn.close()
    return problems


@pytest.mark.timeout(1800)
def test_every_mcp_tool_answers_hostile_arguments_with_a_tool_error_never_a_crash(
    service: Service, driver: Any
) -> None:
    problems = asyncio.run(_drive_tools(service, driver.ns))
    assert problems == []
    assert driver.api.get("/v1/usage").status_code == 200
