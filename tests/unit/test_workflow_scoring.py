"""Scoring a local output against the frontier reference: structure by task type, the judge's
answer, the weights, and what happens without a judge."""

import json

import pytest

from cabrain.workflows import scoring
from cabrain.workflows.chains import ChainSpec, candidates
from cabrain.workflows.registry import ModelAgent

REF_JSON = '{"invoice": 1042, "total": 250.4, "currency": "EUR", "lines": [{"sku": "A1", "qty": 2}]}'


def test_json_compares_schema_and_values():
    assert scoring.json_match(REF_JSON, REF_JSON) == 1.0
    fenced = '```json\n{"currency": "eur", "total": 250.40, "invoice": 1042, "lines": [{"qty": 2, "sku": "A1"}]}\n```'
    assert scoring.json_match(REF_JSON, fenced) == 1.0  # order, case, fences and 250.40 vs 250.4 do not matter
    wrong_total = REF_JSON.replace("250.4", "25.4")
    assert scoring.json_match(REF_JSON, wrong_total) == pytest.approx(0.5 + 0.5 * 4 / 5)
    wrong_type = REF_JSON.replace("1042", '"1042"')
    assert scoring.json_match(REF_JSON, wrong_type) == pytest.approx(0.5 * 4 / 5)
    assert scoring.json_match(REF_JSON, "the total is 250.4") == 0.0


def test_code_must_parse_and_is_compared_by_shape():
    ref = "def area(w, h):\n    return w * h\n"
    assert (
        scoring.code_match(ref, "```python\ndef size(a, b):\n    return a * b\n```") == 1.0
    )  # names differ, shape same
    assert (
        0.3
        < scoring.code_match(ref, "def area(w, h):\n    if w < 0:\n        raise ValueError\n    return w * h\n")
        < 1.0
    )
    assert scoring.code_match(ref, "def area(w, h) return w * h") == 0.0


def test_text_checks_the_numbers_and_names_the_reference_states():
    ref = "Project Falcon carries moderate risk: its budget of 120000 leaves 14 days of slack."
    assert scoring.facts_match(ref, "Falcon: budget 120,000, slack of 14 days; moderate risk.") == 1.0
    assert scoring.facts_match(ref, "Falcon has 12 days of slack.") == pytest.approx(1 / 3)
    assert scoring.facts_match("It went well.", "Fine.") == 1.0  # nothing to check: left to the other measures
    assert scoring.facts_match(ref, "") == 0.0


def test_the_judge_answer_and_the_weights():
    assert scoring.parse_judge('Sure! {"score": 85, "reason": "close"}') == (0.85, "close")
    for bad in ("eighty", '{"score": 140}', '{"score": true}', '{"grade": 5}'):
        with pytest.raises(ValueError):
            scoring.parse_judge(bad)
    weights = scoring.Weights(0.3, 0.5, 0.2)
    full = scoring.combine(0.9, 0.8, 1.0, weights)
    assert full.value == pytest.approx(0.3 * 0.9 + 0.5 * 0.8 + 0.2 * 1.0) and full.complete
    partial = scoring.combine(0.9, None, 1.0, weights, "the judge failed: down")
    assert partial.value == pytest.approx((0.3 * 0.9 + 0.2 * 1.0) / 0.5)
    assert not partial.complete and partial.parts()["judge"] is None and "down" in partial.parts()["judge_error"]


def test_validation_at_routing_time():
    assert scoring.validate("json", '{"a": 1}') is None
    assert "not JSON" in scoring.validate("json", "Sorry, no JSON today.")
    assert "does not parse" in scoring.validate("code", "def f(:\n pass")
    assert scoring.validate("text", "   ") == "the output is empty"


