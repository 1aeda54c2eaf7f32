"""What a caller can do about an error, said on the surface it uses.

The core names an error's fix as an action with its arguments (``Fix("create_namespace",
{"namespace": "notes"})``), never as a sentence about one surface. Each face renders it from the one
table below: an MCP client is told which tool to call, an HTTP client which route, a command-line
user which command, a person in the web console which page. ``render(fix, None)`` (what
``str(error)`` shows in process and in logs) names every programmatic surface's way. An action a surface cannot take (an agent accepts no grant through MCP) is rendered as
who does it instead.

Over HTTP the fix travels with the error (``{"error": {..., "fix": {"action", "params"}}}``), so the
client, the CLI and the MCP server on top of it render it again for their own callers.

Standard library only: faces that must start fast import it through :mod:`cabrain.errors`.
"""

from __future__ import annotations

import json
import shlex
import urllib.parse
from collections.abc import Callable, Mapping

SURFACES = ("mcp", "http", "cli", "console")
EVERYWHERE = ("mcp", "http", "cli")  # what render(fix, None) names: the console is read by a person, not logged
LABELS = {"mcp": "MCP", "http": "HTTP", "cli": "CLI", "console": "console"}


class Fix:
    """An action that fixes an error (a key of :data:`FIXES`) and its arguments (strings). A plain
    class, not a dataclass: the CLI and the faces import this on start."""

    __slots__ = ("action", "params")

    def __init__(self, action: str, params: Mapping[str, object] | None = None) -> None:
        self.action = action
        self.params = dict(params or {})

    # No __hash__: a class defining __eq__ alone is unhashable (Python sets __hash__ to None), as a Fix
    # with mutable params should be.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fix) and (self.action, self.params) == (other.action, other.params)

    def __repr__(self) -> str:
        return f"Fix({self.action!r}, {self.params!r})"

    def to_json(self) -> dict[str, object]:
        return {"action": self.action, "params": dict(self.params)}

    @classmethod
    def from_json(cls, data: object) -> Fix | None:
        """The fix an error body carries, or None for a missing or malformed one."""
        if not isinstance(data, Mapping) or not isinstance(data.get("action"), str):
            return None
        params = data.get("params")
        return cls(data["action"], dict(params) if isinstance(params, Mapping) else {})


def _arg(value: object) -> str:
    """A tool argument or a JSON value, quoted as JSON (``"notes"``, ``true``)."""
    return json.dumps(value, ensure_ascii=False)


def _body(**fields: object) -> str:
    return json.dumps(fields, ensure_ascii=False)


def _sh(value: object) -> str:
    return shlex.quote(str(value))


