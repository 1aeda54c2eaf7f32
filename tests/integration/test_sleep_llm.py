"""The sleep cycle with a chat model configured (a scripted OpenAI-compatible server on loopback):
facts distilled by the model keep their sources, entity summaries come from it, it judges
contradictions the deterministic signals miss, and an unusable answer falls back to extraction."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg

from cabrain.sleep.cycle import run_cycle
from cabrain.types import MemoryInput, MemoryType, Network, Visibility
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
