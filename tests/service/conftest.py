"""One real CaBrain Serve application on a real local Ray for the whole test session.

The app runs on the session's embedded PostgreSQL (its own database), a real Redis, and a
TEI-style reranker on loopback (so the Reranker deployment is exercised too). Agents: ``admin``
(an admin), ``alice`` (owner of namespace ``proj``), ``bob`` and ``carol``; each has a key. Every
answer to a :meth:`Service.client` is checked against the app's OpenAPI document
(:mod:`tests.service.openapi_check`).
"""

from __future__ import annotations

import os
import shutil
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from cabrain import identity
from cabrain.settings import Settings, load_settings
from cabrain.store.db import connect
from cabrain.store.embedded import EmbeddedPostgres
from tests.conftest import (
    TEST_SECRET_NAMES,
    _create_database,
    brings,
    free_port,
    make_scratch_dir,
    serve_fake,
)
from tests.service.openapi_check import OpenApiCheck

METRICS_KEY = "scrape-only-7f3c9b1e5d"  # CABRAIN_METRICS_KEY: Prometheus's, good for /metrics alone
APP_ARGS = {
    "ingress": {"num_cpus": 0.25, "query_embedding": "remote"},  # recalls exercise the embedder deployment
    "embedder": {"num_cpus": 0.5, "max_batch_size": 16, "batch_wait_timeout_s": 0.002},
    "reranker": {"num_cpus": 0.25},
}


@dataclass
class Service:
    url: str
    dsn: str
    settings: Settings
    pg: EmbeddedPostgres
    openapi: OpenApiCheck
    keys: dict[str, str] = field(default_factory=dict)
    key_ids: dict[str, str] = field(default_factory=dict)

    def client(self, agent: str | None, **kw):
        """An HTTP client with ``agent``'s key (none: anonymous) whose answers are checked against
        the OpenAPI document."""
        headers = {"Authorization": f"Bearer {self.keys[agent]}"} if agent else {}
        hooks = {"response": [self.openapi.check]}
        return httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 60), event_hooks=hooks, **kw)

    def api(self, agent: str):
        from cabrain.client import Client

        return Client(self.url, self.keys[agent])


@pytest.fixture(scope="session")
@brings("subprocess")
def rerank_url() -> Iterator[str]:
    yield from serve_fake("rerank_server")


@pytest.fixture(scope="session")
async def service_db(pg_server: EmbeddedPostgres, template_db: str) -> str:
    name = await _create_database(pg_server, template_db)
    return pg_server.dsn(name)


async def table_texts(dsn: str) -> dict[str, str]:
    """Every row of every table of the database as text, by table: where a test looks for what must
    never have been stored."""
    conn = await connect(dsn)
    try:
        tables = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        )
        return {
            row["table_name"]: "\n".join(r[0] for r in await conn.fetch(f'SELECT t::text FROM "{row["table_name"]}" t'))
            for row in tables
        }
    finally:
        await conn.close()


async def _make_agents(dsn: str) -> tuple[dict[str, str], dict[str, str]]:
    conn = await connect(dsn)
    keys, ids = {}, {}
    try:
        for agent in ("admin", "alice", "bob", "carol"):
            await identity.create_agent(conn, agent, is_admin=agent == "admin")
            new = await identity.create_key(conn, agent, label="tests")
            keys[agent], ids[agent] = new.key, str(new.id)
        await conn.execute("INSERT INTO namespaces (name, owner_agent_id) VALUES ('proj', 'alice')")
    finally:
        await conn.close()
    return keys, ids


@pytest.fixture(scope="session")
@brings("service", "ray")
async def service(
    service_db: str, pg_server: EmbeddedPostgres, redis_url: str, rerank_url: str, ray_cluster: Settings
) -> Service:
    from ray import serve

    from cabrain import service as svc

    home = make_scratch_dir("cabrain-service-")
    settings = load_settings(
        home=Path(home),
        database_url=service_db,
        redis_url=redis_url,
        api_port=free_port(),
        reranker_provider="http",
        reranker_url=rerank_url,
        ray_num_cpus=2,
        ray_object_store_bytes=100 * 1024 * 1024,
        serve_ready_timeout_s=240,
        db_connect_timeout_s=20,
        metrics_key=METRICS_KEY,
        ray_metrics_export=True,  # GET /metrics gathers from Ray's metrics port, opened on request only
        connector_roots=[str(Path(home) / "shared")],  # the one folder local connectors may read over the API
        notify_poll_s=0.5,
        live_watch_s=1.0,
        # the stand-ins listen on 127.0.0.1, the one address outside the public internet the service
        # may reach (tests/service/test_egress.py shows what it refuses); the credentials it may read
        egress_allow=["127.0.0.1"],
        secret_env_allow=TEST_SECRET_NAMES,
    )
    keys, ids = await _make_agents(service_db)
    try:
        svc.deploy(settings, service_db, APP_ARGS)
        svc.wait_ready(settings, progress=False)
        spec = httpx.get(f"{svc.api_url(settings)}/openapi.json", timeout=30).json()
    except BaseException:
        serve.shutdown()
        raise
    running = Service(svc.api_url(settings), service_db, settings, pg_server, OpenApiCheck(spec), keys, ids)
    yield running
    serve.shutdown()
    shutil.rmtree(home, ignore_errors=True)
    if WHOLE_DIRECTORY["ran"]:
        missing = running.openapi.unvalidated()
        assert not missing, "no test validated an answer of these routes against OpenAPI: " + ", ".join(missing)


# Whether this session runs every test of this directory (no -k, -m or node id left one out): then,
# once they all ran, every JSON route of the API has had a success answer validated against its
# OpenAPI schema by one of them (checked when the service stops, whatever order the tests ran in).
WHOLE_DIRECTORY = {"ran": False, "deselected": False}
HERE = Path(__file__).parent


def pytest_deselected(items: list[pytest.Item]) -> None:
    if any(Path(str(item.path)).parent == HERE for item in items):
        WHOLE_DIRECTORY["deselected"] = True


def pytest_collection_finish(session: pytest.Session) -> None:
    # a pytest-xdist worker collects every test but runs only those it is sent
    if hasattr(session.config, "workerinput") or WHOLE_DIRECTORY["deselected"]:
        return
    if any("::" in str(arg) for arg in session.config.args):
        return
    files = {Path(str(item.path)) for item in session.items}
    WHOLE_DIRECTORY["ran"] = set(HERE.glob("test_*.py")) <= files


def chromium_path() -> str:
    found = os.environ.get("CABRAIN_TEST_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("the console tests need Debian's chromium: apt-get install chromium (scripts/test installs it)")
    return found


@pytest.fixture(scope="module")
@brings("browser")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield launched
        await launched.close()


async def sign_in(browser: Browser, service: Service, agent: str, start: str = "/console/memories") -> Page:
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    page = await context.new_page()
    await page.goto(service.url + start)
    await expect(page).to_have_url(f"{service.url}/console/login?next={urllib.parse.quote(start, safe='')}")
    await page.get_by_label("API key").fill(service.keys[agent])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    return page
