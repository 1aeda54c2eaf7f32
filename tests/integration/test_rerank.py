"""Rerank through a TEI-style /rerank endpoint (a scripted server on loopback)."""

import pytest

from cabrain.types import MemoryInput, RecallQuery
from tests.conftest import brings, start_fake


@pytest.fixture(scope="module")
@brings("subprocess")
def rerank_url():
    proc, port = start_fake("rerank_server")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


async def test_rerank_reorders_the_fused_candidates_and_reports_its_score(open_brain, rerank_url):
    from cabrain.settings import RerankerProvider

    brain = await open_brain(reranker_provider=RerankerProvider.HTTP, reranker_url=rerank_url)
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "proj")
    await brain.retain(
        "alice",
        [
            MemoryInput("The deploy checklist lives in the wiki.", "proj"),
            MemoryInput("Rollback steps: revert the tag, redeploy, and page the on-call engineer.", "proj"),
            MemoryInput("The team lunch is on Thursday.", "proj"),
        ],
    )
    query = "rollback steps page on-call engineer"
    reranked = await brain.recall("alice", RecallQuery(query, "proj", k=3))
    assert reranked.hits[0].memory.content.startswith("Rollback steps")
    assert reranked.hits[0].breakdown.rerank == pytest.approx(1.0)
    assert [h.score for h in reranked.hits] == sorted((h.score for h in reranked.hits), reverse=True)
    assert "rerank_ms" in reranked.timings_ms
    plain = await brain.recall("alice", RecallQuery(query, "proj", k=3, rerank=False))
    assert all(h.breakdown.rerank is None for h in plain.hits)
