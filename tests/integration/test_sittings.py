"""Sleep distills a conversation's turns into facts a person would write (cabrain.sleep.sittings),
each linked to its turn, on real PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import asyncpg
import pytest

from cabrain.errors import NotFound
from cabrain.sleep.cycle import run_cycle
from cabrain.types import MemoryInput, Network, RecallQuery, Visibility

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TURNS = [
    ("Caroline", "Caroline: Hey Mel! Good to see you! How have you been?"),
    (
        "Melanie",
        "Melanie: Hey Caroline! I'm swamped with the kids & work, and I ran a charity race for mental health yesterday.",
    ),
    ("Caroline", "Caroline: Wow, that's amazing! You are so strong."),
    (
        "Caroline",
        "Caroline: I went to a LGBTQ support group last week and the transgender stories there inspired me so much.",
    ),
]
FACTS = """
SELECT m.content, src.content AS turn FROM memories m
JOIN memory_sources s ON s.memory_id = m.id AND s.relation = 'distilled_from'
JOIN memory_ids i ON i.id = s.source_id JOIN memories src ON src.id = i.id AND src.valid_at = i.valid_at
WHERE m.namespace = $1 AND m.network = 'fact' AND m.source_kind = 'sleep' ORDER BY m.content
"""


async def test_a_sittings_turns_become_third_person_facts_linked_to_them(brain, db_dsn, settings_for) -> None:
    await brain.create_namespace("alice", "chat")
    await brain.retain(
        "alice",
        [
            MemoryInput(
                text, "chat", visibility=Visibility.TEAM, valid_at=SAID, metadata={"speaker": who, "thread": "s1"}
            )
            for who, text in TURNS
        ],
    )
    report = await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    assert report.status == "done"
    assert report.steps["consolidate"]["turns_distilled"] == 4
    conn = await asyncpg.connect(db_dsn)
    try:
        facts = [(r["content"], r["turn"]) for r in await conn.fetch(FACTS, "chat")]
        pending = await conn.fetchval(
            "SELECT count(*) FROM memories WHERE namespace = 'chat' AND memory_type = 'episodic' "
            "AND consolidated_at IS NULL"
        )
    finally:
        await conn.close()
    assert facts == [
        (
            "Caroline went to a LGBTQ support group the week before 8 May 2023 and the transgender stories there "
            "inspired Caroline so much.",
            TURNS[3][1],
        ),
        (
            "Melanie is swamped with the kids & work, and Melanie ran a charity race for mental health on 7 May 2023.",
            TURNS[1][1],
        ),
    ]  # the greeting and the praise of the listener are no facts
    assert pending == 0  # every turn read is consolidated


async def test_recall_counts_a_fact_and_its_turn_as_one_answer(brain, db_dsn, settings_for) -> None:
    await brain.create_namespace("alice", "chat")
    stored = await brain.retain(
        "alice",
        [
            MemoryInput(
                text, "chat", visibility=Visibility.TEAM, valid_at=SAID, metadata={"speaker": who, "thread": "s1"}
            )
            for who, text in TURNS
        ],
    )
    turn_ids = [r.memory_id for r in stored]
    before = await brain.recall("alice", RecallQuery("charity race for mental health", "chat", k=4, expand=False))
    assert len(before.hits) == 4 and all(not h.covers for h in before.hits)
    await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    after = await brain.recall("alice", RecallQuery("charity race for mental health", "chat", k=4, expand=False))
    ids = [h.memory.id for h in after.hits]
    first = after.hits[0]
    # the fact and the turn it came from hold one place: whichever ranks first covers the other
    race_turn = turn_ids[1]
    if first.memory.network.value == "fact":
        assert first.covers == (race_turn,) and race_turn not in ids
    else:
        assert first.memory.id == race_turn and len(first.covers) == 1 and first.covers[0] not in ids
    # 4 turns and 2 facts are 4 answers: each fact holds one place with its turn
    assert len(after.hits) == 4 and sum(1 for h in after.hits if h.covers) == 2
    assert len(set(ids) | {c for h in after.hits for c in h.covers}) == 6


async def test_entities_count_their_mentions_and_link_through_shared_facts(brain, db_dsn, settings_for) -> None:
    await brain.create_namespace("alice", "chat")
    turns = [
        (
            "Caroline",
            "Caroline: Melanie and I went hiking in Yosemite yesterday with the whole support group, and we camped "
            "beside the river under the stars until morning.",
        ),
        (
            "Melanie",
            "Melanie: I painted a sunset over Yosemite last week, and Caroline loved the warm orange colours of the "
            "finished canvas hanging in my kitchen.",
        ),
        (
            "Melanie",
            "Melanie: My kids and I visited the science museum in Boston, they loved the dinosaur skeletons and the "
            "huge planetarium show about distant galaxies.",
        ),
    ]
    await brain.retain(
        "alice",
        [
            MemoryInput(t, "chat", visibility=Visibility.TEAM, valid_at=SAID, metadata={"speaker": w, "thread": "s"})
            for w, t in turns
        ],
    )
    await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    yosemite = await brain.entity("alice", "chat", "Yosemite")
    assert yosemite.mentions == 4  # two turns and the two facts distilled from them
    # which names a fact's text yields can depend on which entities exist when it is read (a name
    # opening a sentence counts once it is known), so the edges are checked, not their exact weights
    shared = {r.name: r.shared_facts for r in yosemite.related}
    assert shared.get("Caroline", 0) >= 1 and shared.get("Melanie", 0) >= 1 and "Boston" not in shared
    boston = await brain.entity("alice", "chat", "Boston")
    assert "Yosemite" not in {r.name for r in boston.related}  # no fact mentions both
    graph = await brain.entity_graph("alice", "chat", "Yosemite")
    # the entities it shares facts with are joined to it, at least as heavily as the facts they share
    names = {n["id"]: n["label"] for n in graph["nodes"]}
    center = graph["center"]
    weights = {
        names[e["target"] if e["source"] == center else e["source"]]: e["weight"]
        for e in graph["edges"]
        if e["kind"] == "mentioned together" and center in (e["source"], e["target"])
    }
    assert yosemite.related and all(weights.get(r.name, 0) >= r.shared_facts >= 1 for r in yosemite.related)
    # another agent without access sees neither the entity nor its edges
    with pytest.raises(NotFound):
        await brain.entity("bob", "chat", "Yosemite")


async def test_a_nickname_merges_into_the_name_it_stands_for_and_the_merge_reverts(brain, db_dsn, settings_for) -> None:
    chat = [
        ("Caroline", "Caroline: Hey Mel! Good to see you! How have you been?"),
        ("Melanie", "Melanie: Hey Caroline! I'm swamped with the kids and work lately."),  # too thin for a fact
    ]
    ambiguous = [  # "Mel" begins Melanie and Melissa here: it stays apart
        ("Caroline", "Caroline: Hey Mel! Good to see you!"),
        ("Melanie", "Melanie: Hey Caroline! My cousin Melissa says hi."),
    ]
    for namespace, turns in (("chat", chat), ("chat2", ambiguous)):
        await brain.create_namespace("alice", namespace)
        await brain.retain(
            "alice",
            [
                MemoryInput(
                    t, namespace, visibility=Visibility.TEAM, valid_at=SAID, metadata={"speaker": w, "thread": "s1"}
                )
                for w, t in turns
            ],
        )
    report = await run_cycle(
        settings_for(db_dsn), db_dsn, namespaces=["chat", "chat2"], steps=["consolidate"], use_ray=False
    )
    assert report.status == "done", report.tasks
    assert report.steps["consolidate"]["aliases_merged"] == 1  # Mel -> Melanie, in "chat" only
    assert len((await brain.entity("alice", "chat2", "Mel")).memories) == 1
    melanie = await brain.entity("alice", "chat", "Melanie")  # the speaker, now an entity
    assert [m.content for m in melanie.memories] == [chat[0][1]]  # Caroline's "Hey Mel!"
    with pytest.raises(NotFound):
        await brain.entity("alice", "chat", "Mel")  # no mention of its own left
    [judgment] = [
        j for m in melanie.memories for j in await brain.judgments("alice", m.id) if j["kind"] == "alias"
    ] or [None]
    assert judgment is not None and judgment["inputs"] == {"short": "Mel", "long": "Melanie"}

    # a later mention of the nickname moves too, at the next consolidation
    later = "Caroline: Mel, your painting of the lake at sunrise was the best thing in the whole gallery show."
    await brain.retain(
        "alice",
        [
            MemoryInput(
                later,
                "chat",
                visibility=Visibility.TEAM,
                valid_at=SAID,
                metadata={"speaker": "Caroline", "thread": "s1"},
            )
        ],
    )
    await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    assert {m.content for m in (await brain.entity("alice", "chat", "Melanie")).memories} >= {chat[0][1], later}
    with pytest.raises(NotFound):
        await brain.entity("alice", "chat", "Mel")

    undo = await brain.revert("alice", judgment_id=judgment["id"])  # the first merge; the later move is its own
    assert [m.content for m in (await brain.entity("alice", "chat", "Melanie")).memories] == [later]
    assert [m.content for m in (await brain.entity("alice", "chat", "Mel")).memories] == [chat[0][1]]
    again = await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    assert again.steps["consolidate"].get("aliases_merged", 0) == 0  # a reverted pair stays apart
    await brain.revert("alice", judgment_id=undo["id"])  # reverting the revert merges them again
    assert len((await brain.entity("alice", "chat", "Melanie")).memories) == 2
    with pytest.raises(NotFound):
        await brain.entity("alice", "chat", "Mel")


SUMMARY = """
SELECT m.id, m.content, m.visibility, m.owner_agent_id, m.invalid_at, m.superseded_by, m.metadata,
       array(SELECT f.content FROM memory_sources s JOIN memories f ON f.id = s.source_id
             WHERE s.memory_id = m.id AND s.relation = 'summarizes' ORDER BY f.content) AS facts
