"""The Brain core on real PostgreSQL: retain, recall, get, forget, reconsolidate, share."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from cabrain.errors import AccessDenied, InputError, NotFound
from cabrain.types import Decision, MemoryInput, MemoryType, Network, RecallMode, RecallQuery, Visibility


def mem(content, namespace="proj", **kw):
    return MemoryInput(content=content, namespace=namespace, **kw)


async def top(brain, agent, query, namespace="proj", **kw):
    result = await brain.recall(agent, RecallQuery(query, namespace, **kw))
    return [h.memory.content for h in result.hits]


CORPUS = [
    "The staging database runs PostgreSQL 18 on the storage node.",
    "اجتماع الفريق الأسبوعي يوم الأحد الساعة العاشرة صباحاً في مكتب القاهرة.",
    "Sara prefers dark mode in every editor.",
    "قررنا استخدام بايثون لكتابة خدمة الفواتير الجديدة.",
    "The CI pipeline takes about twelve minutes on a cold cache.",
]


async def test_arabic_and_english_questions_find_arabic_memories(brain):
    await brain.retain("alice", [mem(c) for c in CORPUS])
    assert (await top(brain, "alice", "متى اجتماع الفريق الأسبوعي؟", k=1))[0] == CORPUS[1]
    assert (await top(brain, "alice", "When is the weekly team meeting?", k=1))[0] == CORPUS[1]
    assert (await top(brain, "alice", "ما اللغة التي اخترناها لخدمة الفواتير؟", k=1))[0] == CORPUS[3]
    assert (await top(brain, "alice", "Which language did we pick for the invoicing service?", k=1))[0] == CORPUS[3]
    assert (await top(brain, "alice", "what does Sara like in her editor", k=1))[0] == CORPUS[2]


async def test_each_hit_carries_provenance_and_its_score_breakdown(brain):
    when = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
    await brain.retain(
        "alice",
        mem("The CI pipeline takes about twelve minutes.", source_kind="manual", source_ref="doc-7", valid_at=when),
    )
    result = await brain.recall("alice", RecallQuery("how long does the CI pipeline take", "proj", k=3))
    hit = result.hits[0]
    assert hit.memory.source_kind == "manual" and hit.memory.source_ref == "doc-7"
    assert hit.memory.owner_agent_id == "alice" and hit.memory.valid_at == when
    assert hit.breakdown.vector_rank == 1 and hit.breakdown.bm25_rank == 1
    assert 0 < hit.breakdown.vector_similarity <= 1 and hit.breakdown.bm25_score > 0
    assert hit.breakdown.fused == pytest.approx(hit.score)
    assert hit.breakdown.importance == hit.memory.importance
    assert {"embed_ms", "vector_ms", "bm25_ms", "total_ms"} <= set(result.timings_ms)


async def test_a_duplicate_is_a_noop_that_reinforces_the_memory(brain):
    [first] = await brain.retain("alice", mem("We deploy on Fridays after the review.", source_ref="s1"))
    [again] = await brain.retain("alice", mem("We deploy on Fridays after the review.", source_ref="s1"))
    [near] = await brain.retain("alice", mem("we deploy on fridays, after the review", source_ref="s2"))
    assert first.decision is Decision.ADD
    assert (again.decision, again.memory_id) == (Decision.NOOP, first.memory_id)
    assert (near.decision, near.memory_id) == (Decision.NOOP, first.memory_id)
    stored = await brain.get("alice", first.memory_id)
    assert stored.memory.access_count == 2
    assert stored.memory.importance > first.importance
    hits = await top(brain, "alice", "when do we deploy", k=5)
    assert hits.count("We deploy on Fridays after the review.") == 1 and len(hits) == 1


async def test_a_contradicted_fact_is_superseded_not_duplicated_and_its_history_stays(brain):
    [old] = await brain.retain("alice", mem("The public API listens on port 8000."))
    [new] = await brain.retain("alice", mem("The public API now listens on port 9000."))
    assert new.decision is Decision.UPDATE and new.superseded == (old.memory_id,)
    hits = await top(brain, "alice", "which port does the public API listen on?", k=5)
    assert hits == ["The public API now listens on port 9000."]
    history = await brain.get("alice", old.memory_id)
    assert history.memory.invalid_at is not None and history.memory.superseded_by == new.memory_id
    assert [m.id for m in history.next] == [new.memory_id]
    current = await brain.get("alice", new.memory_id)
    assert [m.id for m in current.previous] == [old.memory_id]
    with_history = await top(brain, "alice", "which port does the public API listen on?", k=5, include_invalid=True)
    assert set(with_history) == {"The public API listens on port 8000.", "The public API now listens on port 9000."}


async def test_forget_hides_a_memory_from_recall_but_get_still_shows_it(brain):
    [_kept, gone] = await brain.retain(
        "alice", [mem("Backups run nightly at 02:00."), mem("The VPN password rotates monthly.")]
    )
    forgotten = await brain.forget("alice", gone.memory_id, reason="outdated")
    assert forgotten.memory.invalid_at is not None
    assert forgotten.memory.metadata["forget_reason"] == "outdated"
    assert "The VPN password rotates monthly." not in await top(brain, "alice", "VPN password rotation", k=5)
    assert (await brain.get("alice", gone.memory_id)).memory.content == "The VPN password rotates monthly."


async def test_reconsolidate_writes_a_new_version_and_supersedes_the_old(brain):
    [old] = await brain.retain(
        "alice", mem("Omar owns the billing service.", visibility=Visibility.TEAM, network=Network.FACT)
    )
    result = await brain.reconsolidate(
        "alice", old.memory_id, "Layla owns the billing service since November.", reason="handover"
    )
    assert result.decision is Decision.UPDATE and result.superseded == (old.memory_id,)
    new = await brain.get("alice", result.memory_id)
    assert new.memory.visibility is Visibility.TEAM and new.memory.network is Network.FACT
    assert [m.id for m in new.previous] == [old.memory_id]
    assert (await brain.get("alice", old.memory_id)).memory.superseded_by == result.memory_id
    assert await top(brain, "alice", "who owns billing?", k=1) == ["Layla owns the billing service since November."]
    with pytest.raises(InputError, match="no longer current"):
        await brain.reconsolidate("alice", old.memory_id, "Someone else owns it.")


async def test_concurrent_identical_writes_store_one_memory(brain):
    results = await asyncio.gather(
        *(brain.retain("alice", mem("The release train leaves every second Tuesday.")) for _ in range(4))
    )
    decisions = sorted(r[0].decision.value for r in results)
    assert decisions == ["ADD", "NOOP", "NOOP", "NOOP"]
    assert len({r[0].memory_id for r in results}) == 1


async def test_visibility_and_grants_are_enforced(brain):
    await brain.retain(
        "alice",
        [
            mem("alice private note about the roadmap", visibility=Visibility.PRIVATE),
            mem("team note about the roadmap", visibility=Visibility.TEAM),
            mem("global note about the roadmap", visibility=Visibility.GLOBAL),
        ],
    )
    query = "roadmap note"
    assert set(await top(brain, "bob", query, k=10)) == {"global note about the roadmap"}
    await brain.share("alice", "proj", "bob", can_read=True)
    assert set(await top(brain, "bob", query, k=10)) == {"global note about the roadmap", "team note about the roadmap"}
    with pytest.raises(AccessDenied, match="may not write"):
        await brain.retain("bob", mem("bob tries to write"))
    assert await brain.share("alice", "proj", "bob", can_read=True, can_write=True) is False  # an offer
    with pytest.raises(AccessDenied, match="has not accepted"):
        await brain.retain("bob", mem("bob writes before accepting"))
    assert (await brain.accept_grant("bob", "proj"))["can_write"] is True
    [bobs] = await brain.retain("bob", mem("bob's own private note about the roadmap"))
    assert "bob's own private note about the roadmap" not in await top(brain, "alice", query, k=10)
    assert "bob's own private note about the roadmap" in await top(brain, "bob", query, k=10)
    with pytest.raises(NotFound):
        await brain.get("alice", bobs.memory_id)
    assert await brain.revoke("alice", "proj", "bob")
    assert set(await top(brain, "bob", query, k=10)) == {
        "global note about the roadmap",
        "bob's own private note about the roadmap",
    }
    with pytest.raises(AccessDenied, match="may not share"):
        await brain.share("bob", "proj", "carol")
    await brain.share("root", "proj", "carol")  # admins may
    assert "team note about the roadmap" in await top(brain, "carol", query, k=10)
    assert "alice private note about the roadmap" not in await top(brain, "root", query, k=10), (
        "private means owner only"
    )


async def test_recall_filters(brain):
    base = datetime(2026, 6, 1, tzinfo=UTC)
    await brain.retain(
        "alice",
        [
            mem(
                "deploy checklist step one",
                network=Network.FACT,
                memory_type=MemoryType.PROCEDURAL,
                source_kind="manual",
                valid_at=base,
            ),
            mem(
                "deploy went fine yesterday",
                network=Network.EXPERIENCE,
                source_kind="chat",
                valid_at=base + timedelta(days=40),
            ),
            mem(
                "deploy might be flaky", network=Network.BELIEF, source_kind="chat", valid_at=base + timedelta(days=80)
            ),
        ],
    )
    q = "deploy"
    assert await top(brain, "alice", q, networks=(Network.FACT,)) == ["deploy checklist step one"]
    assert await top(brain, "alice", q, memory_types=(MemoryType.PROCEDURAL,)) == ["deploy checklist step one"]
    assert set(await top(brain, "alice", q, source_kinds=("chat",))) == {
        "deploy went fine yesterday",
        "deploy might be flaky",
    }
    window = await top(brain, "alice", q, valid_from=base + timedelta(days=30), valid_to=base + timedelta(days=60))
    assert window == ["deploy went fine yesterday"]


async def test_recall_modes_rank_by_their_own_list(brain):
    await brain.retain("alice", [mem(c) for c in CORPUS])
    bm25 = await brain.recall("alice", RecallQuery("PostgreSQL storage node", "proj", mode=RecallMode.BM25))
    assert all(h.breakdown.vector_rank is None for h in bm25.hits) and "embed_ms" not in bm25.timings_ms
    vector = await brain.recall("alice", RecallQuery("PostgreSQL storage node", "proj", mode=RecallMode.VECTOR))
    assert all(h.breakdown.bm25_rank is None for h in vector.hits)
    assert bm25.hits[0].memory.content == vector.hits[0].memory.content == CORPUS[0]


async def test_recall_answers_the_same_whether_bm25_runs_during_the_embedding_or_after_it(brain, open_brain):
    # In process the lookups come first and the embedder gets the cores to itself; for a remote
    # embedder the lookups and BM25 run while the query is away. The answers are the same.
    await brain.retain("alice", [mem(c) for c in CORPUS])
    remote_order = await open_brain(recall_bm25_during_embedding=True)
    for q in ("PostgreSQL storage node", "اجتماع الفريق", "dark mode editor", "خدمة الفواتير"):
        for mode in RecallMode:
            here = await brain.recall("alice", RecallQuery(q, "proj", mode=mode))
            there = await remote_order.recall("alice", RecallQuery(q, "proj", mode=mode))
            assert [(h.memory.id, round(h.score, 9)) for h in here.hits] == [
                (h.memory.id, round(h.score, 9)) for h in there.hits
            ]
            assert ("bm25_ms" in here.timings_ms) == (mode is not RecallMode.VECTOR)
    # Either way an unknown namespace or agent is an error, not an empty answer.
    for b in (brain, remote_order):
        with pytest.raises(NotFound):
            await b.recall("alice", RecallQuery("anything", "nowhere"))
        with pytest.raises(AccessDenied):
            await b.recall("mallory", RecallQuery("anything", "proj"))


async def test_entities_link_memories_and_recall_returns_related_ones(brain):
    await brain.retain(
        "alice",
        [
            mem("We moved the job queue to Valkey last sprint."),
            mem("Valkey needs 4 GB of memory on the cache node."),
            mem("The design review is on Thursday."),
        ],
    )
    result = await brain.recall("alice", RecallQuery("where is the job queue now?", "proj", k=1))
    assert result.hits[0].memory.content == "We moved the job queue to Valkey last sprint."
    assert [m.content for m in result.related] == ["Valkey needs 4 GB of memory on the cache node."]
    got = await brain.get("alice", result.hits[0].memory.id)
    assert got.entities == ["Valkey"]


async def test_recall_bumps_access_and_logs_events_in_the_background(brain):
    [r] = await brain.retain("alice", mem("The on-call rotation changes every Monday."))
    await brain.recall("alice", RecallQuery("on-call rotation", "proj", k=1))
    await brain.close()  # waits for background bookkeeping
    from cabrain.store.db import connect

    conn = await connect(brain.settings.database_url.get_secret_value())
    try:
        row = await conn.fetchrow(
            "SELECT m.access_count, m.last_accessed_at FROM memories m WHERE m.id = $1", r.memory_id
        )
        ops = [x["op"] for x in await conn.fetch("SELECT op FROM memory_events ORDER BY id")]
    finally:
        await conn.close()
    assert row["access_count"] == 1 and row["last_accessed_at"] is not None
    assert ops.count("retain") == 1 and ops.count("recall") == 1


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (mem(""), "content is empty"),
        (mem("   \n"), "content is empty"),
        (mem("x" * 33_000), "33000 characters, the limit is 32000"),
        (mem("nul \x00 inside"), "NUL"),
        (mem("bad \ud800 surrogate"), "not valid UTF-8"),
        (mem("ok", namespace="has space"), "namespace 'has space' is not valid"),
        (mem("ok", importance=1.5), "importance must be between 0 and 1"),
        (mem("ok", metadata={"when": object()}), "metadata must be JSON-serialisable"),
    ],
)
async def test_bad_input_to_retain_is_a_clear_error_and_writes_nothing(readonly_brain, bad, message):
    # on the read-only database: a write before the refusal would fail as a write, not as this
    with pytest.raises(InputError, match=message):
        await readonly_brain.retain("alice", [mem("a perfectly fine memory"), bad])
    assert await top(readonly_brain, "alice", "perfectly fine memory", k=5) == []


async def test_bad_recall_requests_are_clear_errors(readonly_brain):
    brain = readonly_brain
    for query, message in [
        (RecallQuery("", "proj"), "query is empty"),
        (RecallQuery("x", "proj", k=0), "k must be between 1 and 100"),
        (RecallQuery("x", "proj", k=101), "k must be between 1 and 100"),
        (RecallQuery("q" * 5000, "proj"), "limit is 4000"),
    ]:
        with pytest.raises(InputError, match=message):
            await brain.recall("alice", query)
    with pytest.raises(NotFound, match="namespace 'nowhere' does not exist"):
        await brain.recall("alice", RecallQuery("x", "nowhere"))
    with pytest.raises(AccessDenied, match="unknown or disabled"):
        await brain.recall("mallory", RecallQuery("x", "proj"))
    with pytest.raises(NotFound, match="namespace 'nowhere' does not exist"):
        await brain.retain("alice", mem("x", namespace="nowhere"))
    with pytest.raises(NotFound):
        await brain.get("alice", uuid.uuid4())
    with pytest.raises(InputError, match="not a memory id"):
        await brain.get("alice", "not-a-uuid")


async def test_bulk_import_stores_each_content_once_per_source(brain):
    batch = [
        mem("Imported fact A", source_ref="f1"),
        mem("Imported fact B", source_ref="f1"),
        mem("Imported fact A", source_ref="f1"),
        mem("Imported fact A", source_ref="f2"),
    ]
    results = await brain.retain("alice", batch, decide=False)
    assert [r.decision for r in results] == [Decision.ADD, Decision.ADD, Decision.NOOP, Decision.ADD]
    assert results[2].memory_id == results[0].memory_id
    again = await brain.retain("alice", batch[:1], decide=False)
    assert (again[0].decision, again[0].memory_id) == (Decision.NOOP, results[0].memory_id)
    assert (await brain.get("alice", results[0].memory_id)).memory.access_count == 2


async def test_a_question_about_one_passage_of_a_long_memory_finds_it(brain):
    filler = [
        "The quarterly planning document covers many topics across the organisation.",
        "Marketing wants to expand the newsletter to three more countries next year.",
        "Finance reviewed the travel budget and kept it flat for the coming quarter.",
        "Facilities will repaint the second floor and replace the old meeting room chairs.",
        "The support team hired two people to cover the evening shift in Cairo.",
    ]
    needle = "The backup of the billing database now runs every six hours and is kept for ninety days."
    long_text = " ".join([*filler[:3], needle, *filler[3:]])
    others = [mem(f"Short note {i}: the cafeteria menu changes on day {i} of the week.") for i in range(6)]
    [long_memory, *_] = await brain.retain("alice", [mem(long_text), *others])
    async with brain.engine.pool.acquire() as conn:
        passages = await conn.fetchval("SELECT count(*) FROM memory_chunks WHERE memory_id = $1", long_memory.memory_id)
    assert passages >= 2
    result = await brain.recall(
        "alice", RecallQuery("how often is the billing database backed up?", "proj", k=1, mode=RecallMode.VECTOR)
    )
    assert result.hits[0].memory.id == long_memory.memory_id


async def test_many_concurrent_recalls_keep_exact_access_counts(brain):
    results = await brain.retain(
        "alice", [mem(f"Runbook step {i}: check the queue depth on node {i}.") for i in range(6)]
    )
    queries = [RecallQuery("runbook queue depth node", "proj", k=6, expand=False) for _ in range(40)]
    answers = await asyncio.gather(*(brain.recall("alice", q) for q in queries))
    expected = {}
    for answer in answers:
        for hit in answer.hits:
            expected[hit.memory.id] = expected.get(hit.memory.id, 0) + 1
    await brain.engine.bookkeeper.close()  # flush what is queued
    async with brain.engine.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, access_count FROM memories WHERE id = ANY($1::uuid[])", [r.memory_id for r in results]
        )
        events = await conn.fetchval("SELECT count(*) FROM memory_events WHERE op = 'recall'")
    assert {r["id"]: r["access_count"] for r in rows if r["access_count"]} == expected
    assert events == 40


async def test_a_disabled_agent_can_neither_create_nor_share_namespaces(brain):
    async with brain.engine.pool.acquire() as conn:
        await conn.execute("UPDATE agents SET disabled_at = now() WHERE id = 'alice'")
    with pytest.raises(AccessDenied, match="unknown or disabled"):
        await brain.share("alice", "proj", "bob")
    with pytest.raises(AccessDenied, match="unknown or disabled"):
        await brain.create_namespace("alice", "another")
    with pytest.raises(NotFound, match="namespace 'nowhere' does not exist"):
        await brain.share("root", "nowhere", "bob")


# Items whose decisions depend on the batch's earlier items: exact and near duplicates of an
# earlier item, a revision that supersedes an earlier item (then a revision of the revision), a
# retraction, entities an earlier item introduced, and items that match memories stored before.
BATCH_STORY = [
    "The public API listens on port 8000.",
    "Nadia Haddad leads the payments team in Dubai.",
    "The public API listens on port 8000.",
    "the public api listens on port 8000",
    "The public API now listens on port 9000.",
    "Ask Nadia Haddad before changing payments.",
    "The public API now listens on port 9100.",
    "قررنا استخدام بايثون لكتابة خدمة الفواتير الجديدة.",
    "The nightly backup job is no longer used.",
    "Backups are written to the archive bucket every night.",
    "The CI pipeline takes about twelve minutes on a cold cache.",
    "The CI pipeline now takes about eight minutes on a cold cache.",
]
STORED_BEFORE = [
    "The nightly backup job runs at 02:00.",
    "The CI pipeline takes about twelve minutes on a cold cache.",
]


# connections: the neighbour searches' own connections (0: on the transaction's); group: texts
# embedded at a time (below the batch's 12 items, it is written group by group as groups embed).
@pytest.mark.parametrize(("connections", "group"), [(0, 32), (4, 32), (4, 3), (0, 5)])
async def test_a_batch_decides_exactly_as_its_items_written_one_by_one(brain, connections, group):
    brain.engine.settings = brain.settings.model_copy(
        update={"retain_search_connections": connections, "embed_batch_size": group}
    )
    await brain.create_namespace("alice", "one-by-one")
    await brain.create_namespace("alice", "batched")
    outcomes = {}
    for namespace in ("one-by-one", "batched"):
        before = await brain.retain("alice", [mem(t, namespace) for t in STORED_BEFORE])
        if namespace == "batched":
            results = await brain.retain("alice", [mem(t, namespace) for t in BATCH_STORY])
        else:
            results = [(await brain.retain("alice", mem(t, namespace)))[0] for t in BATCH_STORY]
        ids = {r.memory_id: f"before{i}" for i, r in enumerate(before)}
        for i, r in enumerate(results):
            ids.setdefault(r.memory_id, f"item{i}")
        label = ids.get
        outcomes[namespace] = [
            (
                r.decision.value,
                label(r.memory_id, "?") if r.memory_id else None,
                tuple(label(s, "?") for s in r.superseded),
                r.entities,
                round(r.importance, 3),
            )
            for r in results
        ]
        current = await top(brain, "alice", "which port does the public API listen on?", namespace, k=10)
        outcomes[namespace].append(tuple(sorted(current)))
    assert outcomes["batched"] == outcomes["one-by-one"]
    decisions = [o[0] for o in outcomes["batched"][: len(BATCH_STORY)]]
    assert {"ADD", "NOOP", "UPDATE"} <= set(decisions)  # the story exercises the in-batch paths
    assert outcomes["batched"][4][2] == ("item0",)  # superseded an item of the same batch


async def test_a_grant_is_accepted_or_declined_only_by_its_grantee(brain):
    with pytest.raises(NotFound, match="holds no grant"):
        await brain.accept_grant("bob", "proj")
    assert await brain.decline_grant("bob", "proj") is False
    assert await brain.share("alice", "proj", "bob", can_write=True) is False
    assert (await brain.accept_grant("bob", "proj"))["accepted_at"] is not None
    assert await brain.share("alice", "proj", "bob", can_write=False) is True  # narrowing keeps the consent
    assert await brain.share("alice", "proj", "bob", can_write=True) is False  # widening asks again
    assert await brain.decline_grant("bob", "proj") is True
    with pytest.raises(AccessDenied, match="personal to agent 'alice'"):
        await brain.create_namespace("bob", "@alice/diary")
    assert await brain.create_namespace("bob", "@bob/diary") is True
