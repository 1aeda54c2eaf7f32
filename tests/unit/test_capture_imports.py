"""The capture hook's path stays standard library only: it runs on every Claude Code hook event, and
its wall time is benchmarked (``cabrain bench capture``)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cabrain.faces import hooks
from tests.conftest import REPO

HEAVY = ("asyncpg", "numpy", "pydantic", "httpx", "fastapi", "ray", "torch")
HOOK_SCRIPT = REPO / "cabrain" / "faces" / "capture_hook.py"
DATABASE_PATH = "cabrain.faces.capture.database"  # the path without a service: the one lazy import allowed

# Imports the hook, then handles events with the service down (planning, the request, the local
# queue) and a flush, as the hook would; prints what ended up in sys.modules.
HOOK_RUN = """
import io, json, sys
import cabrain.faces.capture_hook
from cabrain.faces.capture import main
for event in json.loads(sys.argv[1]):
    sys.stdin = io.StringIO(json.dumps(event))
    assert main([]) == 0
main(["--flush"])
print(json.dumps(sorted(sys.modules)))
"""


def _hook_modules(tmp_path: Path) -> list[str]:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/api.git\n')
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps({"type": "assistant", "message": {"role": "assistant", "content": "We decided to use Redis."}})
    )
    base = {"session_id": "s-1", "cwd": str(project), "transcript_path": str(transcript)}
    events = [
        {**base, "hook_event_name": "SessionStart"},
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "Why does the staging deploy time out?"},
        {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "make"}},
        {**base, "hook_event_name": "PreCompact"},
        {**base, "hook_event_name": "Stop"},
    ]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "CABRAIN_HOME": str(tmp_path / "home"),
        "CABRAIN_API_URL": "http://127.0.0.1:9",  # nothing listens: the events are queued
        "CABRAIN_API_KEY": "cbk_x",
    }
    done = subprocess.run(
        [sys.executable, "-c", HOOK_RUN, json.dumps(events)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "queued locally" in done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.subprocess
def test_the_hook_imports_no_heavy_package_and_only_its_own_modules(tmp_path: Path) -> None:
    modules = _hook_modules(tmp_path)
    assert not [m for m in modules if m.split(".")[0] in HEAVY]
    ours = {m for m in modules if m == "cabrain" or m.startswith("cabrain.")}
    # exactly the modules `cabrain hooks install` compiles, and the entry script
    assert ours == {m.__name__ for m in hooks.HOOK_MODULES} | {"cabrain.faces.capture_hook"}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at the top level) for every import in the file at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    top |= {id(n) for node in tree.body if isinstance(node, ast.If) for n in ast.walk(node)}  # TYPE_CHECKING
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            found.append((node.module or "", id(node) in top))
    return found


def test_the_hook_modules_import_only_the_standard_library_and_each_other() -> None:
    ours = {m.__name__ for m in hooks.HOOK_MODULES}
    files = [Path(m.__file__ or "") for m in hooks.HOOK_MODULES] + [HOOK_SCRIPT]
    for path in files:
        for module, top_level in _imports(path):
            root = module.split(".")[0]
            if root == "cabrain":
                allowed = module in ours or (module == DATABASE_PATH and not top_level)
                assert allowed, f"{path} imports {module}, which is not on the hook's standard-library path"
            else:
                assert root in sys.stdlib_module_names or root == "__future__", f"{path} imports {module}"
