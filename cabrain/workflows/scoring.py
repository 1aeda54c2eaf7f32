"""How close a local chain's output is to the frontier reference, in [0, 1].

Three measures, weighted as the design says (``CABRAIN_WORKFLOW_WEIGHT_*``: 0.3 / 0.5 / 0.2):

- **embedding**: cosine similarity of the two outputs' embeddings (negative clipped to 0);
- **judge**: a configurable (local) model rates the candidate against the reference, 0-100;
- **structural**, by task type: JSON - the same schema (keys and value types) and the same
  values; code (Python) - it parses, and its syntax tree has the same shape; JavaScript - Node.js
  parses it, and its tokens' shape is the reference's; Markdown - the same blocks (headings by
  level, bullets, numbered items, code, tables, paragraphs) in the same order, and the reference's
  facts; a label - the same label; text - the numbers and the capitalised facts (names) the
  reference states are stated by the candidate too.

When the judge cannot be reached or answers nonsense, the score says so: ``judge`` is None,
``complete`` is False, ``judge_error`` tells why, and the score is the weighted mean of the parts
that were measured. Only complete scores count towards trusting a chain.
"""

from __future__ import annotations

import ast
import difflib
import json
import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import numpy as np

from cabrain.workflows import TASK_TYPES  # noqa: F401 - named here too, where the types are checked

JUDGE_SYSTEM = (
    "You judge how well a candidate answer matches a reference answer to the same task. "
    'Reply with a JSON object only: {"score": <0-100>, "reason": "<one sentence>"}. 100: the same '
    "facts, values and meaning; 0: wrong or unrelated. Wording and formatting do not matter."
)


@dataclass(frozen=True)
class Weights:
    embedding: float = 0.3
    judge: float = 0.5
    structural: float = 0.2


@dataclass(frozen=True)
class Score:
    value: float
    embedding: float
    judge: float | None
    structural: float
    complete: bool
    judge_error: str | None = None
    judge_reason: str | None = None

    def parts(self) -> dict[str, Any]:
        return {
            "embedding": round(self.embedding, 4),
            "judge": None if self.judge is None else round(self.judge, 4),
            "structural": round(self.structural, 4),
            "complete": self.complete,
            **({"judge_error": self.judge_error} if self.judge_error else {}),
            **({"judge_reason": self.judge_reason} if self.judge_reason else {}),
        }


def combine(
    embedding: float,
    judge: float | None,
    structural: float,
    weights: Weights,
    judge_error: str | None = None,
    judge_reason: str | None = None,
) -> Score:
    parts = [(embedding, weights.embedding), (structural, weights.structural)]
    if judge is not None:
        parts.append((judge, weights.judge))
    total = sum(w for _, w in parts)
    value = sum(v * w for v, w in parts) / total if total else 0.0
    return Score(max(0.0, min(1.0, value)), embedding, judge, structural, judge is not None, judge_error, judge_reason)


def cosine(a: Any, b: Any) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    return max(0.0, float(np.dot(x, y) / norm)) if norm else 0.0


def parse_judge(answer: str) -> tuple[float, str | None]:
    """The judge's 0-100 rating as [0, 1]; raises ValueError when there is none."""
    match = re.search(r"\{.*\}", answer, re.S)
    if match is None:
        raise ValueError(f"the judge answered without a JSON object: {answer[:120]!r}")
    data = json.loads(match.group(0))
    score = data.get("score") if isinstance(data, dict) else None
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 100 or math.isnan(score):
        raise ValueError(f"the judge's score is not a number from 0 to 100: {score!r}")
    reason = data.get("reason")
    return float(score) / 100.0, str(reason)[:300] if reason else None


def judge_prompt(task: str, reference: str, candidate: str) -> str:
    return f"Task:\n{task}\n\nReference answer:\n{reference}\n\nCandidate answer:\n{candidate}"


# --- structure --------------------------------------------------------------------------------
def structural(task_type: str, reference: str, candidate: str) -> float:
    if task_type == "json":
        return json_match(reference, candidate)
    if task_type == "code":
        return code_match(reference, candidate)
    if task_type == "label":
        return float(label_of(candidate) == label_of(reference))
    if task_type == "markdown":
        return markdown_match(reference, candidate)
    if task_type == "javascript":
        return javascript_match(reference, candidate)
    return facts_match(reference, candidate)