Params = Mapping[str, object]
# action -> surface -> the hint. Arguments a raise site could not know are shown as NAME.
FIXES: dict[str, dict[str, Callable[[Params], str]]] = {
    "create_namespace": {
        "mcp": lambda p: f"create it first: call memory_create_namespace with namespace={_arg(p['namespace'])}",
        "http": lambda p: f"create it first: POST /v1/namespaces {_body(name=p['namespace'])}",
        "cli": lambda p: f"create it first: cabrain namespaces --create {_sh(p['namespace'])}",
        "console": lambda p: (
            f"namespace {p['namespace']} does not exist yet: an agent that writes to it creates it first"
        ),
    },
    "accept_grant": {
        "mcp": lambda p: (
            f"your operator accepts it for you: cabrain namespaces --accept {_sh(p['namespace'])}, with "
            "this agent's key (agents do not accept grants through MCP tools)"
        ),
        "http": lambda p: f"accept it first: POST /v1/grants/accept {_body(namespace=p['namespace'])}",
        "cli": lambda p: f"accept it first: cabrain namespaces --accept {_sh(p['namespace'])}",
        "console": lambda p: f"accept it first: Namespaces page, Accept under {p['namespace']}",
    },
    "request_write": {
        "mcp": lambda p: (
            f"ask the namespace's owner to call memory_share with namespace={_arg(p['namespace'])}, "
            f"agent={_arg(p['agent'])}, can_write=true; then your operator accepts the grant "
            f"(cabrain namespaces --accept {_sh(p['namespace'])})"
        ),
        "http": lambda p: (
            "ask its owner for a write grant (POST /v1/grants "
            f"{_body(namespace=p['namespace'], agent=p['agent'], can_write=True)}), then accept it "
            f"(POST /v1/grants/accept {_body(namespace=p['namespace'])})"
        ),
        "cli": lambda p: (
            f"ask its owner for a write grant (cabrain share {_sh(p['namespace'])} {_sh(p['agent'])} "
            f"--write), then accept it (cabrain namespaces --accept {_sh(p['namespace'])})"
        ),
        "console": lambda p: (
            f"ask the owner of {p['namespace']} to share it with {p['agent']} (may write), then accept it on "
            "the Namespaces page"
        ),
    },
    "offer_grant": {
        "mcp": lambda p: (
            f"its owner offers one first: memory_share with namespace={_arg(p['namespace'])}, agent={_arg(p['agent'])}"
        ),
        "http": lambda p: (
            "its owner offers one first: POST /v1/grants " + _body(namespace=p["namespace"], agent=p["agent"])
        ),
        "cli": lambda p: f"its owner offers one first: cabrain share {_sh(p['namespace'])} {_sh(p['agent'])}",
        "console": lambda p: (
            f"its owner offers one first: Namespaces page, Share with agent {p['agent']} under {p['namespace']}"
        ),
    },
    "read_archived": {
        "mcp": lambda p: (
            f"read it with memory_get (memory_id={_arg(p['memory_id'])}) or memory_recall_archive; "
            "record something new with memory_retain"
        ),
        "http": lambda p: (
            f"read it with GET /v1/memories/{p['memory_id']} or POST /v1/recall/archive; record "
            "something new with POST /v1/memories"
        ),
        "cli": lambda p: (
            f"read it with cabrain get {p['memory_id']} or cabrain recall --archive; record something "
            "new with cabrain remember"
        ),
        "console": lambda p: "it is archived: read it on its page, or browse Memories with tier cold",
    },
    "reconsolidate_current": {
        "mcp": lambda p: f"correct its current version: memory_reconsolidate with memory_id={_arg(p['memory_id'])}",
        "http": lambda p: f"correct its current version: POST /v1/memories/{p['memory_id']}/reconsolidate",
        "cli": lambda p: (
            f"its current version is {p['memory_id']} (cabrain get {p['memory_id']} shows it): correct that one"
        ),
        "console": lambda p: f"its current version is memory {p['memory_id']}: open it and correct that one",
    },
    "retain_instead": {
        "mcp": lambda p: "it was forgotten: record the corrected statement with memory_retain",
        "http": lambda p: "it was forgotten: record the corrected statement with POST /v1/memories",
        "cli": lambda p: "it was forgotten: record the corrected statement with cabrain remember",
        "console": lambda p: "it was forgotten: record the corrected statement as a new memory",
    },
    "entities": {
        "mcp": lambda p: f"memory_entities with namespace={_arg(p['namespace'])} lists the ones you can see",
        "http": lambda p: (
            f"GET /v1/entities?{urllib.parse.urlencode({'namespace': p['namespace']})} lists the ones you can see"
        ),
        "cli": lambda p: f"cabrain entities {_sh(p['namespace'])} lists the ones you can see",
        "console": lambda p: f"the Entities page lists the ones you can see in {p['namespace']}",
    },
    "create_agent": {
        "http": lambda p: f"an admin creates it first: POST /v1/agents {_body(id=p['agent'])}",
        "cli": lambda p: f"an admin creates it first: cabrain agents create {_sh(p['agent'])}",
        "console": lambda p: f"an admin creates {p['agent']} first on the Agents page",
    },
    "create_key": {
        "http": lambda p: f"make it another key instead: POST /v1/agents/{p['agent']}/keys",
        "cli": lambda p: f"make it another key instead: cabrain agents key {_sh(p['agent'])}",
        "console": lambda p: f"make it another key instead: Agents page, {p['agent']}, Make another key",
    },
    "new_key": {
        "mcp": lambda p: (
            "ask an admin for a new key (cabrain agents key NAME) and give it to this MCP server "
            "(CABRAIN_API_KEY, or the Authorization header)"
        ),
        "http": lambda p: "ask an admin for a new key (POST /v1/agents/NAME/keys)",
        "cli": lambda p: "ask an admin for a new key (cabrain agents key NAME) and set CABRAIN_API_KEY to it",
        "console": lambda p: "ask an admin for a new key (Agents page) and sign in with it",
    },
    "send_key": {
        "mcp": lambda p: "configure the MCP client to send 'Authorization: Bearer <key>'",
        "http": lambda p: "send the header 'Authorization: Bearer <key>'",
        "cli": lambda p: "set CABRAIN_API_KEY=<key> (an admin makes one: cabrain agents key NAME)",
        "console": lambda p: "sign in with an API key",
    },
    "wait_ready": {
        "mcp": lambda p: "retry the call shortly",
        "http": lambda p: "retry shortly; GET /v1/ready says when it is ready",
        "cli": lambda p: "retry shortly",
        "console": lambda p: "reload the page shortly",
    },
    "register_model": {
        "mcp": lambda p: (
            "ask an operator to register one: cabrain workflows agents add NAME "
            f"--layer {p['layer']} --provider {p['provider']} ..."
        ),
        "http": lambda p: (
            "an admin registers one: POST /v1/workflows/agents "
            + _body(name="NAME", layer=p["layer"], provider=p["provider"], model="MODEL", endpoint=p["endpoint"])
        ),
        "cli": lambda p: (
            f"cabrain workflows agents add NAME --layer {p['layer']} --provider {p['provider']} "
            f"--endpoint {p['endpoint']} ..."
        ),
        "console": lambda p: (
            f"an operator registers a {p['layer']} model first (the Workflows page lists those registered)"
        ),
    },
    "update_model": {
        "http": lambda p: f"change it with PATCH /v1/workflows/agents/{p['name']}",
        "cli": lambda p: f"change it with cabrain workflows agents set {_sh(p['name'])} ...",
        "console": lambda p: f"an operator changes model {p['name']} (the Workflows page shows it)",
    },
    "approve_action": {
        "mcp": lambda p: f"a person approves pending action {p['action']} (console, chat, or cabrain actions approve)",
        "http": lambda p: f"a person approves it: POST /v1/actions/{p['action']}/approve (or denies it: .../deny)",
        "cli": lambda p: f"a person approves it: cabrain actions approve {p['action']}",
        "console": lambda p: "a person approves it (or denies it) on the Actions page",
    },
    "list_models": {
        "mcp": lambda p: "ask an operator which models are registered (cabrain workflows agents list)",
        "http": lambda p: "see GET /v1/workflows/agents",
        "cli": lambda p: "see cabrain workflows agents list",
        "console": lambda p: "the Workflows page lists the registered models",
    },
}


def render(fix: Fix, surface: str | None) -> str | None:
    """``fix`` in the words of ``surface`` (mcp, http, cli); None when that surface has none. With
    no surface, every surface's words (in process and in logs, where the caller's is unknown)."""
    table = FIXES.get(fix.action)
    if table is None:
        return None
    try:
        if surface is not None:
            say = table.get(surface)
            return say(fix.params) if say else None
        return "; ".join(f"{LABELS[s]}: {table[s](fix.params)}" for s in EVERYWHERE if s in table)
    except KeyError:  # a fix missing an argument its words need (from another version): no words
        return None
