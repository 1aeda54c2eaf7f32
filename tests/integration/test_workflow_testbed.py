"""The workflow testbed (eval/workflows, cabrain/workflows/testbed.py): four kinds of task load, every
reference is right by its own kind's rule (the JavaScript ones pass their tests under Node.js), and
wrong outputs are told apart with the reason; the new task types' structure scores."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cabrain.errors import ConfigError, InputError
from cabrain.workflows import scoring, testbed

pytestmark = pytest.mark.subprocess  # Node.js checks JavaScript

TESTBED = Path(__file__).parents[2] / "eval" / "workflows"


@pytest.fixture(scope="module")
def kinds() -> dict[str, testbed.Kind]:
    return {k.name: k for k in testbed.load(TESTBED)}


def test_four_kinds_each_right_on_its_references(kinds: dict[str, testbed.Kind]) -> None:
    assert {k: (v.task_type, len(v.tasks)) for k, v in kinds.items()} == {
        "incident-summary": ("markdown", 20),
        "invoice-fields": ("json", 30),
        "js-functions": ("javascript", 12),
        "ticket-triage": ("label", 30),
    }
    for kind in kinds.values():
        assert len({t.id for t in kind.tasks}) == len(kind.tasks)
        for task in kind.tasks:
            assert testbed.right(kind, task, task.reference) == (True, ""), (kind.name, task.id)
            assert scoring.structural(kind.task_type, task.reference, task.reference) == pytest.approx(1.0)
            assert scoring.validate(kind.task_type, task.reference) is None
    assert {t.reference for t in kinds["ticket-triage"].tasks} == set(kinds["ticket-triage"].labels)
    assert [k.name for k in testbed.load(TESTBED, names=["js-functions"], limit=2)] == ["js-functions"]
    assert len(testbed.load(TESTBED, names=["ticket-triage"], limit=2)[0].tasks) == 2
    with pytest.raises(InputError, match="no kind named"):
        testbed.load(TESTBED, names=["poems"])
    with pytest.raises(ConfigError, match="no testbed"):
        testbed.load(TESTBED / "missing")


def test_wrong_answers_are_wrong_and_say_why(kinds: dict[str, testbed.Kind]) -> None:
    invoices, tickets = kinds["invoice-fields"], kinds["ticket-triage"]
    task = invoices.tasks[0]
    fields = json.loads(task.reference)
    fenced = (
        "```json\n"
        + json.dumps({**fields, "vendor": fields["vendor"].upper(), "total": str(fields["total"])})
        + "\n```"
    )
    assert testbed.right(invoices, task, fenced) == (True, "")  # case, a number written as text, a fence
    assert testbed.right(invoices, task, json.dumps({**fields, "total": fields["total"] + 1}))[1].startswith("total:")
    assert testbed.right(invoices, task, json.dumps({**fields, "currency": "XXX"}))[0] is False
    assert testbed.right(invoices, task, "the total is 5")[1].startswith("not JSON")
    ticket = tickets.tasks[0]
    assert testbed.right(tickets, ticket, f"**{ticket.reference.title()}**.")[0]
    other = next(label for label in tickets.labels if label != ticket.reference)
    assert testbed.right(tickets, ticket, other)[0] is False
    assert "not one of the labels" in testbed.right(tickets, ticket, "urgent")[1]
    incidents = kinds["incident-summary"]
    summary = incidents.tasks[0]
    assert testbed.right(incidents, summary, summary.reference.replace("- ", "1. "))[1].startswith("its blocks are")
    vague = "## Summary\n\n- Something failed.\n- Some users saw errors.\n- It was fixed.\n"
    assert "of the reference's facts" in testbed.right(incidents, summary, vague)[1]


def test_javascript_runs_its_tests_and_nothing_else(kinds: dict[str, testbed.Kind]) -> None:
    js = kinds["js-functions"]
    clamp = next(t for t in js.tasks if t.function == "clamp")
    assert testbed.right(js, clamp, "```js\nconst clamp = (x, lo, hi) => x < lo ? lo : x > hi ? hi : x;\n```") == (
        True,
        "",
    )
    ok, why = testbed.right(js, clamp, "function clamp(x, lo, hi) { return x; }")
    assert not ok and "gave" in why
    assert testbed.right(js, clamp, "function clamp(x) {")[0] is False  # does not parse
    assert testbed.right(js, clamp, "function clip(x, lo, hi) { return x; }") == (False, "no function clamp")
    # a candidate printing a result of its own and leaving proves nothing
    cheat = 'console.log(JSON.stringify({ok: true, why: ""})); process.exit(0);\nfunction clamp() {}'
    assert testbed.right(js, clamp, cheat)[0] is False
    reads = 'function clamp(x, lo, hi) { require("fs").readFileSync("/etc/hostname"); return x; }'
    ok, why = testbed.right(js, clamp, reads)
    assert not ok and "Access to this API has been restricted" in why  # Node's permission model: no file system
    assert testbed.right(js, clamp, "function clamp() { while (true) {} }")[1].startswith("its tests ran past")
    with pytest.raises(ConfigError, match="names its function"):
        testbed.run_tests(replace(clamp, function="x; y"), "")


def test_the_new_task_types_structure_scores() -> None:
    reference = (
        "## Summary\n\n- What happened: the search service failed.\n- Impact: 30% of requests.\n- Fix: reverted.\n"
    )
    assert scoring.markdown_blocks(reference) == ["heading2", "bullet", "bullet", "bullet"]
    assert scoring.markdown_blocks("text\nmore text\n\n| a |\n| b |\n```\n# not a heading\n```\n") == [
        "paragraph",
        "table",
        "code",
    ]
    assert scoring.markdown_match(reference, reference) == 1.0
    assert 0 < scoring.markdown_match(reference, "The search service failed for 30% of requests.") < 0.5
    assert scoring.structural("label", "billing", "Label: Billing") == 1.0
    assert scoring.structural("label", "billing", "bug") == 0.0
    js = "function add(a, b) {\n  return a + b;\n}"
    assert scoring.javascript_match(js, "function plus(x, y) { return x + y; }") == 1.0  # names do not matter
    assert 0 < scoring.javascript_match(js, "function add(a, b) { if (a) { return a - b; } return 0; }") < 1
    assert scoring.javascript_match(js, "function add(a, b) { return a + ; }") == 0.0
    assert "does not parse as JavaScript" in (scoring.validate("javascript", "def f(): pass") or "")
    assert scoring.validate("label", "billing") is None
    assert scoring.validate("label", "I think this is about a billing problem really") is not None
    assert scoring.validate("markdown", "   ") is not None
