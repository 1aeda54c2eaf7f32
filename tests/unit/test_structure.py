"""The shape of the code, kept: no import cycles (counting imports inside functions, so none can
hide one), no module over 500 lines, and nothing under ``cabrain`` importing the repository's
top-level shims (``serve_apps``, ``jobs``), which a wheel does not install."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cabrain", "serve_apps", "jobs")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module an import of ``name`` runs last (``a.b.c`` may be a name in module ``a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> set[str]:
    """The first-party modules ``module`` imports, at module level or inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" for a in node.names] or [base]
        for name in names:
            if name.split(".")[0] in PACKAGES:
                target = _resolve(name)
                # importing a.b.c runs a and a.b first: not an edge of module a.b.c's own
                if target and target != module and not module.startswith(target + "."):
                    out.add(target)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_there_are_no_import_cycles_not_even_through_imports_inside_functions() -> None:
    graph = {m: _imports(m, p) for m, p in MODULES.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_500_lines(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(ROOT)} has {lines} lines"


def test_the_package_never_imports_the_repository_shims() -> None:
    offenders = {
        m: sorted(t for t in _imports(m, p) if t.split(".")[0] in ("serve_apps", "jobs"))
        for m, p in MODULES.items()
        if m.split(".")[0] == "cabrain"
    }
    assert {m: t for m, t in offenders.items() if t} == {}


# The floors of the code, lowest first. A unit (a package under cabrain/, or a top-level module) may
# import units on its own floor or below, never above; ARCHITECTURE.md describes each floor. A new
# package or top-level module must be placed here (the first test fails until it is).
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "ground",
        frozenset(
            "errors fixes types clock paths logs limits localfiles edge egress_http egress policy "
            "redact namespaces settings text progress".split()
        ),
    ),
    ("providers", frozenset({"providers"})),
    # identity and failpoints speak to the database through store/ (store/identity.py, store/db.py)
    ("store", frozenset({"store", "ray_runtime", "identity", "failpoints"})),
    ("engine", frozenset({"governance", "engine"})),
    ("search", frozenset({"search"})),
    ("write", frozenset({"write"})),
    ("trust", frozenset({"actions", "gate", "membership"})),
    ("offline", frozenset({"sleep", "workflows", "localmodels"})),
    ("brain", frozenset({"brain", "judging", "corrections", "explain", "overview", "entity_care"})),
    ("faces", frozenset("client faces facades connectors importers channels notify portable".split())),
    ("serve", frozenset({"serve"})),
    (
        "commands",
        frozenset(
            "service doctor scratch eval eval_conversations eval_decisions eval_dialogue eval_facts bench cli jobs entry __main__".split()
        ),
    ),
)
FLOOR = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    """The unit a module belongs to: ``cabrain.search.recall`` -> ``search``, ``cabrain.gate`` -> ``gate``."""
    parts = module.split(".")
    return parts[1] if parts[0] == "cabrain" and len(parts) > 1 else parts[0]


def _unit_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], list[str]] = {}
    for module, path in MODULES.items():
        if not module.startswith("cabrain.") or module == "cabrain":
            continue
        for target in _imports(module, path):
            a, b = _unit(module), _unit(target)
            if a != b and target.startswith("cabrain."):
                graph.setdefault(a, set()).add(b)
                why.setdefault((a, b), []).append(f"{module} -> {target}")
    return graph, why


def test_every_unit_has_a_floor() -> None:
    units = {_unit(m) for m in MODULES if m.startswith("cabrain.")}
    assert sorted(units - FLOOR.keys()) == []
    assert sorted(FLOOR.keys() - units) == []


def test_no_import_runs_up_a_floor_not_even_inside_a_function() -> None:
    _, why = _unit_graph()
    upward = {
        f"{a} ({LAYERS[FLOOR[a]][0]}) -> {b} ({LAYERS[FLOOR[b]][0]})": edges
        for (a, b), edges in sorted(why.items())
        if FLOOR.get(b, -1) > FLOOR.get(a, -1)
    }
    assert upward == {}


def test_no_loop_between_packages() -> None:
    graph, why = _unit_graph()
    loops = _cycles(graph)
    assert loops == [], {
        " -> ".join(loop): [e for (a, b), es in why.items() if a in loop and b in loop for e in es] for loop in loops
    }
