"""A dialogue as the query (issue 34), on real PostgreSQL: the latest turn counts most, filler does
not move it, and what the latest turn leaves out is taken from the turns before it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cabrain.brain import Brain
from cabrain.types import MemoryInput, RecallMode, RecallQuery

AT = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TURNS = [
    ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "I painted a lake sunrise last year; it is special to me."),
    ("Caroline", "I'm researching adoption agencies for my future family."),
    ("Melanie", "We went camping at the beach with the kids last weekend."),
    ("Caroline", "Hey! Good to see you, how have you been today?"),
    ("Melanie", "Hi! Hope your day is going well, good to hear from you."),
]
FILLER = ("Hi there! Hope your day is going well.", "Hello! Good to hear from you. How can I help today?")


async def load(brain: Brain) -> None:
    await brain.retain(
        "alice",
        [
            MemoryInput(f"{who}: {text}", "proj", valid_at=AT + timedelta(days=i), metadata={"speaker": who})
            for i, (who, text) in enumerate(TURNS)
        ],
        decide=False,
    )


async def top(brain: Brain, query: str, context: tuple[str, ...] = (), mode=RecallMode.HYBRID) -> list[str]:
    result = await brain.recall("alice", RecallQuery(query, "proj", k=3, mode=mode, expand=False, context=context))
    return [h.memory.content for h in result.hits]


async def test_filler_before_a_question_does_not_move_its_answer(brain: Brain) -> None:
    await load(brain)
    for mode in RecallMode:
        plain = await top(brain, "Which agencies is Caroline researching?", mode=mode)
        assert plain[0] == "Caroline: I'm researching adoption agencies for my future family."
        assert (await top(brain, "Which agencies is Caroline researching?", FILLER, mode=mode))[0] == plain[0]


async def test_a_follow_up_that_says_nothing_is_answered_from_the_turn_before_it(brain: Brain) -> None:
    await load(brain)
    follow_up = "Sorry, could you look that up for me?"
    alone = await top(brain, follow_up)
    asked = await top(brain, follow_up, (*FILLER, "What did Melanie paint last year?"))
    assert asked[0] == "Melanie: I painted a lake sunrise last year; it is special to me."
    assert alone[0] != asked[0]


async def test_the_person_named_in_an_earlier_turn_is_who_the_question_is_about(brain: Brain) -> None:
    await load(brain)
    result = await brain.recall(
        "alice",
        RecallQuery(
            "Where did they go with the kids?",
            "proj",
            k=3,
            expand=False,
            context=("I want to ask you something about Melanie.",),
        ),
    )
    nudged = {h.memory.metadata["speaker"] for h in result.hits if h.breakdown.speaker}
    assert nudged == {"Melanie"}
    assert result.hits[0].memory.content.startswith("Melanie: We went camping")
