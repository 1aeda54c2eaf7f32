"""One declaration per operation (issue 33): the gate's declaration of an operation
(:func:`cabrain.gate.operation`, its :class:`~cabrain.gate.Faces`) says how every face exposes it, and
this test holds each face to it, enumerated from the face itself:

- every route of the API is declared by exactly one operation, and its handler calls that operation;
- the sync :class:`~cabrain.client.Client` has exactly the async client's methods, with the same
  parameters; every client method is declared by exactly one operation, bears its name (or a declared
  alias), takes only parameters the operation takes, and requests one of that operation's routes;
- the memory backend's Protocol and both backends have the same methods with the same parameters;
  each is declared by one operation, bears its name and calls it (in process) or one of its client
  methods (over HTTP);
- every MCP tool is declared by the operations it calls, through the backend methods they declare;
- every operation a face exposes has a docstring, and every route a summary.

A mismatch of name, parameters or route fails here, not in a user's hands.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cabrain import client as client_module
from cabrain import gate
from cabrain.faces import backend as backend_module
from tests.unit.test_gate import FACADES, NO_OPERATION, PACKAGE, _functions

# Client methods that are not operations: the connection itself, and the routes no operation serves.
CLIENT_OWN = {"close": "the connection", "request": "any call", "download": "any streamed call"}
CLIENT_OWN |= {name: NO_OPERATION[name] for name in ("health", "ready", "whoami")}
# A client method named otherwise than its operation: the operation it serves. The memory API's
# methods bear their operation's names; the service's facades share short names (add, listing,
# remove, get), which one flat client qualifies by what they act on.
ALIASES = {
    "retain_batch": "Brain.retain",  # several memories in one transaction (all or nothing)
    "add_channel": "Channels.add",
    "channels": "Channels.listing",
    "remove_channel": "Channels.remove",
    "add_connector": "Connectors.add",
    "connectors": "Connectors.listing",
    "connector": "Connectors.get",
    "remove_connector": "Connectors.remove",
    "sync_connector": "Connectors.start_sync",
    "dry_run_connector": "Connectors.dry_run",
    "connector_runs": "Connectors.runs",
    "connector_run": "Connectors.run",
}
# Parameters a face adds to an operation's: the key a retried write carries.
FACE_PARAMETERS = {"idempotency_key"}
# A face's parameter that stands for the operation's under another shape, and why.
RESHAPED = {
    ("retain", "item"): "one MemoryInput of Brain.retain's items",
    ("retain_batch", "items"): "Brain.retain's items, sent as the batch body",
    ("dispatch", "task"): "Workflows.dispatch's task, as its JSON",
    ("create_agent", "key_label"): "the label of the first key, which the route makes with Membership.create_key",
}


def _specs() -> list[gate.Operation]:
    for facade in FACADES:  # importing the facades declares their operations
        assert facade.__name__
    return list(gate.REGISTRY.values())


SPECS = _specs()


def _declaring(face: str) -> dict[str, list[gate.Operation]]:
    found: dict[str, list[gate.Operation]] = {}
    for spec in SPECS:
        for name in getattr(spec.faces, face):
            found.setdefault(name, []).append(spec)
    return found


def _method(spec: gate.Operation) -> str:
    return spec.name.split(".")[-1]


def _facade_function(spec: gate.Operation) -> Callable[..., Any]:
    owner, method = spec.name.split(".")
    for facade in FACADES:
        for cls in facade.__mro__:
            if cls.__name__ == owner and method in vars(cls):
                return inspect.unwrap(vars(cls)[method])
    raise AssertionError(f"{spec.name}: no such method on a facade")


def _parameters(fn: Callable[..., Any], *, drop: set[str]) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(fn).parameters.items() if n not in drop | {"self"}}


def _template(path: str) -> str:
    """A route path with each parameter as ``*``: ``/v1/memories/{memory_id}`` -> ``/v1/memories/*``."""
    return re.sub(r"\{[^}]*\}", "*", path)


# --- routes -------------------------------------------------------------------------------------------
def _api_routes() -> list[Any]:
    from cabrain.serve.api import create_api
    from cabrain.serve.metrics import IngressMetrics
    from cabrain.settings import load_settings

    app = create_api(SimpleNamespace(settings=load_settings(), metrics=IngressMetrics()))  # type: ignore[arg-type]

    def flat(routes: list[Any]) -> list[Any]:
        out = []
        for route in routes:
            included = getattr(route, "original_router", None)
            out += flat(included.routes) if included is not None else [route]
        return out

    return [
        r
        for r in flat(app.routes)
        if hasattr(r, "endpoint") and r.endpoint.__module__.startswith("cabrain.serve.routes")
    ]


ROUTES = {f"{method} {r.path}": r for r in _api_routes() for method in sorted(r.methods - {"HEAD"})}


def _calls(fn: ast.AST, helpers: dict[str, Any], seen: set[str] | None = None) -> set[str]:
    """The attribute and function names a function calls, itself or through its module's helpers."""
    seen = seen if seen is not None else set()
    names: set[str] = set()
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
        if name:
            names.add(name)
            if name in helpers and name not in seen:
                seen.add(name)
                names |= _calls(helpers[name], helpers, seen)
    return names


def test_every_api_route_is_declared_by_exactly_one_operation() -> None:
    assert len(ROUTES) > 70
    declared = _declaring("http")
    undeclared = [
        key for key, route in ROUTES.items() if key not in declared and route.endpoint.__name__ not in NO_OPERATION
    ]
    assert undeclared == [], "declare these routes on the operation they call (gate.operation(http=...))"
    twice = {key: [s.name for s in specs] for key, specs in declared.items() if len(specs) > 1}
    assert twice == {}
    assert sorted(set(declared) - set(ROUTES)) == [], "declared routes the app does not have"


@pytest.mark.parametrize("key", sorted(_declaring("http")))
def test_a_route_calls_the_operation_that_declares_it(key: str) -> None:
    [spec] = _declaring("http")[key]
    route = ROUTES[key]
    helpers = _functions(Path(sys.modules[route.endpoint.__module__].__file__ or ""))
    assert _method(spec) in _calls(helpers[route.endpoint.__name__], helpers), f"{key} does not call {spec.name}"
    assert route.summary or route.endpoint.__doc__, f"{key} has no summary"
    assert (_facade_function(spec).__doc__ or "").strip(), f"{spec.name} has no docstring"


# --- the clients -------------------------------------------------------------------------------------
def _public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The public methods of a class and the bases it is made of (the async client's mixins)."""
    found: dict[str, Callable[..., Any]] = {}
    for base in reversed(cls.__mro__[:-1]):
        found |= {n: f for n, f in vars(base).items() if not n.startswith("_") and inspect.isfunction(f)}
    return found


SYNC, ASYNC = _public_methods(client_module.Client), _public_methods(client_module.AsyncClient)


def _signature(fn: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    return [(p.name, p.kind, p.default, str(p.annotation)) for p in inspect.signature(fn).parameters.values()]


def test_the_sync_client_mirrors_the_async_one() -> None:
    assert sorted(SYNC) == sorted(ASYNC)
    differ = [name for name in ASYNC if name not in ("close",) and _signature(SYNC[name]) != _signature(ASYNC[name])]
    assert differ == [], "the sync client's methods take what the async client's take"


def test_every_client_method_is_declared_by_exactly_one_operation() -> None:
    declared = _declaring("client")
    assert sorted(set(ASYNC) - set(declared) - set(CLIENT_OWN)) == [], "declare these (gate.operation(client=...))"
    assert sorted(set(declared) - set(ASYNC)) == [], "declared client methods the client does not have"
    assert {k: [s.name for s in v] for k, v in declared.items() if len(v) > 1} == {}


def _paths(fn: ast.AST, helpers: dict[str, Any]) -> set[tuple[str, str]]:
    """Every (HTTP method, path template) a client method requests, itself or through a helper."""
    methods, paths = set(), set()
    nodes = [fn, *(helpers[n] for n in _calls(fn, helpers) if n in helpers)]
    for node in (n for root in nodes for n in ast.walk(root)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "download":
            methods.add("GET")  # a streamed GET (Transport.download)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                methods.add(node.value)
            elif node.value.startswith("/v1/"):
                paths.add(node.value)
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            parts = [v.value if isinstance(v, ast.Constant) else "*" for v in node.values]
            text = "".join(str(p) for p in parts)
            if text.startswith("/v1/"):
                paths.add(text)
    return {(m, p) for m in methods for p in paths}


@pytest.mark.parametrize("name", sorted(_declaring("client")))
def test_a_client_method_bears_its_operations_name_takes_its_parameters_and_requests_its_route(name: str) -> None:
    [spec] = _declaring("client")[name]
    assert name == _method(spec) or ALIASES.get(name) == spec.name, f"Client.{name} serves {spec.name}: name it so"
    operation = _parameters(_facade_function(spec), drop={spec.caller or ""})
    extra = [
        p for p in _parameters(ASYNC[name], drop=FACE_PARAMETERS) if p not in operation and (name, p) not in RESHAPED
    ]
    assert extra == [], f"Client.{name} takes parameters {spec.name} does not"
    source = ast.parse(textwrap.dedent(inspect.getsource(ASYNC[name])))
    requested = {(m, _template(p)) for m, p in _paths(source, {})}
    routes = {(key.split()[0], _template(key.split()[1])) for key in spec.faces.http}
    assert requested & routes, f"Client.{name} requests {sorted(requested)}, not a route of {spec.name}"


# --- the memory backend ---------------------------------------------------------------------------------
PROTOCOL = _public_methods(backend_module.MemoryBackend)
IN_PROCESS = _public_methods(backend_module.BrainBackend)
OVER_HTTP = _public_methods(backend_module.HttpBackend)


def test_the_backends_implement_the_protocol_exactly() -> None:
    assert sorted(IN_PROCESS) == sorted(PROTOCOL) == sorted(OVER_HTTP)
    for name, fn in PROTOCOL.items():
        assert _signature(IN_PROCESS[name]) == _signature(fn) == _signature(OVER_HTTP[name]), name


def test_every_backend_method_is_declared_by_exactly_one_operation() -> None:
    declared = _declaring("backend")
    assert sorted(set(PROTOCOL) ^ set(declared)) == []
    assert {k: [s.name for s in v] for k, v in declared.items() if len(v) > 1} == {}


@pytest.mark.parametrize("name", sorted(PROTOCOL))
def test_a_backend_method_bears_its_operations_name_and_calls_it(name: str) -> None:
    [spec] = _declaring("backend")[name]
    assert name == _method(spec), f"MemoryBackend.{name} serves {spec.name}: name it so"
    in_process = ast.parse(textwrap.dedent(inspect.getsource(IN_PROCESS[name])))
    assert _method(spec) in _calls(in_process, {}), f"BrainBackend.{name} does not call {spec.name}"
    over_http = ast.parse(textwrap.dedent(inspect.getsource(OVER_HTTP[name])))
    assert _calls(over_http, {}) & set(spec.faces.client), f"HttpBackend.{name} calls none of {spec.faces.client}"
    operation = _parameters(_facade_function(spec), drop={spec.caller or ""})
    extra = [
        p for p in _parameters(PROTOCOL[name], drop=FACE_PARAMETERS) if p not in operation and (name, p) not in RESHAPED
    ]
    assert extra == [], f"MemoryBackend.{name} takes parameters {spec.name} does not"


# --- MCP ----------------------------------------------------------------------------------------------------
def _tools() -> dict[str, ast.AsyncFunctionDef | ast.FunctionDef]:
    return {
        name: fn
        for name, fn in _functions(PACKAGE / "faces" / "mcp.py").items()
        if any(
            isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "tool"
            for d in fn.decorator_list
        )
    }


TOOLS = _tools()


def test_every_mcp_tool_is_declared_and_every_declared_tool_exists() -> None:
    declared = _declaring("mcp")
    assert len(TOOLS) >= 14
    assert sorted(set(TOOLS) ^ set(declared)) == []


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_an_mcp_tool_calls_each_operation_that_declares_it(tool: str) -> None:
    called = _calls(TOOLS[tool], {})
    for spec in _declaring("mcp")[tool]:
        assert set(spec.faces.backend) & called, f"{tool} calls no backend method of {spec.name}"
    assert ast.get_docstring(TOOLS[tool]), f"{tool} has no description"


# --- the command line ---------------------------------------------------------------------------------------
def _commands() -> dict[str, Callable[..., Any]]:
    """Every command of ``cabrain`` ("notify add") with the function that runs it."""
    import argparse

    from cabrain.cli import build_parser

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
        out: dict[str, Callable[..., Any]] = {}
        if parser._defaults.get("func") and prefix:
            out[" ".join(prefix)] = parser._defaults["func"]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    out |= walk(child, (*prefix, name))
        return out

    return walk(build_parser(), ())


COMMANDS = _commands()


def _command_calls(command: str) -> set[str]:
    fn = COMMANDS[command]
    helpers = _functions(Path(sys.modules[fn.__module__].__file__ or ""))
    return _calls(helpers[fn.__name__], helpers)


CLIENT_NAMES = {"client"}  # what the commands call it: `with remote(settings) as client`, `lambda client:`


def _client_calls(command: str) -> set[str]:
    """The client methods a command calls (``client.recall(...)``, ``lambda c: c.channels()``)."""
    fn = COMMANDS[command]
    helpers = _functions(Path(sys.modules[fn.__module__].__file__ or ""))
    nodes = [helpers[fn.__name__], *(helpers[n] for n in _calls(helpers[fn.__name__], helpers) if n in helpers)]
    return {
        call.func.attr
        for node in nodes
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in CLIENT_NAMES
    }


def test_every_declared_command_exists_and_calls_its_operation() -> None:
    declared = _declaring("cli")
    assert sorted(set(declared) - set(COMMANDS)) == [], "declared commands cabrain does not have"
    for command, specs in declared.items():
        called = _command_calls(command)
        for spec in specs:
            assert called & {_method(spec), *spec.faces.client}, f"`cabrain {command}` does not call {spec.name}"


def test_a_command_that_calls_the_service_calls_only_operations_that_declare_it() -> None:
    """A command's remote branch goes through the client's methods, each an operation that names
    the command: no command calls a route the declarations do not know of."""
    owner = {name: spec for spec in SPECS for name in spec.faces.client}
    undeclared = sorted(
        f"{command}: {name} ({owner[name].name})"
        for command in COMMANDS
        for name in _client_calls(command) & set(owner)
        if command not in owner[name].faces.cli
    )
    assert undeclared == []
    raw = sorted(c for c in COMMANDS if _client_calls(c) & {"request", "download"})
    assert raw == [], "these commands call a raw path: give the client a method for the operation"


def _readme_client_calls() -> list[tuple[str, ast.Call]]:
    """Every ``cb.NAME(...)`` call in the README's Python examples."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    calls = []
    for block in re.findall(r"```python\n(.*?)```", readme, flags=re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if isinstance(node.func.value, ast.Name) and node.func.value.id == "cb":
                    calls.append((node.func.attr, node))
    return calls


def test_the_readmes_client_examples_call_methods_the_client_has_with_parameters_it_takes() -> None:
    calls = _readme_client_calls()
    assert len(calls) >= 15  # the examples are there to be checked
    for name, call in calls:
        method = getattr(client_module.Client, name, None)
        assert method is not None, f"README calls Client.{name}, which does not exist"
        args = [object()] * len(call.args)
        kwargs = {k.arg: object() for k in call.keywords if k.arg}
        try:
            inspect.signature(method).bind(None, *args, **kwargs)
        except TypeError as exc:
            raise AssertionError(f"README's call of Client.{name} (line {call.lineno}) does not fit: {exc}") from None
