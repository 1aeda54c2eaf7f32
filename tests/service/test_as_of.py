"""``as_of`` and ``context`` through the service's faces (issue 34): the HTTP API, the Python client, the
command line, the console and capture's recall, on a memory revised twice. (MCP's tools:
tests/mcp_helpers.py; the edge guard drives the new fields with hostile values: test_edges.py.)"""

from __future__ import annotations

import html
import re
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from tests.conftest import cli_env, run_cli
from tests.service.conftest import Service

NS = "asof/infra"
QUESTION = "which host does the staging database run on?"
WORDINGS = (
    "The staging database runs on host db-1 in rack A.",
    "The staging database runs on host db-2 in rack B.",
    "The staging database runs on host db-3 in rack C.",
)


@pytest.fixture(scope="module")
def revised(service: Service) -> dict:
    """The three versions (their ids, and a moment when each alone was current, ISO 8601)."""
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code == 201
        first = alice.post(
            "/v1/memories", json={"content": WORDINGS[0], "namespace": NS, "valid_at": "2025-01-01T09:00:00Z"}
        )
        ids = [first.json()["memory_id"]]
        for wording in WORDINGS[1:]:
            fixed = alice.post(f"/v1/memories/{ids[-1]}/reconsolidate", json={"content": wording, "reason": "moved"})
            assert fixed.status_code == 200, fixed.text
            ids.append(fixed.json()["memory_id"])
        versions = [alice.get(f"/v1/memories/{i}").json()["memory"] for i in ids]
    times = [
        (datetime.fromisoformat(v["valid_at"]), datetime.fromisoformat(v["invalid_at"] or v["valid_at"]))
        for v in versions
    ]
    starts = [times[0][0], max(times[0][1], times[1][0]), max(times[1][1], times[2][0])]
    ends = [times[1][0], times[2][0], datetime.now(UTC)]
    moments = [(s + (e - s) / 2).isoformat() for s, e in zip(starts, ends, strict=True)]
    return {"ids": ids, "moments": moments, "before": "2024-12-31T00:00:00Z"}


def _recalled(client: httpx.Client, **body) -> list[str]:
    answer = client.post("/v1/recall", json={"query": QUESTION, "namespace": NS, "k": 5, **body})
    assert answer.status_code == 200, answer.text
    return [h["memory"]["id"] for h in answer.json()["hits"]]


def test_recall_and_get_as_of_and_with_a_dialogue_over_http(service: Service, revised: dict) -> None:
    ids, moments = revised["ids"], revised["moments"]
    with service.client("alice") as alice:
        assert _recalled(alice, as_of=revised["before"]) == []
        for moment, version in zip(moments, ids, strict=True):
            assert _recalled(alice, as_of=moment) == [version]
            got = alice.get(f"/v1/memories/{ids[0]}", params={"as_of": moment})
            assert got.status_code == 200 and got.json()["memory"]["id"] == version
        assert _recalled(alice) == [ids[2]]  # without as_of: as it is now
        naive = moments[0].replace("+00:00", "")  # no offset: UTC
        assert _recalled(alice, as_of=naive) == [ids[0]]
        assert alice.get(f"/v1/memories/{ids[2]}", params={"as_of": naive}).json()["memory"]["id"] == ids[0]
        missing = alice.get(f"/v1/memories/{ids[2]}", params={"as_of": revised["before"]})
        assert missing.status_code == 404 and "was current at" in missing.json()["error"]["message"]

        talk = ["Hi, a question about our environments.", "Sure, which one?"]
        assert _recalled(alice, context=talk) == [ids[2]]
        assert _recalled(alice, context=talk, as_of=moments[1]) == [ids[1]]

        def refused(answer: httpx.Response, status: int, words: str) -> None:
            assert answer.status_code == status, answer.text
            assert words in answer.json()["error"]["message"], answer.text

        recall = {"query": QUESTION, "namespace": NS}
        refused(alice.post("/v1/recall", json={**recall, "as_of": "next tuesday"}), 422, "as_of")
        refused(alice.post("/v1/recall", json={**recall, "as_of": "0001-01-01T00:00:00Z"}), 400, "outside the times")
        refused(alice.post("/v1/recall", json={**recall, "context": ["t"] * 21}), 422, "context")
        refused(alice.post("/v1/recall", json={**recall, "context": ["ok", "a\x00b"]}), 400, "NUL")
        long_turn = ["x" * (service.settings.max_query_chars + 1)]
        refused(alice.post("/v1/recall", json={**recall, "context": long_turn}), 400, "context turn 1 is")
        refused(alice.get(f"/v1/memories/{ids[0]}", params={"as_of": "soon"}), 422, "as_of")
        refused(alice.get(f"/v1/memories/{ids[0]}", params={"as_of": "9999-12-31T23:00:00-05:00"}), 400, "outside")
    with service.client("bob") as bob:  # no grant: as unknown as ever
        assert bob.get(f"/v1/memories/{ids[0]}", params={"as_of": moments[0]}).status_code == 404


