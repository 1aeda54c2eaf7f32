"""Constrained chains end to end against the scripted model server on loopback: a local model that
knows an invoice's fields but not their form is held to the form the kind's frontier answers take (a
JSON Schema sent as ``response_format``), learning finds that chain, and routing sends the schema."""

import json
import random

import httpx
import pytest

from cabrain.workflows import clusters
from tests.integration.test_workflows import dispatch, invoice, learn, setup_brain


@pytest.fixture
async def models(llm_server):
    httpx.post(f"{llm_server}/_reset")
    return llm_server


async def test_a_model_held_to_the_kinds_shape_is_learned_and_routed_with_it(open_brain, models, db_dsn):
    brain = await setup_brain(open_brain, models, workflow_route_confidence=0.6)
    httpx.post(f"{models}/_mode", json={"model": "local-good", "mode": "sloppy"})
    rng = random.Random(5)
    first = [await dispatch(brain, invoice(rng), "json") for _ in range(3)]
    cluster_id = first[0].cluster["id"]
    assert {r.cluster["id"] for r in first} == {cluster_id}

    report = await learn(brain, db_dsn)
    assert report["failed"] == 0
    async with brain.engine.pool.acquire() as conn:
        attempts = await conn.fetch("SELECT chain_key, score FROM chain_attempts ORDER BY created_at")
        cluster = await clusters.get(conn, cluster_id)
    scores = {}
    for a in attempts:
        scores.setdefault(a["chain_key"], []).append(a["score"])
    # Its own form scores low; held to the kind's shape it is right, and the search stops there.
    assert max(scores["single:qwen"]) < 0.7 and min(scores["constrained:qwen"]) > 0.9
    assert list(scores) == ["single:qwen", "constrained:qwen"]
    assert cluster.best_chain["key"] == "constrained:qwen" and cluster.trusted(0.6, 0.9)

    # Each learning call was shaped by the kind's other references, never by the answer it was scored on.
    log = httpx.get(f"{models}/_log").json()
    shaped = [e for e in log if e["schema"] is not None]
    assert len(shaped) == len(scores["constrained:qwen"]) >= 2 and {e["model"] for e in shaped} == {"local-good"}
    schema = shaped[0]["schema"]
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["required"]) == {"invoice", "total", "currency"}
    assert schema["properties"]["invoice"] == {"type": "integer"}
    assert schema["properties"]["total"]["type"] == "number"

    routed = await dispatch(brain, invoice(rng), "json")
    assert routed.route == "local" and routed.chain["key"] == "constrained:qwen"
    assert set(json.loads(routed.output)) == {"invoice", "total", "currency"}
    assert httpx.get(f"{models}/_log").json()[-1]["schema"] == schema  # the kind's shape, sent live
