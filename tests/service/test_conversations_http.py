"""Conversation turns through the running service (issue 19): metadata.thread and metadata.speaker
go in with a batch, a turn is found by the question before it, each hit's breakdown shows its
thread and speaker terms (checked against the OpenAPI document), and a malformed thread is a 400."""

from __future__ import annotations

from tests.service.conftest import Service

NS = "conversations"  # its own namespace: the service is shared by the session's tests
CHAT = [
    ("John", "Hey Maria! How have you been lately?"),
    ("Maria", "Great! I joined a gym with my family."),
    ("John", "How often do you work out together?"),
    ("Maria", "Three times a week; it keeps us on track."),
]


def test_turns_of_a_thread_are_found_by_their_context_over_http(service: Service) -> None:
    with service.client("alice") as alice:
        assert alice.post("/v1/namespaces", json={"name": NS}).status_code in (200, 201)
        items = [
            {
                "content": f"{who}: {text}",
                "namespace": NS,
                "valid_at": "2023-05-08T13:56:00Z",
                "metadata": {"thread": "gym-chat", "speaker": who},
            }
            for who, text in CHAT
        ]
        stored = alice.post("/v1/memories/batch", json={"items": items, "decide": False})
        assert stored.status_code == 200, stored.text
        found = alice.post(
            "/v1/recall",
            json={"query": "How often does Maria work out?", "namespace": NS, "k": 4, "rerank": False},
        )
        assert found.status_code == 200, found.text
        hits = found.json()["hits"]
        answer = next(h for h in hits if h["memory"]["content"].startswith("Maria: Three times a week"))
        # the sitting the write path found (the thread's first) is shown with what the caller gave
        assert answer["memory"]["metadata"] == {"thread": "gym-chat", "speaker": "Maria", "sitting": "gym-chat"}
        assert answer["breakdown"]["thread"] > 0 and answer["breakdown"]["speaker"] > 0
        by_date = alice.post(
            "/v1/recall", json={"query": "May 2023", "namespace": NS, "k": 4, "mode": "bm25", "rerank": False}
        )
        assert by_date.status_code == 200 and len(by_date.json()["hits"]) == 4, by_date.text

        bad = alice.post("/v1/memories", json={"content": "hi", "namespace": NS, "metadata": {"thread": 7}})
        assert bad.status_code == 400, bad.text
        assert "metadata.thread must be a non-empty string" in bad.json()["error"]["message"]
