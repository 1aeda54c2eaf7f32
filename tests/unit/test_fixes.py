"""An error's fix is worded for the surface its caller uses (cabrain/fixes.py)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from cabrain.cli import _explain
from cabrain.client import raise_for
from cabrain.errors import AccessDenied, NotFound
from cabrain.fixes import FIXES, SURFACES, Fix, render

REPO = Path(__file__).resolve().parents[2]
# Words that belong to one surface only: no other surface's hint may use them.
OWN_WORDS = {
    "mcp": ("memory_",),
    "http": ("POST /v1", "GET /v1", "PATCH /v1"),
    "cli": ("cabrain namespaces", "cabrain share"),
}
PARAMS = {
    "namespace": "team/notes",
    "agent": "bob",
    "memory_id": "0b0e3c9e-6c55-4c1e-9d43-6f0f3c3a1f00",
    "layer": "local",
    "provider": "openai",
    "endpoint": "http://127.0.0.1:11434/v1",
    "name": "qwen",
    "action": "5f1d2c3b-0000-4000-8000-000000000001",
}


@pytest.mark.parametrize("action", sorted(FIXES))
def test_every_fix_names_its_surface_s_own_way_and_never_a_python_call(action: str) -> None:
    for surface in SURFACES:
        text = render(Fix(action, PARAMS), surface)
        if text is None:
            continue
        assert "Brain." not in text and "brain." not in text and "()" not in text, text
        for other, words in OWN_WORDS.items():
            if other != surface and not (surface == "mcp" and other == "cli"):  # MCP names the operator's commands
                assert not any(w in text for w in words), (surface, text)
    everywhere = render(Fix(action, PARAMS), None)
    assert everywhere and all(f"{label}:" in everywhere for label in ("HTTP", "CLI"))


def test_an_error_s_hint_is_its_fix_in_the_caller_s_words() -> None:
    error = NotFound("namespace 'team/notes' does not exist", fix=Fix("create_namespace", {"namespace": "team/notes"}))
    assert error.hint_for("mcp") == 'create it first: call memory_create_namespace with namespace="team/notes"'
    assert error.hint_for("http") == 'create it first: POST /v1/namespaces {"name": "team/notes"}'
    assert error.hint_for("cli") == "create it first: cabrain namespaces --create team/notes"
    assert "MCP: " in str(error) and "CLI: " in str(error)  # in process: every way
    plain = AccessDenied("no", hint="ask its owner")
    assert plain.hint_for("mcp") == plain.hint_for("cli") == "ask its owner"
    unknown = NotFound("x", hint="fallback", fix=Fix("from_a_newer_version"))
    assert unknown.hint_for("cli") == "fallback"  # an action this version cannot word: the plain hint
    assert render(Fix("create_namespace"), "cli") is None  # an argument missing: no words, never a crash


def test_the_fix_travels_over_http_and_the_cli_words_it_again() -> None:
    body = {
        "error": {
            "type": "not_found",
            "message": "namespace 'n' does not exist",
            "hint": 'create it first: POST /v1/namespaces {"name": "n"}',
            "fix": {"action": "create_namespace", "params": {"namespace": "n"}},
        }
    }
    with pytest.raises(NotFound) as caught:
        raise_for(httpx.Response(404, json=body))
    assert caught.value.hint.startswith("create it first: POST /v1/namespaces")  # a Python client sees the route
    assert _explain(caught.value).endswith("fix: create it first: cabrain namespaces --create n")
    assert "memory_create_namespace" in caught.value.hint_for("mcp")
    body["error"]["fix"] = "garbled"
    with pytest.raises(NotFound) as old:
        raise_for(httpx.Response(404, json=body))
    assert old.value.fix is None and old.value.hint_for("cli") == body["error"]["hint"]


def test_no_hint_in_the_code_tells_a_caller_to_call_python() -> None:
    hint = re.compile(r"hint=f?(['\"])(.*?)\1")
    offenders = []
    for path in [*(REPO / "cabrain").rglob("*.py"), *(REPO / "serve_apps").rglob("*.py")]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in hint.finditer(line):
                if re.search(r"\b[Bb]rain\.\w+|\w+\.\w+\(", m.group(2)):
                    offenders.append(f"{path.relative_to(REPO)}:{n}: {m.group(2)}")
    assert not offenders, "\n".join(offenders)
