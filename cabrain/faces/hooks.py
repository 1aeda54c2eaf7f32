"""``cabrain hooks install|uninstall``: CaBrain's capture hooks in Claude Code's settings file.

Claude Code runs each hook command with the event as JSON on stdin. Installing adds one entry per
event whose command runs ``cabrain capture`` (see :func:`capture_command`); every other hook,
and every other setting, is kept.
Uninstalling removes exactly the entries installing added (recognised by their command).
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import shlex
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import cabrain
import cabrain.paths
import cabrain.redact
from cabrain import faces
from cabrain.errors import InputError
from cabrain.faces import capture
from cabrain.faces.capture import EVENTS, config, events, hook, project, redaction, transport

# What the hook imports (besides the standard library), its entry script aside.
HOOK_MODULES: tuple[ModuleType, ...] = (
    cabrain,
    cabrain.paths,
    cabrain.redact,
    faces,
    capture,
    config,
    events,
    hook,
    project,
    redaction,
    transport,
)


def settings_path(scope: str, cwd: Path) -> Path:
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    return cwd / ".claude" / "settings.json"


def capture_command(command: str | None = None) -> str:
    """The hook command: this installation's Python by absolute path (so the hook works whatever
    PATH Claude Code runs with) on :mod:`cabrain.faces.capture_hook`, without site-packages set-up
    (``-S``): the same as ``cabrain capture``, about 15 ms faster on every event."""
    if command:
        return command
    spec = importlib.util.find_spec("cabrain.faces.capture_hook")  # found, not run: it rewrites sys.path
    script = Path(spec.origin if spec and spec.origin else "").resolve()
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(str(script))}"


def compile_hook_modules() -> list[str]:
    """Write the bytecode of the modules the hook imports, so no event compiles them again (an
    install from a wheel has it already; an editable one, or ``PYTHONDONTWRITEBYTECODE``, may
    not). Returns the files compiled; an unwritable install is left as it is."""
    done = []
    for module in HOOK_MODULES:
        source = module.__file__ or ""
        try:
            py_compile.compile(source, cfile=importlib.util.cache_from_source(source), doraise=True)
            done.append(source)
        except (OSError, py_compile.PyCompileError):
            continue
    return done


def _ours(entry: dict[str, Any]) -> bool:
    """A hook entry this command installed: ``... cabrain capture`` or ``... capture_hook.py``."""

    def ours(command: str) -> bool:
        try:
            words = shlex.split(command)
        except ValueError:
            return False
        return (
            bool(words)
            and "cabrain" in command
            and (words[-1] == "capture" or words[-1].endswith(f"cabrain{os.sep}faces{os.sep}capture_hook.py"))
        )

    return any(isinstance(h, dict) and ours(str(h.get("command", ""))) for h in entry.get("hooks", []))


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise InputError(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise InputError(f"{path} does not hold a settings object with a 'hooks' mapping; nothing was changed")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def install(path: Path, command: str, *, timeout_s: int = 10) -> bool:
    """Add the capture hooks; False if they were all there already."""
    data = _read(path)
    hooks = data.setdefault("hooks", {})
    changed = False
    for event in EVENTS:
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise InputError(f"{path}: hooks.{event} is not a list; nothing was changed")
        if any(_ours(e) for e in entries if isinstance(e, dict)):
            continue
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": timeout_s}]}
        if event == "PostToolUse":
            entry["matcher"] = "*"
        entries.append(entry)
        changed = True
    if changed:
        _write(path, data)
    return changed


def uninstall(path: Path) -> bool:
    """Remove the capture hooks (only those); False if there were none."""
    data = _read(path)
    hooks = data.get("hooks", {})
    changed = False
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept = [e for e in entries if not (isinstance(e, dict) and _ours(e))]
        if len(kept) != len(entries):
            changed = True
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if changed:
        if not hooks:
            data.pop("hooks", None)
        _write(path, data)
    return changed
