"""The redactor, table-driven: every planted secret goes, ordinary text stays."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cabrain.redact import PRIVATE, REDACTED, _compiled, _replace, redact, redact_deep, strip_private
from tests.secrets_table import SECRETS

KEPT = [  # text that looks a little like secrets and must come through unchanged
    "mkdir -p build/out && tar -xzf data.tgz",
    "sort -u names.txt | uniq -c",
    "ssh -p 2222 deploy@host uptime",
    "The tokenizer splits Arabic and English words.",
    "max_tokens: 2048 and temperature 0.2",
    "We rotate the password every 90 days; the policy is in the wiki.",
    "git push -u origin main",
    "Use https://github.com/acme/api for the code.",
    "Ahmed's phone extension is 214.",
    "SELECT * FROM agent_keys WHERE revoked_at IS NULL",
    "postgresql://cabrain@/cabrain?host=/tmp/run",
    "the secret sauce: caching recall answers",
]


def test_there_are_more_than_a_hundred_planted_secrets():
    assert len(SECRETS) >= 100
    assert len({what for what, _, _ in SECRETS}) == len(SECRETS)


@pytest.mark.parametrize(("what", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_every_planted_secret_is_removed(what, text, secret):
    assert secret in text, "the table's secret must be in its text"
    cleaned = redact(text)
    assert secret not in cleaned, cleaned
    assert REDACTED in cleaned or PRIVATE in cleaned
    assert redact(cleaned) == cleaned  # idempotent


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == text


def test_redacting_before_cutting_short_leaves_no_half_token():
    command = "deploy --verbose " * 20 + "--token Pl4ntedTokenAtTheCut0123456789"
    assert "Pl4nted" not in redact(command)[:300]
    assert "Pl4nted" not in redact(command[:330])[:300]


def test_private_blocks():
    assert strip_private("a <private>b</private> c") == f"a {PRIVATE} c"
    assert strip_private("a <private>b <private>c</private> d</private> e") == f"a {PRIVATE} e"
    assert strip_private("a <private>b") == f"a {PRIVATE}"
    assert strip_private("a b</private> c") == f"{PRIVATE} c"
    assert strip_private("no tags here") == "no tags here"


def test_deep_redaction_reaches_keys_and_nested_values():
    value = {"env": {"DB_PASSWORD=Pl4ntedKeyInKey": 1, "list": ["sk-ant-api03-Pl4ntedNestedKey0123456789abcdef"]}}
    assert "Pl4nted" not in repr(redact_deep(value))


# --- the assignment rules run only on texts holding one of the names they look for -----------------
def _every_rule(text: str) -> str:
    """What redaction was before the assignment rules were gated: every rule on every text."""
    _, rules = _compiled()
    text = strip_private(text)
    for rule, _ in rules:
        text = rule.sub(_replace, text)
    return text


FRAGMENTS = st.sampled_from(
    [
        "password",
        "PASSWORD",
        "paſſword",
        "Passwd",
        "pwd",
        "secret",
        "SECRET_KEY",
        "token",
        "api-key",
        "apıkey",
        "credentıals",
        "Credentials",
        "connection_string",
        "conn_str",
        "ssh_key",
        "K",
        "ey",
        "=",
        ":",
        ":=",
        "=>",
        " ",
        "\n",
        "'",
        '"',
        "hunter2",
        "x9!",
        "is",
        "the",
        "<private>",
        "</private>",
        "ß",
        "İ",
        "ı",
        "\x00",
    ]
)
TEXTS = st.lists(st.one_of(FRAGMENTS, st.text(max_size=8)), max_size=24).map("".join)


@given(TEXTS)
@settings(max_examples=400, deadline=None)
def test_gating_the_assignment_rules_changes_no_answer(text: str) -> None:
    assert redact(text) == _every_rule(text)


@pytest.mark.parametrize(("what", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_gating_changes_no_planted_secret(what, text, secret) -> None:
    assert redact(text) == _every_rule(text), what
