"""The gate's shape (issue 31): every operation of every facade is declared once, every face reaches
the brain through declared operations only, and nothing checks access around the gate.

- every public method of every facade is an operation (:func:`cabrain.gate.operation`), a system
  operation that says why no agent calls it (:func:`cabrain.gate.system`), or one of the few
  non-operations (:data:`cabrain.gate.NOT_OPERATIONS`); a class with a declared method is a facade;
- every route of the app (the API and the console, enumerated from the app itself) and every MCP
  tool calls at least one declared operation, and no face touches the engine, the pool or the
  governor, imports the store's access checks, or checks a role or admin flag itself;
- a face that calls an operation the operator may also call (``operator=True``) always names the
  agent it acts for, so a face can never act as the operator;
- no facade calls the governor's check or an admin check itself: the gate is the only one.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from cabrain import gate
from cabrain.brain import Brain
from cabrain.channels.facade import Channels
from cabrain.connectors.facade import Connectors
from cabrain.notify.facade import Notify
from cabrain.portable.facade import Portable
from cabrain.serve.service_ops import ServiceOps
from cabrain.sleep.runs import SleepRuns
from cabrain.workflows.facade import Workflows

PACKAGE = Path(gate.__file__).parent
FACADES = (Brain, Workflows, Connectors, Portable, Notify, Channels, SleepRuns, ServiceOps)
FACES = sorted(
    [
        *(PACKAGE / "serve" / "routes").glob("*.py"),
        *(PACKAGE / "serve" / "console").glob("*.py"),
        PACKAGE / "faces" / "mcp.py",
        PACKAGE / "faces" / "backend.py",
        PACKAGE / "serve" / "mcp_endpoint.py",
        PACKAGE / "serve" / "deps.py",
    ]
)
# What a face may call without an agent, and why.
SYSTEM_CALLS_FROM_FACES = {
    "authenticate": "a key becomes an agent (serve/deps.py, the console's session, /mcp's guard)",
    "receive": "a platform's signed request (routes/channels.py)",
    "get": "the channel a platform's request names, after receive (routes/channels.py)",
    "scrape": "Prometheus with CABRAIN_METRICS_KEY (routes/health.py)",
    "latest": "where the console's live stream starts: a sequence number (console/actions.py)",
    "open_console_session": "a key becomes a console session at sign-in (console/pages.py)",
    "console_session": "a console session's id becomes an agent (console/routing.py)",
    "close_console_session": "signing out ends the session its id names (console/pages.py)",
}
# Routes that call no operation, and why.
NO_OPERATION = {
    "health": "liveness: the process answers",
    "ready": "readiness: models and database, no agent",
    "whoami": "the caller's own key, as authenticated",
    "login_page": "the sign-in form",
    "login": "sign-in: authenticates the key posted once",
    "logout": "sign-out",
    "home": "a redirect to the memories page",
}
# What faces may not reach for: the engine and what it holds, and the old copies of the checks.
FORBIDDEN_ATTRIBUTES = {"engine", "pool", "governor", "require_admin", "require_writer", "profile"}
FORBIDDEN_NAMES = {"Admin", "require_admin", "Governor"}
FORBIDDEN_MODULES = ("cabrain.store.access", "cabrain.governance", "cabrain.policy", "cabrain.actions", "cabrain.gate")


def _operations() -> dict[str, list[gate.Operation]]:
    """Every declared method by name (two facades may have methods of one name: Brain.get, Channels.get)."""
    found: dict[str, list[gate.Operation]] = {}
    for facade in FACADES:
        for name, member in inspect.getmembers(facade):
            spec = gate.declared(member)
            if spec is not None and spec not in found.get(name, []):
                found.setdefault(name, []).append(spec)
    return found


OPERATIONS = _operations()
AGENT_OPERATIONS = {name for name, specs in OPERATIONS.items() if any(s.system is None for s in specs)}
SYSTEM_ONLY = {name for name, specs in OPERATIONS.items() if all(s.system is not None for s in specs)}


def _public(cls: type) -> list[str]:
    return [
        name
        for name, _ in inspect.getmembers(cls)
        if not name.startswith("_") and any(name in vars(base) for base in cls.__mro__ if base is not object)
    ]


@pytest.mark.parametrize("facade", FACADES, ids=lambda f: f.__name__)
def test_every_public_method_of_a_facade_is_declared(facade: type) -> None:
    undeclared = [
        name
        for name in _public(facade)
        if gate.declared(getattr(facade, name)) is None and name not in gate.NOT_OPERATIONS
    ]
    assert undeclared == [], f"{facade.__name__}: declare these with gate.operation or gate.system"


def test_every_class_with_a_declared_method_is_a_facade_this_test_knows() -> None:
    owners = {spec.name.split(".")[0] for spec in gate.REGISTRY.values()}
    known = {f.__name__ for f in FACADES} | {
        "Membership",
        "Judging",
        "Corrections",
        "Explaining",
        "Overview",
        "EntityCare",
    }  # the parts of Brain
    assert owners <= known, f"new facades: add them to FACADES: {sorted(owners - known)}"


def test_declarations_are_whole() -> None:
    for spec in gate.REGISTRY.values():
        name = spec.name
        if spec.system is not None:
            assert spec.system.strip() and spec.kind is None and spec.meter is None, name
            continue
        assert spec.kind is not None and spec.caller == "agent", f"{name}: the agent that acts is named agent"
        assert not (spec.held and spec.admin), f"{name}: an admin-only operation is never held"
    held = {spec.name.split(".")[-1] for spec in gate.REGISTRY.values() if spec.held}
    assert held == {
        "forget",
        "reconsolidate",
        "revert",
        "revert_run",
        "unarchive",
        "share",
        "accept_grant",
        "decline_grant",
        "revoke",
        "correct",
        "restore",
        "revert_judgments",
        "rename_entity",
        "merge_entity",
    }
    assert {s.name.split(".")[-1] for s in gate.REGISTRY.values() if s.admin} >= {
        "create_agent",
        "create_key",
        "revoke_key",
        "agents",
        "keys",
        "disable_agent",
        "set_role",
        "set_cap",
        "add_model",
        "update_model",
        "add_notifier",
        "remove_notifier",
        "restore",
        "start_backup",
        "backups",
        "metrics",
        "start",
    }


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _called(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def _attr(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


@pytest.mark.parametrize("path", FACES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_faces_reach_the_brain_only_through_operations(path: Path) -> None:
    tree = _tree(path)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            problems.append(f"line {node.lineno}: .{node.attr}")
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            problems.append(f"line {node.lineno}: {node.id}")
        if isinstance(node, ast.ImportFrom) and node.module:
            imported = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            if any(m.startswith(FORBIDDEN_MODULES) for m in imported):
                problems.append(f"line {node.lineno}: imports {node.module}")
        if isinstance(node, ast.Call) and _attr(node) in SYSTEM_ONLY and _attr(node) not in SYSTEM_CALLS_FROM_FACES:
            problems.append(f"line {node.lineno}: calls {_attr(node)}, which no agent calls")
    assert problems == [], f"{path.name} reaches around the gate: {problems}"


def _operator_ops() -> dict[str, tuple[str, int]]:
    """Operations the operator may call: the caller's parameter name and its position (self first)."""
    out = {}
    for name, specs in OPERATIONS.items():
        for spec in specs:
            if spec.operator:
                assert spec.caller is not None
                for facade in FACADES:
                    method = getattr(facade, name, None)
                    if gate.declared(method) is spec:
                        params = list(inspect.signature(inspect.unwrap(method)).parameters)
                        out[name] = (spec.caller, params.index(spec.caller) - 1)
    return out