_FENCE = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)```", re.S)


def unfence(text: str) -> str:
    """The body of the first fenced block, or the text itself."""
    match = _FENCE.search(text)
    return match.group(1) if match else text.strip()


def load_json(text: str) -> Any:
    """The JSON value in ``text`` (fenced or bare); raises ValueError."""
    body = unfence(text)
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        match = re.search(r"[\[{].*[\]}]", body, re.S)
        if match is None:
            raise ValueError("no JSON value found") from None
        return json.loads(match.group(0))


def _schema(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _schema(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_schema(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{path}.{k}"))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_leaves(v, f"{path}[{i}]"))
        return out or {path: []}
    return {path: value}


def _same(a: Any, b: Any) -> bool:
    if (
        isinstance(a, int | float)
        and isinstance(b, int | float)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    return a == b


def json_match(reference: str, candidate: str) -> float:
    """Half for the same schema, half for the share of the reference's values the candidate has."""
    try:
        ref = load_json(reference)
    except ValueError:
        return facts_match(reference, candidate)  # the reference is not JSON: compare as text
    try:
        got = load_json(candidate)
    except ValueError:
        return 0.0
    schema = 1.0 if _schema(ref) == _schema(got) else 0.0
    want, have = _leaves(ref), _leaves(got)
    values = (
        sum(1 for k, v in want.items() if k in have and _same(v, have[k])) / len(want) if want else float(ref == got)
    )
    return 0.5 * schema + 0.5 * values


def _shape(tree: ast.AST) -> list[str]:
    return [type(node).__name__ for node in ast.walk(tree)]


def code_match(reference: str, candidate: str) -> float:
    """0 when the candidate does not parse (as Python); else how alike the two syntax trees'
    shapes are (node types in walk order, sequence similarity)."""
    try:
        got = ast.parse(unfence(candidate))
    except SyntaxError:
        return 0.0
    try:
        ref = ast.parse(unfence(reference))
    except SyntaxError:
        return facts_match(reference, candidate)  # not Python: compare as text
    return difflib.SequenceMatcher(a=_shape(ref), b=_shape(got), autojunk=False).ratio()


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*(?:\.\d+)?")
_WORD = re.compile(r"[\w-]+")


def _numbers(text: str) -> set[str]:
    out = set()
    for raw in _NUMBER.findall(text):
        try:
            out.add(f"{float(raw.replace(',', '')):g}")
        except ValueError:
            continue
    return out


def _facts(text: str) -> set[str]:
    """Numbers, and capitalised words (names) other than a sentence's first word."""
    names: set[str] = set()
    for sentence in re.split(r"(?<=[.!?:;])\s+|\n+", text):
        words = _WORD.findall(sentence)
        names.update(w.casefold() for w in words[1:] if w[:1].isupper())
    return _numbers(text) | names


def facts_match(reference: str, candidate: str) -> float:
    """The share of the reference's numbers and names the candidate states too (1 when it has
    none to check, so plain prose is left to the other measures)."""
    want = _facts(reference)
    if not want:
        return 1.0 if candidate.strip() else 0.0
    have = _numbers(candidate) | {w.casefold() for w in _WORD.findall(candidate)}
    return len(want & have) / len(want)


_EXPLAINED = re.compile(r"^(?P<head>[^:\n]{1,40}?)\s*(?::|\s[-\u2013\u2014]|\s?\u2014)\s+\S")


def label_of(text: str) -> str:
    """A label as an answer gives it: its first line, without the quotes, punctuation, markup and
    case around it ("**Billing**." -> "billing"); a label of one to three words followed by an
    explanation ("Billing: the invoice was charged twice", "Shipping - late parcel") is the label."""
    first = next((line for line in unfence(text).splitlines() if line.strip()), "")
    first = re.sub(r"^(label|answer|category)\s*:\s*", "", first.strip(), flags=re.IGNORECASE)
    explained = _EXPLAINED.match(first)
    if explained and len(explained["head"].split()) <= 3:
        first = explained["head"]
    return first.strip(" \t\"'`*_.,;:!?()[]{}").casefold()


_BLOCKS = (
    ("code", re.compile(r"^\s*(```|~~~)")),
    ("heading", re.compile(r"^\s{0,3}(#{1,6})\s+\S")),
    ("bullet", re.compile(r"^\s*[-*+]\s+\S")),
    ("numbered", re.compile(r"^\s*\d+[.)]\s+\S")),
    ("table", re.compile(r"^\s*\|.*\|\s*$")),
    ("quote", re.compile(r"^\s*>")),
)


