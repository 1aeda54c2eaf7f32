"""Sittings found from time (issue 34), on real PostgreSQL: a chat whose messages carry only their
own times (no thread, or one thread for the whole chat) falls into sittings by the gaps between
them, and context, cohesion and sleep work on the found sittings as on given ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cabrain.brain import Brain
from cabrain.errors import ConfigError
from cabrain.types import MemoryInput, RecallMode, RecallQuery

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
MAY_12 = datetime(2023, 5, 12, 19, 2, tzinfo=UTC)


def said(text: str, speaker: str, at: datetime, **metadata) -> MemoryInput:
    return MemoryInput(f"{speaker}: {text}", "proj", valid_at=at, metadata={"speaker": speaker, **metadata})


def chat(**metadata) -> list[MemoryInput]:
    """Two sittings four days apart, each message a minute or two after the one before."""
    first = [
        ("Hey Maria! How have you been lately?", "John"),
        ("Great! I joined a gym with my family.", "Maria"),
        ("How often do you work out together?", "John"),
        ("Three times a week; it keeps us on track.", "Maria"),
    ]
    second = [
        ("Did you finish the pottery class?", "Maria"),
        ("Yes, I made a blue bowl for my mum.", "John"),
    ]
    return [said(t, s, MAY_8 + timedelta(minutes=2 * i), **metadata) for i, (t, s) in enumerate(first)] + [
        said(t, s, MAY_12 + timedelta(minutes=i), **metadata) for i, (t, s) in enumerate(second)
    ]


async def sittings(dsn: str, ns: str = "proj") -> dict[str, tuple[str | None, int | None]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT content, metadata ->> 'sitting' AS sitting, thread_turn FROM memories WHERE namespace = $1", ns
        )
    finally:
        await conn.close()
    return {r["content"].split(": ", 1)[1]: (r["sitting"], r["thread_turn"]) for r in rows}


async def bm25(brain: Brain, query: str, agent: str = "alice") -> list[str]:
    result = await brain.recall(agent, RecallQuery(query, "proj", k=10, mode=RecallMode.BM25, expand=False))
    return [h.memory.content.split(": ", 1)[1] for h in result.hits]


async def test_a_chat_without_threads_falls_into_sittings_by_its_times(brain: Brain, db_dsn: str) -> None:
    await brain.retain("alice", chat(), decide=False)
    found = await sittings(db_dsn)
    first = {
        found[t][0]
        for t in found
        if t not in ("Did you finish the pottery class?", "Yes, I made a blue bowl for my mum.")
    }
    second = {found["Did you finish the pottery class?"][0], found["Yes, I made a blue bowl for my mum."][0]}
    # the writer's turns with no thread are one conversation, numbered in order
    assert sorted(turn for _, turn in found.values()) == [1, 2, 3, 4, 5, 6]
    assert first == {"~alice"} and second == {"~alice@2023-05-12T19:02:00Z"}
    # context works inside the found sitting: the answer is found by the words of its question...
    assert "Three times a week; it keeps us on track." in (await bm25(brain, "How often do they work out?"))[:2]
    # ...and never across sittings: the first turn of the second sitting lends nothing to the last of the first
    assert "Did you finish the pottery class?" not in await bm25(brain, "how often work out gym")


async def test_a_whole_chat_thread_is_split_and_a_given_sitting_is_kept(brain: Brain, db_dsn: str) -> None:
    await brain.retain("alice", chat(thread="whatsapp:family"), decide=False)
    found = await sittings(db_dsn)
    assert found["Three times a week; it keeps us on track."][0] == "whatsapp:family"
    assert found["Did you finish the pottery class?"][0] == "whatsapp:family@2023-05-12T19:02:00Z"
    # a sitting the source names is kept as it is, even across a long gap
    later = MAY_12 + timedelta(days=3)
    await brain.retain(
        "alice", [said("Back to the pottery: I glazed it.", "John", later, thread="whatsapp:family", sitting="s-2")]
    )
    assert (await sittings(db_dsn))["Back to the pottery: I glazed it."][0] == "s-2"


async def test_a_late_turn_joins_its_neighbours_and_turns_a_day_apart_do_not(brain: Brain, db_dsn: str) -> None:
    turns = chat(thread="t")
    await brain.retain("alice", turns[:3] + turns[4:], decide=False)
    # the fourth message arrives after the others (an import resumed, a connector catching up)
    await brain.retain("alice", [turns[3]], decide=False)
    # and one turn before anything else in the chat, within the gap of its first message
    early = said("Morning!", "Maria", MAY_8 - timedelta(minutes=10), thread="t")
    # and one alone, a day before
    alone = said("Happy birthday!", "John", MAY_8 - timedelta(days=1), thread="t")
    await brain.retain("alice", [early, alone], decide=False)
    found = await sittings(db_dsn)
    assert found["Three times a week; it keeps us on track."][0] == "t"
    assert found["Morning!"][0] == "t"
    assert found["Happy birthday!"][0] == "t@2023-05-07T13:56:00Z"
    assert found["Three times a week; it keeps us on track."][1] == 6  # numbered in the order retained
    # the late answer still gets the words of the question before it in time
    assert "Three times a week; it keeps us on track." in (await bm25(brain, "How often do they work out?"))[:2]


async def test_the_gap_is_a_setting(brain: Brain, open_brain, db_dsn: str) -> None:
    brain = await open_brain(sitting_gap_s=5 * 86400)
    await brain.retain("alice", chat(thread="t"), decide=False)
    assert {s for s, _ in (await sittings(db_dsn)).values()} == {"t"}


async def test_writers_and_visibilities_keep_their_own_conversations(brain: Brain, db_dsn: str) -> None:
    await brain.share("alice", "proj", "bob", can_read=True, can_write=True)
    await brain.accept_grant("bob", "proj")
    await brain.retain("bob", [said("Which vault code did the bank give you?", "Bob", MAY_8)], decide=False)
    await brain.retain(
        "alice",
        [said("It is zebracorn.", "Alice", MAY_8 + timedelta(minutes=1))],
        decide=False,
    )
    found = await sittings(db_dsn)
    # no thread: each writer's turns are its own conversation
    assert found["Which vault code did the bank give you?"] == ("~bob", 1)
    assert found["It is zebracorn."] == ("~alice", 1)
    assert "It is zebracorn." not in await bm25(brain, "vault code bank")


async def test_cohesion_pulls_a_found_sitting_together(brain: Brain) -> None:
    other = datetime(2023, 7, 1, tzinfo=UTC)
    await brain.retain(
        "alice",
        [
            said("I went hiking in the mountains with the kids.", "Mel", MAY_8),
            said("The kids loved the waterfall on the trail.", "Mel", MAY_8 + timedelta(minutes=3)),
            said("We saw a bear near the trail!", "Mel", MAY_8 + timedelta(minutes=5)),
            said("I baked bread at home with the kids.", "Mel", other),
        ],
        decide=False,
    )
    result = await brain.recall("alice", RecallQuery("kids", "proj", k=5, mode=RecallMode.HYBRID, expand=False))
    boosts = {h.memory.content: h.breakdown.thread for h in result.hits}
    assert (
        boosts["Mel: I baked bread at home with the kids."] < boosts["Mel: The kids loved the waterfall on the trail."]
    )


@pytest.mark.parametrize("gap", [0, -1, 8 * 86400])
def test_a_gap_out_of_range_is_refused(settings_for, gap: float) -> None:
    with pytest.raises(ConfigError, match="CABRAIN_SITTING_GAP_S: Input should be"):
        settings_for(None, sitting_gap_s=gap)


async def test_a_forgotten_turn_marks_time_but_lends_no_words(brain: Brain, db_dsn: str) -> None:
    [secret] = await brain.retain("alice", [said("The vault code is quokkaflute.", "Bob", MAY_8)], decide=False)
    await brain.forget("alice", secret.memory_id, reason="a secret")
    await brain.retain("alice", [said("Got it, thanks.", "Ann", MAY_8 + timedelta(minutes=1))], decide=False)
    # the later turn is in the forgotten turn's sitting (time still counts) ...
    found = await sittings(db_dsn)
    assert found["Got it, thanks."][0] == found["The vault code is quokkaflute."][0] == "~alice"
    # ... but is not findable by the forgotten words
    assert await bm25(brain, "quokkaflute vault code") == []