@pytest.mark.parametrize("path", FACES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_face_never_acts_as_the_operator(path: Path) -> None:
    """An operation the operator may call with no agent is always called with one by a face."""
    operator = _operator_ops()
    bare = []
    for call in _called(_tree(path)):
        name = _attr(call)
        if name in operator:
            param, position = operator[name]
            named = any(k.arg == param for k in call.keywords)
            given = len(call.args) > position and not (
                isinstance(call.args[position], ast.Constant) and call.args[position].value is None
            )
            if not (named or given):
                bare.append(f"line {call.lineno}: {name} without {param}")
    assert bare == []


def _functions(path: Path) -> dict[str, ast.AsyncFunctionDef | ast.FunctionDef]:
    return {n.name: n for n in ast.walk(_tree(path)) if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)}


def _reaches_operation(fn: ast.AST, helpers: dict[str, ast.AST], seen: set[str] | None = None) -> bool:
    """The function calls a declared operation, itself or through a helper of its module."""
    seen = seen if seen is not None else set()
    for call in _called(fn):
        name = _attr(call) or (call.func.id if isinstance(call.func, ast.Name) else None)
        if name in AGENT_OPERATIONS or name in SYSTEM_CALLS_FROM_FACES:
            return True
        if name in helpers and name not in seen:
            seen.add(name)
            if _reaches_operation(helpers[name], helpers, seen):
                return True
    return False


