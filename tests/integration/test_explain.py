"""Recall as a debugger (issue 36, item 8): ``Brain.explain_recall`` runs the very recall an agent
makes but counts nothing (no access count, no last-used time, no recall event), takes each hit
apart into terms whose printed formulas recompute its score, and says why a memory was not returned."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cabrain.errors import InputError
from cabrain.search.explain import NOT_FOUND, ExplainedHit, Explanation
from cabrain.sleep.cycle import run_cycle
from cabrain.types import MemoryInput, MemoryType, Network, RecallQuery

NOTES = [
    "The staging database runs PostgreSQL 18 on the storage node.",
    "The production database runs PostgreSQL 17 with two replicas.",
    "Sara prefers dark mode in every editor.",
    "The CI pipeline takes about twelve minutes on a cold cache.",
    "Lunch on Fridays is at the Lebanese place near the station.",
]
QUESTION = "which PostgreSQL version does the staging database run?"


def mem(content: str, namespace: str = "proj", **kw) -> MemoryInput:
    return MemoryInput(content=content, namespace=namespace, **kw)


async def store(brain, texts=NOTES, **kw) -> list[uuid.UUID]:
    return [(await brain.retain("alice", mem(t, **kw)))[0].memory_id for t in texts]


async def usage(brain, ids: list[uuid.UUID]) -> tuple[dict, int]:
    """Each memory's (access count, last used) and the namespace's recall events, once everything
    queued is written."""
    await brain.engine.bookkeeper.close()  # writes what is queued (it starts again on the next use)
    async with brain.engine.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, access_count, last_accessed_at FROM memories WHERE id = ANY($1::uuid[])", ids
        )
        events = await conn.fetchval("SELECT count(*) FROM memory_events WHERE op = 'recall'")
    return {r["id"]: (r["access_count"], r["last_accessed_at"]) for r in rows}, events


def evaluate(expression: str) -> float:
    """A printed formula (× and − as shown; numbers, + - * / and parentheses only) as a number."""
    plain = expression.replace("×", "*").replace("−", "-")
    assert re.fullmatch(r"[0-9.+\-*/() ]+", plain), plain
    return float(eval(plain))


def check_recomputes(hit: ExplainedHit) -> None:
    """Each term's printed formula gives its value, the terms add up to the fused score, the fused
    formula's printed numbers add up to its printed total, and the score is what it says."""
    for term in hit.terms:
        assert evaluate(term.expression) == pytest.approx(term.value, rel=1e-4, abs=1e-5), term
    assert sum(t.value for t in hit.terms) == pytest.approx(hit.fused.score, abs=1e-9)
    left, total = hit.formula.removeprefix("fused = ").rsplit(" = ", 1)
    parts = [float(p.rsplit(" ", 1)[1]) for p in left.split(" + ")]
    assert [p.split(" ")[0] for p in left.split(" + ")] == [t.name for t in hit.terms]
    assert sum(parts) == pytest.approx(float(total), abs=1e-4 * len(parts))
    assert float(total) == pytest.approx(hit.fused.score, abs=5e-5)
    if hit.rerank is None:
        assert hit.score == hit.fused.score and hit.score_formula == f"score = fused = {hit.score:.4f}"


async def test_a_playground_recall_counts_no_use_and_writes_no_event(brain) -> None:
    ids = await store(brain)
    before = await usage(brain, ids)
    explained = await brain.explain_recall("alice", RecallQuery(QUESTION, "proj", k=3), why_not=ids[4])
    assert explained.hits[0].memory.content == NOTES[0]
    assert await usage(brain, ids) == before  # counts, last-used times and recall events unchanged
    # the same recall made by an agent is counted: the measure above would have seen it
    await brain.recall("alice", RecallQuery(QUESTION, "proj", k=3))
    counts, events = await usage(brain, ids)
    assert events == before[1] + 1
    assert {i for i in ids if counts[i][0] > before[0][i][0]} == {h.memory.id for h in explained.hits}


@pytest.mark.parametrize("fusion", ["score", "rrf"])
async def test_every_hits_formula_recomputes_its_score(open_brain, fusion: str) -> None:
    brain = await open_brain(fusion=fusion)
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    await store(brain)
    explained = await brain.explain_recall("alice", RecallQuery(QUESTION, "proj", k=5))
    assert len(explained.hits) == 5
    assert [h.rank for h in explained.hits] == [1, 2, 3, 4, 5]
    for hit in explained.hits:
        check_recomputes(hit)
        # the ranks and scores each list gave it are the recall's own
        assert hit.dense.rank is not None and hit.dense.score is not None
    scores = [h.score for h in explained.hits]
    assert scores == sorted(scores, reverse=True)
    if fusion == "rrf":
        first = explained.hits[0].terms[0]
        assert first.name == "vector" and first.expression == f"1 / (60 + {explained.hits[0].dense.rank})"
    recalled = await brain.recall("alice", RecallQuery(QUESTION, "proj", k=5))
    assert [(h.memory.id, h.score) for h in recalled.hits] == [(h.memory.id, h.score) for h in explained.hits]


