"""The workflow testbed (``eval/workflows``): kinds of task with reference outputs, each a folder
holding ``kind.json`` (its name, task type, and how an output is judged right) and ``tasks.jsonl``
(``id``, ``task``, ``reference``; a code task its ``function`` and ``tests``), and whether an
output is right against its reference (:func:`right`), the measure of a local model's accuracy.

- ``json``: every field of the reference's object is in the output's, equal (numbers within a cent,
  text ignoring case and the space around it);
- ``label``: the output's label is the reference's (and one of the kind's ``labels``);
- ``markdown``: the output's blocks are the reference's, in order (a heading, then three bullets),
  and it states at least ``facts_at_least`` of the reference's numbers and names;
- ``javascript``: the function passes every one of the task's tests under Node.js, run with Node's
  permission model (no file system, no child processes or workers), a 64 MB heap and a time limit.
  Node 20's permission model does not cover the network: the checker is for the testbed's tasks and
  a model's answers to them on the operator's machine, not a sandbox for untrusted code in general.
"""

from __future__ import annotations

import json
import math
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cabrain.errors import ConfigError, InputError
from cabrain.workflows import TASK_TYPES
from cabrain.workflows.scoring import facts_match, label_of, load_json, markdown_blocks, unfence

NODE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Task:
    id: str
    task: str  # as a person would hand it to a model
    reference: str
    function: str | None = None  # a code task: the function its tests call
    tests: tuple[dict[str, Any], ...] = ()  # {"args": [...], "expect": ...}


@dataclass(frozen=True)
class Kind:
    name: str
    task_type: str
    about: str
    tasks: tuple[Task, ...]
    labels: tuple[str, ...] = ()
    facts_at_least: float = 0.6
    folder: Path = field(default=Path("."), compare=False)


def load(folder: Path, *, names: list[str] | None = None, limit: int | None = None) -> list[Kind]:
    """The kinds in ``folder`` (each a subfolder with ``kind.json``), by name; only ``names`` when
    given (an unknown one is an error), each with its first ``limit`` tasks when given."""
    if not folder.is_dir():
        raise ConfigError(f"no testbed at {folder}", hint="point --testbed at eval/workflows in a CaBrain checkout")
    kinds = {k.name: k for k in (_kind(path.parent, limit) for path in sorted(folder.glob("*/kind.json")))}
    if not kinds:
        raise ConfigError(f"no kind of task in {folder} (a folder with kind.json and tasks.jsonl)")
    unknown = sorted(set(names or ()) - set(kinds))
    if unknown:
        raise InputError(f"no kind named {', '.join(unknown)} in {folder}", hint=f"the kinds: {', '.join(kinds)}")
    return [kinds[n] for n in (names or sorted(kinds))]


def _kind(folder: Path, limit: int | None) -> Kind:
    about = json.loads((folder / "kind.json").read_text(encoding="utf-8"))
    task_type = about.get("task_type")
    if task_type not in TASK_TYPES:
        raise ConfigError(f"{folder / 'kind.json'}: task_type must be one of {', '.join(TASK_TYPES)}")
    tasks = []
    with (folder / "tasks.jsonl").open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            try:
                tasks.append(
                    Task(row["id"], row["task"], row["reference"], row.get("function"), tuple(row.get("tests") or ()))
                )
            except KeyError as exc:
                raise ConfigError(f"{folder / 'tasks.jsonl'} line {number}: no {exc.args[0]}") from None
            if limit is not None and len(tasks) >= limit:
                break
    return Kind(
        str(about.get("name") or folder.name),
        task_type,
        str(about.get("about", "")),
        tuple(tasks),
        tuple(about.get("labels") or ()),
        float(about.get("facts_at_least", 0.6)),
        folder,
    )