def test_the_client_and_the_command_line_take_as_of_and_context(service: Service, revised: dict) -> None:
    from cabrain.types import RecallQuery

    ids, moments = revised["ids"], revised["moments"]
    with service.api("alice") as client:
        then = client.recall(RecallQuery(QUESTION, NS, k=5, as_of=datetime.fromisoformat(moments[1])))
        assert [h.memory.id for h in then.hits] == [client.get(ids[1]).memory.id]
        talk = client.recall(RecallQuery(QUESTION, NS, k=5, context=("Hello!", "About staging...")))
        assert str(talk.hits[0].memory.id) == ids[2]
        got = client.get(ids[2], as_of=datetime.fromisoformat(moments[0]))
        assert str(got.memory.id) == ids[0] and [str(m.id) for m in got.next] == ids[1:]

    env = cli_env(api_url=service.url, api_key=service.keys["alice"])
    found = run_cli("recall", QUESTION, "-n", NS, "--as-of", moments[0], env=env)
    assert found.returncode == 0, found.stderr
    assert WORDINGS[0] in found.stdout and WORDINGS[2] not in found.stdout
    talk_cli = run_cli("recall", QUESTION, "-n", NS, "--context", "Hi", "--context", "About staging", env=env)
    assert talk_cli.returncode == 0 and WORDINGS[2] in talk_cli.stdout, talk_cli.stderr
    shown = run_cli("get", ids[2], "--as-of", moments[1], env=env)
    assert shown.returncode == 0 and f'"id": "{ids[1]}"' in shown.stdout.split('"previous"')[0], shown.stderr
    archive = run_cli("recall", QUESTION, "-n", NS, "--archive", "--as-of", moments[0], env=env)
    assert archive.returncode == 2 and "for hot recall" in archive.stderr
    garbage = run_cli("get", ids[2], "--as-of", "yesterday-ish", env=env)
    assert garbage.returncode == 2 and "not an ISO 8601 date" in garbage.stderr


@pytest.fixture
def console(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=60, follow_redirects=False) as client:
        nonce = client.get("/console/login").cookies["cabrain_console_login"]
        done = client.post("/console/login", data={"key": service.keys["alice"], "csrf": nonce, "next": "/console"})
        assert done.status_code == 303, done.text
        yield client


def test_the_console_recalls_browses_and_shows_a_memory_as_of_a_time(console: httpx.Client, revised: dict) -> None:
    ids, moments = revised["ids"], revised["moments"]
    local = moments[1][:26]  # what a datetime-local field sends: no offset (UTC)

    def page(path: str, **params: str) -> str:
        answer = console.get(f"{path}?{urllib.parse.urlencode(params)}")
        assert answer.status_code == 200, answer.text[:500]
        return html.unescape(answer.text)

    recall = page("/console/recall", q=QUESTION, namespace=NS, as_of=local, context="Hi there\nAbout staging")
    assert WORDINGS[1] in recall and WORDINGS[2] not in recall and WORDINGS[0] not in recall
    assert 'name="as_of"' in recall and "About staging" in recall  # the form keeps what was asked

    def words(text: str) -> str:  # the page's text: a row links its first words, the rest follows the link
        return re.sub(r"<[^>]+>", "", text)

    browsed = words(page("/console/memories", namespace=NS, as_of=local))
    assert WORDINGS[1] in browsed and WORDINGS[2] not in browsed
    assert WORDINGS[2] in words(page("/console/memories", namespace=NS))
    shown = page(f"/console/memories/{ids[2]}", as_of=local)
    assert 'id="as-of"' in shown and WORDINGS[1] in shown.split('id="versions"')[0]
    archived = console.get(
        f"/console/recall?{urllib.parse.urlencode({'q': QUESTION, 'namespace': NS, 'as_of': local, 'archive': '1'})}"
    )
    assert archived.status_code == 400 and "for hot recall" in html.unescape(archived.text)
    bad = console.get(f"/console/memories?{urllib.parse.urlencode({'namespace': NS, 'as_of': 'soon'})}")
    assert bad.status_code == 400 and "is not a date" in html.unescape(bad.text)


def test_captures_recall_takes_the_sessions_earlier_turns(service: Service, revised: dict) -> None:
    body = {"namespace": NS, "items": [], "recall": {"query": QUESTION, "k": 3}}
    with service.client("alice") as alice:
        plain = alice.post("/v1/capture", json=body)
        assert plain.status_code == 202, plain.text
        talk = {**body, "recall": {**body["recall"], "context": ["Morning!", "Let's look at staging."]}}
        answered = alice.post("/v1/capture", json=talk)
        assert answered.status_code == 202, answered.text
        assert answered.json()["hits"][0]["memory"]["id"] == revised["ids"][2]
        many = {**body, "recall": {**body["recall"], "context": ["t"] * 21}}
        assert alice.post("/v1/capture", json=many).status_code == 422
        nul = {**body, "recall": {**body["recall"], "context": ["a\x00b"]}}
        assert alice.post("/v1/capture", json=nul).status_code == 400