def test_every_route_and_console_action_calls_an_operation() -> None:
    """Every route of the app itself (API and console), enumerated from its route table."""
    from cabrain.serve.api import create_api
    from cabrain.serve.metrics import IngressMetrics
    from cabrain.settings import load_settings

    app = create_api(SimpleNamespace(settings=load_settings(), metrics=IngressMetrics()))  # type: ignore[arg-type]

    def flat(routes: list) -> list:
        out = []
        for route in routes:
            included = getattr(route, "original_router", None)  # FastAPI's included router
            out += flat(included.routes) if included is not None else [route]
        return out

    endpoints = [r.endpoint for r in flat(app.routes) if hasattr(r, "endpoint") and hasattr(r, "methods")]
    assert len(endpoints) > 90
    missing = []
    for endpoint in endpoints:
        module = inspect.getmodule(endpoint)
        assert module is not None and module.__file__ is not None
        if not module.__name__.startswith(("cabrain.serve.routes", "cabrain.serve.console")):
            continue  # FastAPI's own: the OpenAPI document
        if endpoint.__name__ in NO_OPERATION:
            continue
        helpers = _functions(Path(module.__file__))
        if not _reaches_operation(helpers[endpoint.__name__], helpers):
            missing.append(f"{module.__name__}.{endpoint.__name__}")
    assert missing == [], "these routes call no declared operation (declare one, or say why in NO_OPERATION)"


def test_every_mcp_tool_calls_a_backend_method_that_calls_an_operation_as_its_agent() -> None:
    tools = [
        fn
        for fn in _functions(PACKAGE / "faces" / "mcp.py").values()
        if any(
            isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "tool"
            for d in fn.decorator_list
        )
    ]
    assert len(tools) >= 14
    backend = ast.parse((PACKAGE / "faces" / "backend.py").read_text())
    brain_backend = next(n for n in backend.body if isinstance(n, ast.ClassDef) and n.name == "BrainBackend")
    methods = {n.name: n for n in brain_backend.body if isinstance(n, ast.AsyncFunctionDef)}
    for name, method in methods.items():
        if name.startswith("_"):
            continue
        calls = [c for c in _called(method) if _attr(c) in AGENT_OPERATIONS]
        assert calls, f"BrainBackend.{name} calls no operation"
        for call in calls:
            first = call.args[0] if call.args else None
            assert isinstance(first, ast.Attribute) and first.attr == "agent", f"BrainBackend.{name}: not as its agent"
    for tool in tools:
        used = {_attr(c) for c in _called(tool)} & set(methods)
        assert used, f"MCP tool {tool.name} calls no backend method"


def test_no_facade_or_pipeline_checks_a_role_or_an_admin_itself() -> None:
    """The role decision and the admin check live in the gate only: nothing else imports the
    policy's decision, calls a governor's check, or has an admin check of its own."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("gate.py", "policy.py"):
            continue
        for node in ast.walk(_tree(path)):
            where = f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module == "cabrain.policy":
                if {a.name for a in node.names} & {"decide", "refuse", "POLICIES", "Verdict"}:
                    offenders.append(where)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
                if node.value.attr == "governor" and node.attr not in (
                    "profile",
                    "flush",
                    "model_call",
                    "forget_profiles",
                    "acting_for",
                    "close",
                    "count",
                ):
                    offenders.append(where)
            if isinstance(node, ast.Attribute | ast.Name | ast.FunctionDef | ast.AsyncFunctionDef):
                if getattr(node, "attr", None) == "require_admin" or getattr(node, "id", None) == "require_admin":
                    offenders.append(where)
                if getattr(node, "name", None) == "require_admin":
                    offenders.append(where)
    assert offenders == []