async def test_conversation_terms_show_only_where_they_applied(brain) -> None:
    turns = [
        ("Melanie", "s1", "Melanie: we painted the fence green last weekend."),
        ("Caroline", "s1", "Caroline: the fence looked great after painting."),
        ("Caroline", "s2", "Caroline: my dog loves the park by the river."),
    ]
    for speaker, sitting, text in turns:
        await brain.retain("alice", mem(text, metadata={"speaker": speaker, "sitting": sitting}))
    await brain.retain("alice", mem("Painting a fence needs two coats in wet weather."))  # a note: no sitting
    explained = await brain.explain_recall("alice", RecallQuery("what did Melanie paint?", "proj", k=4))
    by_text = {h.memory.content: h for h in explained.hits}
    for hit in explained.hits:
        check_recomputes(hit)
        names = [t.name for t in hit.terms]
        speaker = hit.memory.metadata.get("speaker")
        assert ("speaker" in names) == (speaker == "Melanie"), (hit.memory.content, names)
        # a cohesion term (shown only where it added something) names the sitting it came from, or
        # says the memory is in none
        for term in (t for t in hit.terms if t.name == "cohesion"):
            sitting = hit.memory.metadata.get("sitting")
            assert term.label.endswith(f"(sitting {sitting})" if sitting else "(no sitting: a sitting of its own)")
    melanie = by_text["Melanie: we painted the fence green last weekend."]
    assert melanie.rank == 1 and [t.name for t in melanie.terms] == [
        "vector",
        "keyword",
        "cohesion",
        "speaker",
        "salience",
    ]
    note = by_text["Painting a fence needs two coats in wet weather."]
    assert "speaker" not in [t.name for t in note.terms]


async def test_without_a_reranker_a_ticked_rerank_says_it_was_not_applied(brain) -> None:
    await store(brain)
    asked = await brain.explain_recall("alice", RecallQuery(QUESTION, "proj", rerank=True))
    assert (
        asked.rerank.startswith("not applied: no reranker configured") and "CABRAIN_RERANKER_PROVIDER" in asked.rerank
    )
    assert all(h.rerank is None for h in asked.hits)
    unasked = await brain.explain_recall("alice", RecallQuery(QUESTION, "proj", rerank=False))
    assert unasked.rerank == "not asked"


async def why(brain: object, memory_id: uuid.UUID, agent: str = "alice", **query) -> tuple[Explanation, list[str]]:
    explained = await brain.explain_recall(  # type: ignore[attr-defined]
        agent, RecallQuery(query.pop("text", QUESTION), query.pop("namespace", "proj"), **query), why_not=memory_id
    )
    assert explained.why_not is not None and explained.why_not.memory_id == memory_id
    return explained, list(explained.why_not.reasons)


async def test_why_not_a_returned_memory_says_where_it_is(brain) -> None:
    ids = await store(brain)
    explained, reasons = await why(brain, ids[0], k=3)
    w = explained.why_not
    assert reasons == ["it was returned, at rank 1"] and w is not None and w.returned == 1 and not w.filtered
    assert w.dense is not None and w.dense.rank == explained.hits[0].dense.rank
    assert w.fused is not None and w.fused.score == explained.hits[0].fused.score


async def test_why_not_below_the_cut_off(brain) -> None:
    ids = await store(brain)
    explained, reasons = await why(brain, ids[1], k=1)
    w = explained.why_not
    assert w is not None and w.returned is None and w.fused is not None and w.fused.rank is not None
    assert w.fused.rank > 1 and w.cutoff == explained.hits[0].score and w.fused.score < w.cutoff and not w.filtered
    assert reasons == [
        f"below the cut-off: fused rank {w.fused.rank}, score {w.fused.score:.4f} < the k-th hit's {w.cutoff:.4f} (k = 1)"
    ]


async def test_why_not_a_memory_neither_search_reached(open_brain) -> None:
    brain = await open_brain(recall_candidates=2)
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    ids = await store(brain)
    explained, reasons = await why(brain, ids[4], k=1)  # lunch: nothing like the question
    w = explained.why_not
    assert (
        w is not None
        and w.dense is not None
        and w.dense.rank is None
        and w.keyword is not None
        and w.keyword.rank is None
    )
    assert reasons == ["not in the top 2 of the vector or the keyword search: too far from the query"]


async def test_why_not_a_superseded_or_forgotten_memory(brain) -> None:
    ids = await store(brain)
    newer = await brain.reconsolidate("alice", ids[0], "The staging database runs PostgreSQL 19 on the storage node.")
    explained, reasons = await why(brain, ids[0])
    assert explained.why_not is not None and explained.why_not.filtered
    assert len(reasons) == 1 and reasons[0].startswith(f"it was superseded by {newer.memory_id} on ")
    assert reasons[0].endswith("tick 'with history'")
    # with history it competes, and its hit carries what superseded it (the console's badge)
    explained, reasons = await why(brain, ids[0], include_invalid=True)
    [old] = [h for h in explained.hits if h.memory.id == ids[0]]
    assert old.memory.superseded_by == newer.memory_id and reasons == [f"it was returned, at rank {old.rank}"]
    await brain.forget("alice", ids[1])
    _, reasons = await why(brain, ids[1])
    assert len(reasons) == 1 and reasons[0].startswith("it was forgotten (invalid) on ")


