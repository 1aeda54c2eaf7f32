"""When an operator turns Swagger UI on (CABRAIN_API_DOCS), its page runs only the pinned Swagger UI
files and its own inline script, by digest (finding 17)."""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
from fastapi import FastAPI

from cabrain.serve.docs import SWAGGER_UI, add_docs
from cabrain.settings import load_settings


async def _get(app: FastAPI, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        return await client.get(path)


async def test_docs_on_run_only_the_pinned_files_and_their_own_script() -> None:
    app = FastAPI(docs_url=None, redoc_url=None)
    add_docs(app, True)
    page = await _get(app, "/docs")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    scripts = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    assert scripts
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    for src in re.findall(r'(?:src|href)="(https?://[^"]+)"', page.text):
        assert src.startswith(SWAGGER_UI + "/"), src
        assert SWAGGER_UI + "/" in csp


async def test_docs_are_off_by_default() -> None:
    assert load_settings().api_docs is False
    app = FastAPI(docs_url=None, redoc_url=None)
    add_docs(app, load_settings().api_docs)
    assert (await _get(app, "/docs")).status_code == 404
