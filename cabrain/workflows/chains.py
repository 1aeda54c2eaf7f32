"""Local chains of growing complexity (design 003, "OSS learning iterations"):

1. ``single``: one model, the task's own prompt;
2. ``constrained``: one model whose server holds its answer to the kind's shape, a JSON Schema
   from the kind's references (constrained decoding; JSON and label tasks, OpenAI-compatible servers:
   :mod:`cabrain.workflows.shapes`);
3. ``strict``: one model, a prompt that holds it to the format the task asks for (a prompt variant);
4. ``enhanced``: one model, with reasoning instructions and similar solved tasks recalled from
   CaBrain's memory as examples (the other variant);
5. ``self_check``: one model answers, then checks its own answer against the task and corrects it;
6. ``decompose``: one model breaks the task into steps, a second carries them out;
7. ``plan_verify``: one model plans, a second executes, a third checks the answer and corrects it.

:func:`candidates` lists them over every registered local model: each model alone first (so that
every model is tried before any chain of two), then each constrained where the kind has a shape,
then each prompt variant and self-check per model,
then every ordered pair of models, then three in turn; learning tries them in that order within its
budget (``CABRAIN_WORKFLOW_MAX_ATTEMPTS`` a reference) and says how many there were.

A chain is named by its kind and its models (``ChainSpec.key``, e.g. ``decompose:qwen3+llama3``):
that is what a task cluster learns and what routing runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cabrain.errors import InputError
from cabrain.providers.llm_calls import ModelCallError
from cabrain.workflows import shapes
from cabrain.workflows.calls import Caller, Step
from cabrain.workflows.registry import ModelAgent

KINDS = ("single", "constrained", "strict", "enhanced", "self_check", "decompose", "plan_verify")
ROLES = {
    "single": ("answer",),
    "constrained": ("answer",),
    "strict": ("answer",),
    "enhanced": ("answer",),
    "self_check": ("answer", "verify"),
    "decompose": ("plan", "answer"),
    "plan_verify": ("plan", "answer", "verify"),
}

FORMAT = {
    "json": "Answer with a single JSON value and nothing else.",
    "code": "Answer with the code only, in one fenced code block.",
    "text": "Answer directly and concisely: the answer only.",
    "label": "Answer with the label only: one of those the task names, nothing else.",
    "markdown": "Answer in Markdown, in the shape the task asks for, and nothing else.",
    "javascript": "Answer with the JavaScript code only, in one fenced code block.",
}
SYSTEM_ANSWER = "You complete tasks. {format}"
SYSTEM_ENHANCED = (
    "You complete tasks carefully. Work out the task step by step before answering, check every "
    "number, name and field against the task, and output only the final answer. {format}"
)
SYSTEM_STRICT = (
    "Do exactly what the task asks and nothing more. Output only what it asks for, in the format it "
    "asks for: no explanation, no preamble, no notes. {format}"
)
SYSTEM_PLAN = "You plan tasks. Break the task into at most 5 short, concrete steps. Reply with the numbered steps only."
SYSTEM_FOLLOW = "You complete tasks by following the given steps. {format}"
SYSTEM_VERIFY = (
    "You verify answers. If the answer fully and correctly completes the task, reply with it "
    "unchanged; otherwise reply with a corrected answer. {format}"
)


@dataclass(frozen=True)
class ChainSpec:
    kind: str
    agents: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"unknown chain kind {self.kind!r}")
        if len(self.agents) != len(ROLES[self.kind]):
            raise InputError(f"a {self.kind} chain takes {len(ROLES[self.kind])} model(s), got {len(self.agents)}")

    @property
    def key(self) -> str:
        return f"{self.kind}:{'+'.join(self.agents)}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "agents": list(self.agents), "key": self.key}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChainSpec:
        return cls(data["kind"], tuple(data["agents"]))


@dataclass(frozen=True)
class TaskPrompt:
    description: str
    context: str
    task_type: str
    examples: tuple[tuple[str, str], ...] = ()  # (task, answer) of similar solved tasks
    schema: dict[str, Any] | None = None  # the kind's shape, for a constrained chain (shapes.of_references)

    def text(self) -> str:
        return f"Task:\n{self.description}" + (f"\n\nContext:\n{self.context}" if self.context else "")

    def with_examples(self) -> str:
        if not self.examples:
            return self.text()
        shown = "\n\n".join(f"Example task:\n{t}\nIts answer:\n{a}" for t, a in self.examples)
        return f"Similar tasks solved before:\n\n{shown}\n\n{self.text()}"


@dataclass
class ChainRun:
    spec: ChainSpec
    steps: list[Step] = field(default_factory=list)
    output: str | None = None
    error: str | None = None


def candidates(local: list[ModelAgent], *, shaped: bool = False) -> list[ChainSpec]:
    """Every chain over the ``local`` models, simplest first (the module docstring): each model
    alone; each held to the kind's shape (when ``shaped``: the kind has one, and the model speaks the
    OpenAI wire, which carries it); each with the strict prompt, with self-check, with the enhanced
    prompt; every ordered pair decomposing and executing (one model with itself when it is the only
    one); three in turn planning, executing and verifying. Learning tries a prefix of it (its budget)."""
    names = [a.name for a in local]
    if not names:
        return []
    out = [ChainSpec("single", (n,)) for n in names]
    if shaped:
        out += [ChainSpec("constrained", (a.name,)) for a in local if a.provider == "openai"]
    out += [ChainSpec("strict", (n,)) for n in names]
    out += [ChainSpec("self_check", (n, n)) for n in names]
    out += [ChainSpec("enhanced", (n,)) for n in names]
    pairs = [(a, b) for a in names for b in names if a != b] or [(names[0], names[0])]
    out += [ChainSpec("decompose", pair) for pair in pairs]
    out += [ChainSpec("plan_verify", tuple(names[(i + j) % len(names)] for j in range(3))) for i in range(len(names))]
    return out


async def run(
    caller: Caller, spec: ChainSpec, agents: dict[str, ModelAgent], task: TaskPrompt, *, purpose: str, task_id: Any
) -> ChainRun:
    """Run ``spec`` on ``task``; a failing call ends the chain with ``error`` set (its calls are
    recorded either way)."""
    done = ChainRun(spec)
    fmt = FORMAT[task.task_type]

    async def step(role: str, name: str, system: str, user: str, schema: dict[str, Any] | None = None) -> str:
        agent = agents.get(name)
        if agent is None or not agent.active:
            raise ModelCallError(f"model agent {name!r} is not registered or not active")
        result = await caller.call(agent, system, user, purpose=purpose, task_id=task_id, role=role, schema=schema)
        done.steps.append(result)
        return result.output

    try:
        if spec.kind == "single":
            done.output = await step("answer", spec.agents[0], SYSTEM_ANSWER.format(format=fmt), task.text())
        elif spec.kind == "constrained":
            if task.schema is None:
                raise ModelCallError(f"no shape is known for this kind of {task.task_type} task yet")
            answer = await step(
                "answer", spec.agents[0], SYSTEM_ANSWER.format(format=fmt), task.text(), schema=task.schema
            )
            done.output = shapes.answer_of(task.task_type, answer)
        elif spec.kind == "strict":
            done.output = await step("answer", spec.agents[0], SYSTEM_STRICT.format(format=fmt), task.text())
        elif spec.kind == "enhanced":
            done.output = await step("answer", spec.agents[0], SYSTEM_ENHANCED.format(format=fmt), task.with_examples())
        elif spec.kind == "self_check":
            answer = await step("answer", spec.agents[0], SYSTEM_ANSWER.format(format=fmt), task.text())
            done.output = await step(
                "verify",
                spec.agents[1],
                SYSTEM_VERIFY.format(format=fmt),
                f"{task.text()}\n\nAnswer to check:\n{answer}",
            )
        else:
            plan = await step("plan", spec.agents[0], SYSTEM_PLAN, task.text())
            answer = await step(
                "answer", spec.agents[1], SYSTEM_FOLLOW.format(format=fmt), f"{task.text()}\n\nSteps:\n{plan}"
            )
            if spec.kind == "plan_verify":
                answer = await step(
                    "verify",
                    spec.agents[2],
                    SYSTEM_VERIFY.format(format=fmt),
                    f"{task.text()}\n\nAnswer to check:\n{answer}",
                )
            done.output = answer
    except ModelCallError as exc:
        done.error = str(exc)
    return done
