"""The bench's scripted frontier model (cabrain/bench/frontier.py): a task's reference for the
prompts CaBrain sends, and a judge that rates by the testbed's rule."""

from __future__ import annotations

import json
from pathlib import Path

from cabrain.bench.frontier import Oracle, tokens
from cabrain.workflows import chains, scoring, testbed

TESTBED = Path(__file__).parents[2] / "eval" / "workflows"


def test_it_answers_each_task_with_its_reference_and_judges_by_the_rule() -> None:
    kinds = testbed.load(TESTBED, names=["invoice-fields", "ticket-triage"])
    oracle = Oracle(kinds)
    invoice, ticket = kinds[0].tasks[3], kinds[1].tasks[5]
    for task, task_type in ((invoice, "json"), (ticket, "label")):
        prompt = chains.TaskPrompt(task.task, "", task_type)
        system = chains.SYSTEM_ANSWER.format(format=chains.FORMAT[task_type])
        assert oracle.answer(system, prompt.text()) == task.reference
        examples = chains.TaskPrompt(task.task, "", task_type, (("another task", "its answer"),))
        assert oracle.answer(system, examples.with_examples()) == task.reference
    assert oracle.answer("You complete tasks.", "Task:\nWrite a poem.") == "I do not know this task."
    judged = scoring.judge_prompt(
        chains.TaskPrompt(ticket.task, "", "label").text(), ticket.reference, ticket.reference
    )
    assert json.loads(oracle.answer(scoring.JUDGE_SYSTEM, judged)) == {"score": 100, "reason": "right"}
    wrong = scoring.judge_prompt(chains.TaskPrompt(invoice.task, "", "json").text(), invoice.reference, "{}")
    verdict = json.loads(oracle.answer(scoring.JUDGE_SYSTEM, wrong))
    assert verdict["score"] == 0 and verdict["reason"].startswith("vendor")
    assert scoring.parse_judge(oracle.answer(scoring.JUDGE_SYSTEM, wrong))[0] == 0.0
    assert tokens("") == 1 and tokens("x" * 400) == 100