def test_chains_grow_from_one_model_to_three_over_every_model():
    """Every registered model is tried alone before any chain of two; then the prompt variants and
    self-check of each; then every ordered pair; then three in turn."""
    names = ["qwen", "llama", "phi"]
    local = [ModelAgent(n, "local", "openai", n[0], "http://h") for n in names]
    keys = [c.key for c in candidates(local)]
    assert keys == [
        "single:qwen", "single:llama", "single:phi",
        "strict:qwen", "strict:llama", "strict:phi",
        "self_check:qwen+qwen", "self_check:llama+llama", "self_check:phi+phi",
        "enhanced:qwen", "enhanced:llama", "enhanced:phi",
        "decompose:qwen+llama", "decompose:qwen+phi", "decompose:llama+qwen",
        "decompose:llama+phi", "decompose:phi+qwen", "decompose:phi+llama",
        "plan_verify:qwen+llama+phi", "plan_verify:llama+phi+qwen", "plan_verify:phi+qwen+llama",
    ]  # fmt: skip
    assert {n for c in candidates(local) for n in c.agents} == set(names)
    assert [c.key for c in candidates(local[:1])] == [
        "single:qwen", "strict:qwen", "self_check:qwen+qwen", "enhanced:qwen", "decompose:qwen+qwen",
        "plan_verify:qwen+qwen+qwen",
    ]  # fmt: skip
    assert candidates([]) == []
    # held to the kind's shape (when it has one), each model that speaks the OpenAI wire, after each alone
    mixed = [*local[:2], ModelAgent("claude-h", "local", "anthropic", "h", "http://h")]
    assert [c.key for c in candidates(mixed, shaped=True)][3:6] == [
        "constrained:qwen", "constrained:llama", "strict:qwen",
    ]  # fmt: skip
    assert ChainSpec.from_json(ChainSpec("decompose", ("a", "b")).to_json()).key == "decompose:a+b"
    with pytest.raises(Exception, match="takes 2"):
        ChainSpec("decompose", ("a",))


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ("billing", "billing"),
        ("**Billing**.", "billing"),
        ("Label: Account access", "account access"),
        ("Billing: Tracking for #65378 has said 'in transit'", "billing"),  # a label, then why
        ("Shipping - the parcel is late", "shipping"),
        ("Account access \u2014 a password reset loop", "account access"),
        ("follow-up", "follow-up"),  # a hyphen inside a label is part of it
        ("The customer is upset about: billing", "the customer is upset about: billing"),  # not a label first
        ("```\nrefund\n```", "refund"),
    ],
)
def test_a_label_is_the_answers_first_words(answer: str, label: str) -> None:
    assert scoring.label_of(answer) == label
    assert scoring.structural("label", label, answer) == 1.0


def test_why_a_kind_stays_on_the_frontier() -> None:
    from cabrain.workflows.clusters import Cluster

    chain = {"kind": "single", "agents": ["m"], "key": "single:m"}
    good = Cluster(1, "ns", 9, chain, 0.95, 20, 0, 0.97, latency_ms=800.0, structure=1.0)
    assert good.why_not(0.95, 0.9, 60_000) is None and good.trusted(0.95, 0.9)
    assert Cluster(1, "ns", 1, None, None, 0, 0, 0.0).why_not(0.95, 0.9) == (
        "no local chain learned for this kind of task yet"
    )
    demoted = Cluster(1, "ns", 9, None, None, 0, 0, 0.0, demoted=("single:m",))
    assert "demoted on live accuracy (single:m)" in (demoted.why_not(0.95, 0.9) or "")
    malformed = Cluster(1, "ns", 9, chain, 0.4, 20, 0, 0.97, latency_ms=800.0, structure=0.2)
    assert "accuracy 0.40 of 0.9, structural match 0.20" in (malformed.why_not(0.95, 0.9) or "")
    slow = Cluster(1, "ns", 9, chain, 0.95, 20, 0, 0.97, latency_ms=90_000.0, structure=1.0)
    assert "latency 90000 ms over 60000" in (slow.why_not(0.95, 0.9, 60_000) or "")
    assert slow.why_not(0.95, 0.9, 0) is None and slow.why_not(0.95, 0.9) is None  # no limit
    unsure = Cluster(1, "ns", 9, chain, 0.95, 2, 1, 0.3, latency_ms=800.0, structure=1.0, demoted=("single:x",))
    assert (unsure.why_not(0.95, 0.9) or "").endswith("confidence 0.30 of 0.95); demoted on live accuracy: single:x")


def test_a_kinds_shape_from_its_references() -> None:
    from cabrain.workflows import shapes

    refs = [
        '{"invoice": 12, "total": 3.5, "lines": [{"sku": "a", "qty": 1}]}',
        '```json\n{"invoice": 13, "total": 4}\n```',
    ]
    schema = shapes.of_references("json", refs)
    assert schema is not None
    assert schema["required"] == ["invoice", "total"] and schema["additionalProperties"] is False
    assert schema["properties"]["invoice"] == {"type": "integer"}
    assert schema["properties"]["total"] == {"type": "number"}  # 3.5 and 4
    assert schema["properties"]["lines"]["items"]["properties"]["qty"] == {"type": "integer"}
    assert shapes.of_references("json", ["not json"]) is None
    assert shapes.of_references("json", ['[1, "a"]'])["items"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    task = "Classify this ticket into exactly one of: billing, bug, feature_request or shipping. Answer with the label."
    assert shapes.listed_labels(task) == ["billing", "bug", "feature_request", "shipping"]
    assert shapes.of_references("label", ["Shipping", "refund"], task)["enum"] == [
        "shipping",
        "refund",
        "billing",
        "bug",
        "feature_request",
    ]
    assert shapes.listed_labels("Pick one of: yes.") == []  # one item is not a list
    assert shapes.of_references("markdown", ["# a"]) is None
    assert shapes.answer_of("label", '"billing"') == "billing" and shapes.answer_of("label", "bug") == "bug"
    assert shapes.answer_of("json", '"x"') == '"x"'
    deep: object = 1
    for _ in range(20):
        deep = {"a": deep}
    assert json.dumps(shapes.of_references("json", [json.dumps(deep)])).count('"properties"') == shapes.MAX_DEPTH
