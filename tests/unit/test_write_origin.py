"""Turns and records are distinct by where they come from (cabrain.write.decision.origin)."""

import uuid

from hypothesis import given
from hypothesis import strategies as st

from cabrain.settings.core import RECORD_SOURCE_KINDS
from cabrain.types import Decision
from cabrain.write.decision import Neighbour, WriteDecision, check_decision, decide
from cabrain.write.decision.origin import PLAIN, Origin, origin_of

THRESHOLDS = {"duplicate_similarity": 0.95, "revision_similarity": 0.85}
KINDS = list(RECORD_SOURCE_KINDS)


def turn(speaker: str) -> Origin:
    return origin_of("chat", None, {"speaker": speaker, "thread": "t1"}, KINDS)


def record(kind: str, ref: str, anchor: str = "") -> Origin:
    return origin_of(kind, ref, {"anchor": anchor} if anchor else {}, KINDS)


def near(content: str, similarity: float, origin: Origin) -> Neighbour:
    return Neighbour(uuid.uuid4(), content, similarity, "private", origin)


# The pair issue 32 found: Melanie's turn superseded Caroline's ("numbers differ, revision cue").
CAROLINE = "My hand-painted bowl. A friend made it for my 18th birthday ten years ago"
MELANIE = "Seven years now, and I've finally found my real muses: painting and pottery"


def test_another_speakers_turn_never_supersedes_absorbs_or_retracts_a_turn() -> None:
    cases = [
        ("The API runs on port 8000", "The API now runs on port 9000"),  # a revision, were it one speaker's
        ("We deploy on Fridays", "We deploy on Fridays"),  # the same words
        ("The launch is on Monday", "Ignore that, the launch is not on Monday"),  # a retraction
        (CAROLINE, MELANIE),
    ]
    for old, new in cases:
        choice = decide(new, [near(old, 0.99, turn("Caroline"))], **THRESHOLDS, origin=turn("Melanie"))
        assert choice.decision is Decision.ADD, (old, new, choice)
        assert choice.target is None


def test_a_turn_and_a_statement_no_one_spoke_are_not_judged_against_each_other() -> None:
    spoken = decide("The API now runs on port 9000", [near("The API runs on port 8000", 0.95, PLAIN)], **THRESHOLDS)
    assert spoken.decision is Decision.UPDATE  # two plain statements: issue 17's rules
    as_turn = decide(
        "The API now runs on port 9000",
        [near("The API runs on port 8000", 0.95, PLAIN)],
        **THRESHOLDS,
        origin=turn("Omar"),
    )
    assert as_turn.decision is Decision.ADD
    assert "distinct" in as_turn.reason


def test_a_speaker_revises_their_own_turn_only_explicitly() -> None:
    omar = turn("Omar")
    old = "Omar: The API runs on port 8000"
    for correction in (
        "Omar: Actually, the API runs on port 9000",
        "Omar: Correction: the API runs on port 9000",
        "Omar: The API no longer runs on port 8000, it runs on port 9000",
    ):
        explicit = decide(correction, [near(old, 0.95, turn("omar"))], **THRESHOLDS, origin=omar)
        assert explicit.decision is Decision.UPDATE, (correction, explicit)  # speakers compared case-folded
    for everyday in ("Omar: The API now runs on port 9000", "Omar: The API runs on port 9000"):
        implicit = decide(everyday, [near(old, 0.95, omar)], **THRESHOLDS, origin=omar)
        assert implicit.decision is Decision.ADD, everyday  # "now" and a new number are talk, not a correction
    again = decide(
        "Omar: We deploy on Fridays", [near("Omar: We deploy on Fridays.", 0.99, omar)], **THRESHOLDS, origin=omar
    )
    assert again.decision is Decision.ADD  # said again: another utterance, not merged
    retracted = decide(
        "Omar: Scratch that, the launch is not on Monday",
        [near("Omar: The launch is on Monday", 0.9, omar)],
        **THRESHOLDS,
        origin=omar,
    )
    assert retracted.decision in (Decision.INVALIDATE, Decision.UPDATE)
    assert retracted.target is not None
    # the "Name:" both turns open with is not their shared subject
    chat = decide(
        "Caroline: Hey Mel, what's up? Been a busy week since we talked.",
        [near("Caroline: Hey Mel! Long time no talk. Lots has been going on since then!", 0.9, turn("Caroline"))],
        **THRESHOLDS,
        origin=turn("Caroline"),
    )
    assert chat.decision is Decision.ADD


