"""Recall over conversations on real PostgreSQL (issue 19): a turn is found by the turns before it,
by its date and by its speaker; its sitting pulls its turns together; and none of it crosses an
agent's or a visibility's line."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

from cabrain.brain import Brain
from cabrain.errors import InputError
from cabrain.search import speakers
from cabrain.types import MemoryInput, RecallMode, RecallQuery, Visibility

SESSION = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def turn(text: str, speaker: str, thread: str | None = "s1", ns: str = "proj", **kw) -> MemoryInput:
    meta = {"speaker": speaker, **({"thread": thread} if thread else {})}
    return MemoryInput(f"{speaker}: {text}", ns, valid_at=kw.pop("valid_at", SESSION), metadata=meta, **kw)


CHAT = [
    ("Hey Maria! How have you been lately?", "John"),
    ("Great! I joined a gym with my family.", "Maria"),
    ("How often do you work out together?", "John"),
    ("Three times a week; it keeps us on track.", "Maria"),
]


async def ids_for(brain: Brain, agent: str, query: str, mode: RecallMode = RecallMode.BM25, k: int = 5, ns="proj"):
    result = await brain.recall(agent, RecallQuery(query, ns, k=k, mode=mode, expand=False))
    return [h.memory.content for h in result.hits], result


async def test_a_turn_is_found_by_the_words_of_the_turns_before_it(brain: Brain) -> None:
    await brain.retain("alice", [turn(t, s) for t, s in CHAT], decide=False)
    found, _ = await ids_for(brain, "alice", "How often do they work out?")
    # The answer shares no word with the question; the question before it does.
    assert "Maria: Three times a week; it keeps us on track." in found[:2]


async def test_a_memory_in_no_conversation_has_only_its_own_words(brain: Brain) -> None:
    # no thread and no speaker: notes, not turns
    await brain.retain("alice", [MemoryInput(t, "proj", valid_at=SESSION) for t, _ in CHAT], decide=False)
    found, _ = await ids_for(brain, "alice", "How often do they work out?")
    assert "Three times a week; it keeps us on track." not in found


async def test_turns_are_numbered_across_calls_and_context_spans_them(brain: Brain, db_dsn: str) -> None:
    await brain.retain("alice", [turn(t, s) for t, s in CHAT[:3]], decide=False)
    await brain.retain("alice", [turn(t, s) for t, s in CHAT[3:]], decide=False)
    conn = await asyncpg.connect(db_dsn)
    try:
        rows = await conn.fetch(
            "SELECT content, thread_turn FROM memories WHERE namespace = 'proj' ORDER BY thread_turn"
        )
    finally:
        await conn.close()
    assert [r["thread_turn"] for r in rows] == [1, 2, 3, 4]
    found, _ = await ids_for(brain, "alice", "how often do they work out")
    assert "Maria: Three times a week; it keeps us on track." in found  # by the words of the first call


async def test_another_writer_or_visibility_never_lends_its_words(brain: Brain) -> None:
    await brain.share("alice", "proj", "bob", can_read=True, can_write=True)
    await brain.accept_grant("bob", "proj")
    # bob writes the question (private), alice the answer (team) in the same thread.
    await brain.retain("bob", [turn("Which vault code did the bank give you, zebracorn?", "Bob")], decide=False)
    await brain.retain("alice", [turn("It is in the drawer.", "Alice", visibility=Visibility.TEAM)], decide=False)
    # alice's own private turn, then her team turn: the private words must not reach the team turn.
    await brain.retain("alice", [turn("my secret word is quokkaflute", "Alice")], decide=False)
    await brain.retain("alice", [turn("See you tomorrow.", "Alice", visibility=Visibility.TEAM)], decide=False)
    for agent in ("alice", "bob"):
        found, _ = await ids_for(brain, agent, "zebracorn")
        assert "Alice: It is in the drawer." not in found
        found, _ = await ids_for(brain, agent, "quokkaflute")
        assert "Alice: See you tomorrow." not in found


async def test_a_memory_is_found_by_its_date(brain: Brain) -> None:
    await brain.retain(
        "alice",
        [
            MemoryInput("We painted the lake at sunrise.", "proj", valid_at=SESSION),
            MemoryInput("We painted the barn at dusk.", "proj", valid_at=datetime(2023, 9, 2, tzinfo=UTC)),
        ],
        decide=False,
    )
    found, _ = await ids_for(brain, "alice", "what did we paint in May 2023?")
    assert found[0] == "We painted the lake at sunrise."
    found, _ = await ids_for(brain, "alice", "ماذا رسمنا في أيلول؟")
    assert found[0] == "We painted the barn at dusk."


async def test_dates_can_be_left_out_of_the_index(open_brain) -> None:
    brain = await open_brain(index_dates=False)
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    await brain.retain("alice", [MemoryInput("We painted the lake.", "proj", valid_at=SESSION)], decide=False)
    found, _ = await ids_for(brain, "alice", "may 2023")
    assert found == []


async def test_relative_time_words_resolve_against_the_clock(db_dsn, settings_for, embedder, brain) -> None:
    clock = lambda: datetime(2023, 6, 15, 9, 0, tzinfo=UTC)  # noqa: E731 - a fixed clock
    at_june = await Brain.open(settings_for(db_dsn), dsn=db_dsn, embedder=embedder, clock=clock)
    try:
        await at_june.retain(
            "alice",
            [
                MemoryInput("The team agreed on the new logo.", "proj", valid_at=SESSION),
                MemoryInput("The team agreed on the new office.", "proj", valid_at=datetime(2023, 1, 9, tzinfo=UTC)),
            ],
            decide=False,
        )
        found, _ = await ids_for(at_june, "alice", "what did the team agree on last month?")
        assert found[0] == "The team agreed on the new logo."
        found, _ = await ids_for(at_june, "alice", "على ماذا اتفق الفريق الشهر الماضي؟ team agreed")
        assert found[0] == "The team agreed on the new logo."
    finally:
        await at_june.close()


async def test_a_sitting_pulls_its_turns_together(brain: Brain, open_brain) -> None:
    other = datetime(2023, 7, 1, tzinfo=UTC)
    await brain.retain(
        "alice",
        [
            turn("I went hiking in the mountains with the kids.", "Mel", thread="a"),
            turn("The kids loved the waterfall on the trail.", "Mel", thread="a"),
            turn("We saw a bear near the trail!", "Mel", thread="a"),
            turn("I baked bread at home with the kids.", "Mel", thread="b", valid_at=other),
        ],
        decide=False,
    )
    _, result = await ids_for(brain, "alice", "kids", mode=RecallMode.HYBRID)
    boosts = {h.memory.content: h.breakdown.thread for h in result.hits}
    assert (
        boosts["Mel: I baked bread at home with the kids."] < boosts["Mel: The kids loved the waterfall on the trail."]
    )
    off = await (await open_brain(thread_cohesion=0)).recall("alice", RecallQuery("kids", "proj", k=5, expand=False))
    assert all(h.breakdown.thread is None for h in off.hits)


async def test_the_speaker_a_query_names_is_nudged_and_left_out_of_its_embedding(brain: Brain, db_dsn: str) -> None:
    await brain.retain(
        "alice",
        [
            turn("I painted a sunrise over the lake last week.", "Melanie"),
            turn("Melanie, I painted a sunrise too!", "Caroline"),
        ],
        decide=False,
    )
    _, result = await ids_for(brain, "alice", "What did Melanie's family paint?", mode=RecallMode.HYBRID)
    by = {h.memory.metadata["speaker"]: h.breakdown.speaker for h in result.hits}
    assert by["Melanie"] and not by["Caroline"]
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await speakers.named(conn, "What did Melanie's family paint?", "proj", "alice") == [("melanie",)]
        assert await speakers.named(conn, "What did Melanie paint?", "proj", "carol") == []  # private to alice
    finally:
        await conn.close()
    # two speakers named: no nudge for either
    _, both = await ids_for(brain, "alice", "What did Melanie and Caroline paint?", mode=RecallMode.HYBRID)
    assert all(h.breakdown.speaker is None for h in both.hits)


@pytest.mark.parametrize(
    "bad", [{"thread": ""}, {"thread": 7}, {"speaker": "x" * 201}, {"thread": ["a"]}, {"sitting": " "}, {"sitting": 1}]
)
async def test_a_malformed_thread_speaker_or_sitting_is_refused(brain: Brain, bad: dict) -> None:
    with pytest.raises(InputError, match=r"the memory: metadata\.(thread|speaker|sitting) must be"):
        await brain.retain("alice", [MemoryInput("hello", "proj", metadata=bad)])


async def test_recall_embeds_the_query_without_the_speakers_it_names(open_brain, embedder) -> None:
    brain = await open_brain()
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    await brain.retain("alice", [turn("I painted a sunrise over the lake.", "Melanie")], decide=False)
    query = "What did Melanie paint?"
    result = await brain.recall("alice", RecallQuery(query, "proj", k=1, mode=RecallMode.VECTOR, expand=False))
    [doc] = await embedder.embed_documents(["Melanie: I painted a sunrise over the lake."])

    def cosine(q: list[float]) -> float:
        return sum(a * b for a, b in zip(q, doc, strict=True))

    stripped, whole = await embedder.embed_query("What did paint?"), await embedder.embed_query(query)
    assert abs(cosine(stripped) - cosine(whole)) > 1e-3  # the two differ, so the test can tell
    assert result.hits[0].breakdown.vector_similarity == pytest.approx(cosine(stripped), abs=1e-4)
    kept = await open_brain(recall_embed_without_speakers=False)
    again = await kept.recall("alice", RecallQuery(query, "proj", k=1, mode=RecallMode.VECTOR, expand=False))
    assert again.hits[0].breakdown.vector_similarity == pytest.approx(cosine(whole), abs=1e-4)