def right(kind: Kind, task: Task, output: str) -> tuple[bool, str]:
    """Whether ``output`` is right for ``task`` (the module's rules), and why not."""
    if not output.strip():
        return False, "empty"
    if kind.task_type == "json":
        return _json_right(task.reference, output)
    if kind.task_type == "label":
        label = label_of(output)
        if kind.labels and label not in {x.casefold() for x in kind.labels}:
            return False, f"not one of the labels: {label[:60]!r}"
        return (True, "") if label == task.reference.casefold() else (False, f"{label!r}, not {task.reference!r}")
    if kind.task_type == "markdown":
        want, have = markdown_blocks(task.reference), markdown_blocks(output)
        if want != have:
            return False, f"its blocks are {', '.join(have) or 'none'}, not {', '.join(want)}"
        stated = facts_match(task.reference, output)
        if stated < kind.facts_at_least:
            return False, f"it states {stated:.0%} of the reference's facts"
        return True, ""
    if kind.task_type == "javascript":
        return run_tests(task, unfence(output))
    return (True, "") if output.strip() == task.reference.strip() else (False, "not the reference")


def _json_right(reference: str, output: str) -> tuple[bool, str]:
    want = json.loads(reference)
    try:
        have = load_json(output)
    except ValueError as exc:
        return False, f"not JSON: {exc}"
    if not isinstance(have, dict):
        return False, "not a JSON object"
    for key, value in want.items():
        got = have.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = _number(got)
            if number is None or not math.isclose(number, float(value), abs_tol=0.005):
                return False, f"{key}: {got!r}, not {value!r}"
        elif str(got if got is not None else "").strip().casefold() != str(value).strip().casefold():
            return False, f"{key}: {got!r}, not {value!r}"
    return True, ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.replace(",", "").strip())
        except ValueError:
            return None
    return None


# the candidate's code comes first, then this: the tests, each result on a line that starts with a
# nonce the code cannot read (it is in the script's text, which no file read may reach), so that
# code printing a result of its own and exiting proves nothing
HARNESS = """
;(function () {
  const NONCE = %s;
  const tests = %s;
  const fn = typeof %s === 'function' ? %s : undefined;
  if (!fn) { console.log(NONCE + JSON.stringify({ok: false, why: 'no function %s'})); return; }
  const same = (a, b) => (typeof a === 'number' && typeof b === 'number')
    ? Math.abs(a - b) < 1e-9 : JSON.stringify(a) === JSON.stringify(b);
  for (const t of tests) {
    let got;
    try { got = fn(...t.args); } catch (e) {
      console.log(NONCE + JSON.stringify({ok: false, why: 'threw ' + String(e).slice(0, 200)})); return;
    }
    if (!same(got, t.expect)) {
      console.log(NONCE + JSON.stringify({ok: false, why: JSON.stringify(t.args) + ' gave ' + JSON.stringify(got)
        + ', not ' + JSON.stringify(t.expect)}));
      return;
    }
  }
  console.log(NONCE + JSON.stringify({ok: true, why: ''}));
})();
"""


def run_tests(task: Task, code: str) -> tuple[bool, str]:
    """Run ``task``'s tests on ``code`` (JavaScript) under Node.js's permission model."""
    node = shutil.which("node")
    if node is None:
        raise ConfigError(
            "Node.js is not installed here: JavaScript tasks cannot be checked", hint="apt-get install nodejs"
        )
    if not task.function or not task.function.isidentifier():
        raise ConfigError(f"task {task.id}: a JavaScript task names its function (an identifier)")
    name = task.function
    nonce = secrets.token_hex(12)
    script = code + "\n" + HARNESS % (json.dumps(nonce), json.dumps([dict(t) for t in task.tests]), name, name, name)
    try:
        done = subprocess.run(
            [node, "--experimental-permission", "--max-old-space-size=64", "--no-warnings", "-"],
            input=script,
            capture_output=True,
            text=True,
            timeout=NODE_TIMEOUT_S,
            env={"PATH": "/usr/bin:/bin"},
        )
    except subprocess.TimeoutExpired:
        return False, f"its tests ran past {NODE_TIMEOUT_S:g} s"
    lines = [line.removeprefix(nonce) for line in done.stdout.splitlines() if line.startswith(nonce)]
    if not lines:
        said = [line for line in done.stderr.splitlines() if "Error" in line]
        return False, (said[0] if said else f"Node.js exited with {done.returncode}")[:300]
    result = json.loads(lines[-1])
    return bool(result.get("ok")), str(result.get("why", ""))[:300]


__all__ = ["Kind", "Task", "load", "right", "run_tests"]