def test_records_of_a_source_are_never_superseded_by_each_other() -> None:
    rules = [
        ("Never invent facts about the user.", "Never invent facts about the project."),
        ("Do NOT commit secrets to the repository", "Do NOT commit generated files to the repository"),
        ("The API runs on port 8000", "The API now runs on port 9000"),
    ]
    for old, new in rules:
        for kind in ("folder", "import:markdown", "import:letta"):
            choice = decide(
                new,
                [near(old, 0.97, record(kind, "AGENTS.md", "a"))],
                **THRESHOLDS,
                origin=record(kind, "AGENTS.md", "b"),
            )
            assert choice.decision is Decision.ADD, (kind, old, new, choice)
    # a plain statement does not supersede a record either, nor a record a plain statement
    assert (
        decide(
            "The API now runs on port 9000",
            [near("The API runs on port 8000", 0.95, record("folder", "x"))],
            **THRESHOLDS,
        ).decision
        is Decision.ADD
    )
    assert (
        decide(
            "The API now runs on port 9000",
            [near("The API runs on port 8000", 0.95, PLAIN)],
            **THRESHOLDS,
            origin=record("folder", "x"),
        ).decision
        is Decision.ADD
    )


def test_a_record_absorbs_another_only_when_both_say_the_same() -> None:
    same = decide(
        "We deploy on Fridays",
        [near("We deploy on Fridays.", 0.99, record("folder", "a.md"))],
        **THRESHOLDS,
        origin=record("folder", "b.md"),
    )
    assert same.decision is Decision.NOOP
    close = decide(
        "We deploy on Fridays at noon",
        [near("We deploy on Fridays in the morning", 0.97, record("folder", "a.md"))],
        **THRESHOLDS,
        origin=record("folder", "b.md"),
    )
    assert close.decision is Decision.ADD


def test_a_later_version_of_the_same_record_revises_it() -> None:
    old = near("Deploys happen on Fridays", 0.6, record("import:mem0", "key-7"))
    choice = decide(
        "Deploys happen on Tuesdays after review", [old], **THRESHOLDS, origin=record("import:mem0", "key-7")
    )
    assert (choice.decision, choice.target) == (Decision.UPDATE, old.id)
    other = decide(
        "Deploys happen on Tuesdays after review", [old], **THRESHOLDS, origin=record("import:mem0", "key-8")
    )
    assert other.decision is Decision.ADD


def test_a_chat_models_decision_is_held_to_the_same_rules() -> None:
    old = near(CAROLINE, 0.9, turn("Caroline"))
    for decision in (Decision.UPDATE, Decision.INVALIDATE, Decision.NOOP):
        held = check_decision(MELANIE, WriteDecision(decision, old.id, "the model said so"), [old], turn("Melanie"))
        assert held.decision is Decision.ADD and "refused" in held.reason, decision


def test_which_sources_are_records_is_a_setting() -> None:
    assert record("folder", "x").record == ("folder", "x", "")
    assert record("import:claude-mem", "k").record is not None
    assert origin_of("mcp", "session-1", {}, KINDS).plain
    assert origin_of("confluence", "p1", {}, ["confluence"]).record == ("confluence", "p1", "")
    assert origin_of("folder", "x", '{"speaker": "Ana", "anchor": "s2"}', KINDS) == Origin("ana", ("folder", "x", "s2"))


def test_every_connector_kind_is_a_record_kind_by_default() -> None:
    from cabrain.connectors.sources import KINDS as CONNECTOR_KINDS

    assert all(record(kind, "x").record is not None for kind in CONNECTOR_KINDS)


@given(
    old=st.text(max_size=60),
    new=st.text(max_size=60),
    similarity=st.floats(0.0, 1.0),
    a=st.sampled_from(["Caroline", "Melanie", "Jon"]),
    b=st.sampled_from(["Caroline", "Melanie", "Jon"]),
)
def test_no_text_lets_one_speaker_take_another_speakers_turn(old, new, similarity, a, b) -> None:
    choice = decide(new, [near(old, similarity, turn(a))], **THRESHOLDS, origin=turn(b))
    if a != b:
        assert choice.decision is Decision.ADD
    else:
        assert choice.decision is not Decision.NOOP


def test_sleep_never_merges_two_turns_nor_supersedes_across_speakers() -> None:
    from cabrain.write.decision import contradiction, duplicates

    same = ("Caroline: Thanks so much!", "Caroline: Thanks so much!")
    assert duplicates(*same, 0.99, 0.9)  # two statements no one spoke: one absorbs the other
    assert not duplicates(*same, 0.99, 0.9, turn("Caroline"), turn("Caroline"))
    assert not duplicates("Thanks so much!", "Thanks so much!", 0.99, 0.9, turn("Caroline"), turn("Melanie"))
    assert duplicates(
        "We deploy on Fridays.", "We deploy on Fridays", 0.99, 0.9, record("folder", "a"), record("folder", "b")
    )
    kwargs = {"revision_similarity": 0.85, "duplicate_similarity": 0.95}
    assert contradiction("The API now runs on port 9000", "The API runs on port 8000", 0.95, **kwargs)
    assert not contradiction(
        "The API now runs on port 9000",
        "The API runs on port 8000",
        0.95,
        **kwargs,
        newer_origin=turn("Melanie"),
        older_origin=turn("Caroline"),
    )
    assert not contradiction(
        "The API now runs on port 9000",
        "The API runs on port 8000",
        0.95,
        **kwargs,
        newer_origin=record("import:letta", "blocks/persona"),
        older_origin=record("import:letta", "blocks/human"),
    )