FROM memories m WHERE m.namespace = $1 AND m.network = 'observation' ORDER BY m.created_at
"""


async def _summaries(dsn: str, namespace: str) -> list[dict]:
    conn = await asyncpg.connect(dsn)
    try:
        return [{**r, "metadata": json.loads(r["metadata"])} for r in await conn.fetch(SUMMARY, namespace)]
    finally:
        await conn.close()


async def test_a_sitting_gets_a_summary_that_grows_with_it_and_reverts(brain, db_dsn, settings_for) -> None:
    await brain.create_namespace("alice", "chat")

    def turns(pairs, thread="s1", visibility=Visibility.TEAM):
        return [
            MemoryInput(t, "chat", visibility=visibility, valid_at=SAID, metadata={"speaker": w, "thread": thread})
            for w, t in pairs
        ]

    await brain.retain("alice", turns(TURNS))
    first = await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    assert first.steps["consolidate"]["sitting_summaries"] == 1
    [summary] = await _summaries(db_dsn, "chat")
    assert summary["content"].startswith("Caroline and Melanie talked on 8 May 2023. ")
    assert "Melanie ran a charity race for mental health on 7 May 2023" in summary["content"]
    assert "Caroline went to a LGBTQ support group" in summary["content"]
    assert summary["metadata"]["sitting"] == "s1" and summary["visibility"] == "team"
    assert len(summary["facts"]) == 2  # linked to the facts it summarizes, as 'summarizes'
    question = "what did Caroline and Melanie talk about"
    hits = await brain.recall("alice", RecallQuery(question, "chat", k=10))
    assert summary["id"] not in {h.memory.id for h in hits.hits}  # by default a summary takes no turn's place
    asked = await brain.recall("alice", RecallQuery(question, "chat", k=3, networks=(Network.OBSERVATION,)))
    assert [h.memory.id for h in asked.hits] == [summary["id"]]

    # the sitting goes on: its summary is rewritten with every fact, the old one superseded by it
    more = [
        ("Melanie", "Melanie: I signed up for a pottery class last Friday and I made my first clay bowl for my kids."),
    ]
    await brain.retain("alice", turns(more))
    second = await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    assert second.steps["consolidate"]["sitting_summaries_replaced"] == 1
    old, new = await _summaries(db_dsn, "chat")
    assert old["id"] == summary["id"] and old["superseded_by"] == new["id"] and new["invalid_at"] is None
    assert "pottery class" in new["content"] and len(new["facts"]) == 3
    again = await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    assert not again.steps["consolidate"].get("sitting_summaries")  # no new turn: nothing rewritten
    assert len(await _summaries(db_dsn, "chat")) == 2

    # reverting the second run takes its summary out and brings the first back
    await brain.revert_run("alice", second.run_id)
    old, new = await _summaries(db_dsn, "chat")
    assert old["superseded_by"] is None and old["invalid_at"] is None and new["invalid_at"] is not None

    # a private sitting's summary is its owner's alone
    await brain.share("alice", "chat", "bob")
    private = [
        ("Caroline", "Caroline: I adopted a grey kitten from the shelter downtown and named her Luna after the moon."),
        ("Melanie", "Melanie: I finally finished reading the long fantasy novel my sister gave me for my birthday."),
    ]
    await brain.retain("alice", turns(private, thread="s2", visibility=Visibility.PRIVATE))
    await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    [mine] = [s for s in await _summaries(db_dsn, "chat") if s["metadata"]["sitting"] == "s2"]
    assert mine["visibility"] == "private" and mine["owner_agent_id"] == "alice" and "Luna" in mine["content"]
    summaries_only = (Network.OBSERVATION,)
    seen = await brain.recall("bob", RecallQuery("Caroline kitten Luna shelter", "chat", k=10, networks=summaries_only))
    assert mine["id"] not in {h.memory.id for h in seen.hits}
    hers = await brain.recall("alice", RecallQuery("kitten Luna", "chat", k=10, networks=summaries_only))
    assert mine["id"] in {h.memory.id for h in hers.hits}