async def test_why_not_a_memory_a_filter_cut(brain) -> None:
    old = datetime(2024, 1, 10, tzinfo=UTC)
    [fact] = await store(
        brain,
        ["The staging database backups run nightly at two."],
        network=Network.FACT,
        memory_type=MemoryType.SEMANTIC,
        source_kind="notes",
        valid_at=old,
    )
    await store(brain)
    _, reasons = await why(brain, fact, networks=(Network.EXPERIENCE,))
    assert reasons == ["its network is fact, the query asked for experience"]
    _, reasons = await why(brain, fact, memory_types=(MemoryType.EPISODIC,))
    assert reasons == ["its type is semantic, the query asked for episodic"]
    _, reasons = await why(brain, fact, source_kinds=("slack",))
    assert reasons == ["its source is notes, the query asked for slack"]
    since = datetime(2025, 1, 1, tzinfo=UTC)
    _, reasons = await why(brain, fact, valid_from=since)
    assert reasons == ["it became valid on 2024-01-10 00:00 UTC, before 'from' 2025-01-01 00:00 UTC"]
    _, reasons = await why(brain, fact, valid_to=old - timedelta(days=1))
    assert reasons == ["it became valid on 2024-01-10 00:00 UTC, not before 'to' 2024-01-09 00:00 UTC"]
    then = datetime(2023, 6, 1, tzinfo=UTC)
    _, reasons = await why(brain, fact, as_of=then)
    assert reasons == ["it became valid on 2024-01-10 00:00 UTC, after 'as of' 2023-06-01 00:00 UTC"]
    await brain.create_namespace("alice", "other")
    [elsewhere] = await brain.retain("alice", mem(NOTES[0], namespace="other"))
    _, reasons = await why(brain, elsewhere.memory_id)
    assert reasons == ["it is in namespace other, the query searched proj"]


async def test_why_not_an_unreadable_memory_is_only_not_found(brain) -> None:
    ids = await store(brain)  # alice's private memories
    await brain.create_namespace("bob", "bobs")
    await brain.retain("bob", mem("Bob keeps his notes here.", namespace="bobs"))
    hidden, _ = await why(brain, ids[0], agent="bob", namespace="bobs")
    unknown, _ = await why(brain, uuid.uuid4(), agent="bob", namespace="bobs")
    for w in (hidden.why_not, unknown.why_not):
        assert w is not None and not w.found and w.reasons == (NOT_FOUND,)
        assert (w.namespace, w.dense, w.keyword, w.fused, w.cutoff, w.returned) == (None,) * 6


@pytest.mark.parametrize("bad", ["", "not-an-id", "1234", "00000000-0000-0000-0000-00000000000g"])
async def test_a_bad_memory_id_is_a_clear_input_error(brain, bad: str) -> None:
    await store(brain, NOTES[:1])
    with pytest.raises(InputError, match="memory id"):
        await brain.explain_recall("alice", RecallQuery(QUESTION, "proj"), why_not=bad)


async def test_why_not_an_archived_memory(brain, db_dsn) -> None:
    when = datetime.now(UTC) - timedelta(days=90)
    [old] = await brain.retain("alice", [mem(NOTES[0], valid_at=when)], decide=False)
    await store(brain, NOTES[1:])
    async with brain.engine.pool.acquire() as conn:
        await conn.execute("UPDATE memories SET created_at = now() - interval '90 days' WHERE id = $1", old.memory_id)
    demoting = brain.settings.model_copy(update={"sleep_demote_after_days": 30, "sleep_demote_keep_importance": 1.0})
    report = await run_cycle(demoting, db_dsn, steps=["demote"], use_ray=False)
    assert report.steps["demote"]["demoted"] == 1
    explained, reasons = await why(brain, old.memory_id)
    assert explained.why_not is not None and explained.why_not.found and explained.why_not.filtered
    assert reasons == ["it is archived (in the cold tier): hot recall does not search it; search the archive"]
    assert old.memory_id not in {h.memory.id for h in explained.hits}


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=60), st.uuids().map(str), st.uuids().map(lambda u: u.hex.upper())))
async def test_any_text_as_a_memory_id_is_a_clear_answer(brain, text: str) -> None:
    """Any text asked about: an id is answered ("not found" for one nobody holds), anything else is
    refused as not a memory id; never a server error."""
    try:
        explained = await brain.explain_recall("alice", RecallQuery(QUESTION, "proj", k=1), why_not=text)
    except InputError as exc:
        assert "is not a memory id" in str(exc)
    else:
        assert explained.why_not is not None and explained.why_not.reasons == (NOT_FOUND,)