def markdown_blocks(text: str) -> list[str]:
    """The kinds of ``text``'s Markdown blocks in order: ``heading1``-``heading6``, bullet,
    numbered, code, table, quote, paragraph (a run of plain lines is one paragraph, a table's rows
    one table, a fenced block one code block)."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if fenced:
            fenced = not _BLOCKS[0][1].match(line)
            continue
        if not line.strip():
            out.append("")  # a blank line ends a paragraph
            continue
        kind = next((k for k, pattern in _BLOCKS if pattern.match(line)), "paragraph")
        if kind == "code":
            fenced = True
        elif kind == "heading":
            found = _BLOCKS[1][1].match(line)
            kind = f"heading{len(found.group(1))}" if found else kind
        if kind in ("paragraph", "table") and out and out[-1] == kind:
            continue  # the same paragraph or table goes on
        out.append(kind)
    return [k for k in out if k]


def markdown_match(reference: str, candidate: str) -> float:
    """Half for the shape (the blocks' kinds in order, sequence similarity), half for the
    reference's facts stated (:func:`facts_match`)."""
    want, have = markdown_blocks(reference), markdown_blocks(candidate)
    shape = difflib.SequenceMatcher(a=want, b=have, autojunk=False).ratio() if want or have else 1.0
    return 0.5 * shape + 0.5 * facts_match(reference, candidate)


_JS_TOKEN = re.compile(
    r"//[^\n]*|/\*.*?\*/|`(?:\\.|[^`\\])*`|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'"
    r"|[A-Za-z_$][\w$]*|\d[\d._]*|=>|===|!==|==|!=|<=|>=|&&|\|\||\+\+|--|\.\.\.|\S",
    re.S,
)
JS_KEYWORDS = frozenset(
    "async await break case catch class const continue default delete do else export extends finally for "
    "function if import in instanceof let new of return static switch this throw try typeof var void while "
    "yield".split()
)


def javascript_shape(code: str) -> list[str]:
    """JavaScript as the shape of its tokens: keywords and operators as themselves, names, numbers,
    strings and templates as their kind (what the code does, not what it calls things)."""
    out = []
    for token in _JS_TOKEN.findall(code):
        if token.startswith(("//", "/*")):
            continue
        if token[0] in "\"'`":
            out.append("str")
        elif token[0].isdigit():
            out.append("num")
        elif token[0].isalpha() or token[0] in "_$":
            out.append(token if token in JS_KEYWORDS else "id")
        else:
            out.append(token)
    return out


def javascript_error(code: str) -> str | None:
    """Why Node.js cannot parse ``code`` (None: it can); a clear error when Node.js is missing."""
    node = shutil.which("node")
    if node is None:
        return "Node.js is not installed here, so JavaScript cannot be checked (apt-get install nodejs)"
    done = subprocess.run(  # --check parses without running; the code comes on stdin
        [node, "--check", "--input-type=commonjs"], input=code, capture_output=True, text=True, timeout=30
    )
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return next((line for line in lines if "Error" in line), lines[-1] if lines else "it does not parse")


def javascript_match(reference: str, candidate: str) -> float:
    """0 when Node.js cannot parse the candidate; else how alike the two token shapes are."""
    code = unfence(candidate)
    if not code.strip() or javascript_error(code) is not None:
        return 0.0
    ref = javascript_shape(unfence(reference))
    return difflib.SequenceMatcher(a=ref, b=javascript_shape(code), autojunk=False).ratio()


# --- validation at routing time -----------------------------------------------------------------
def validate(task_type: str, output: str) -> str | None:
    """Why a routed local output cannot be handed back (None: it can): empty, a JSON task's output
    is not JSON, a code task's output does not parse."""
    if not output.strip():
        return "the output is empty"
    if task_type == "json":
        try:
            load_json(output)
        except ValueError as exc:
            return f"the output is not JSON: {exc}"
    if task_type == "code":
        try:
            ast.parse(unfence(output))
        except SyntaxError as exc:
            return f"the output does not parse: {exc.msg} (line {exc.lineno})"
    if task_type == "javascript":
        problem = javascript_error(unfence(output))
        if problem:
            return f"the output does not parse as JavaScript: {problem}"
    if task_type == "label" and (not label_of(output) or len(label_of(output).split()) > 4):
        return "the output is not a label (one short line)"
    if task_type == "markdown" and not markdown_blocks(output):
        return "the output holds no Markdown block"
    return None
