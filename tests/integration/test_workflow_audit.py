"""The live accuracy of trusted local chains (cabrain/workflows/audit.py), end to end against the
scripted model server on loopback: locally answered tasks audited against the frontier model in the
learning pass, a chain whose live answers drift demoted as a judgment, and that judgment reverted."""

import json
import uuid

import httpx
import pytest

from cabrain.errors import ConflictError, NotFound
from cabrain.workflows import clusters
from cabrain.workflows.facade import Workflows
from tests.integration.test_workflows import dispatch, flows, invoice, learn, learned_brain, tighten


@pytest.fixture
async def models(llm_server):
    httpx.post(f"{llm_server}/_reset")
    return llm_server


AUDITED = {"workflow_audit_rate": 1.0, "workflow_audit_min": 2, "workflow_audit_window": 4}


async def cluster_of(brain, cluster_id: int) -> clusters.Cluster:
    async with brain.engine.pool.acquire() as conn:
        return await clusters.get(conn, cluster_id)


async def test_a_chain_whose_live_answers_drift_is_demoted_and_a_writer_may_revert_that(open_brain, models, db_dsn):
    brain, rng = await learned_brain(open_brain, models, db_dsn, **AUDITED)
    good = [await dispatch(brain, invoice(rng), "json") for _ in range(2)]
    assert [r.route for r in good] == ["local", "local"]
    cluster_id = good[0].cluster["id"]

    # Good live answers: audited (the frontier answers each again, offline), scored high, nothing demoted.
    report = await learn(brain, db_dsn)
    audits = report["audits"]
    assert [o["reason"] for o in audits["outcomes"] if o["status"] == "failed"] == []
    assert (audits["tasks"], audits["audited"], audits["demoted"]) == (2, 2, [])
    assert all(o["score"] > 0.9 and o["complete"] for o in audits["outcomes"])
    assert audits["outcomes"][-1]["live"]["n"] == 2
    async with brain.engine.pool.acquire() as conn:
        calls = await conn.fetchval("SELECT count(*) FROM llm_calls WHERE purpose = 'audit'")
        live = await conn.fetch("SELECT chain_key, frontier_run_id FROM workflow_audits ORDER BY created_at")
        references = await conn.fetchval(
            "SELECT count(*) FROM frontier_runs WHERE id = ANY($1::uuid[])", [r["frontier_run_id"] for r in live]
        )
        # each live score is an attempt of the chain, against the audit's reference
        attempts = await conn.fetchval(
            "SELECT count(*) FROM chain_attempts WHERE frontier_run_id = ANY($1::uuid[]) AND chain_key = 'single:qwen'",
            [r["frontier_run_id"] for r in live],
        )
    assert calls == 2 and references == 2 and attempts == 2
    assert {r["chain_key"] for r in live} == {"single:qwen"}
    assert (await learn(brain, db_dsn))["audits"]["tasks"] == 0  # a task is audited once

    # The local model drifts: its answers stay well-formed (no fallback), and are wrong.
    httpx.post(f"{models}/_mode", json={"model": "local-good", "mode": "drift"})
    drifted = [await dispatch(brain, invoice(rng), "json") for _ in range(2)]
    assert [r.route for r in drifted] == ["local", "local"]
    report = await learn(brain, db_dsn)
    audits = report["audits"]
    assert audits["audited"] == 2 and all(o["score"] < 0.5 for o in audits["outcomes"])
    [demotion] = audits["demoted"]
    assert demotion["chain"] == "single:qwen"
    cluster = await cluster_of(brain, cluster_id)
    # Left out of the cluster's choice; learning tried the other chains on the audits' references.
    assert cluster.demoted == ("single:qwen",) and cluster.best_chain["key"] != "single:qwen"
    assert not cluster.trusted(0.5, 0.9)
    after = await dispatch(brain, invoice(rng), "json")
    assert after.route == "frontier" and "demoted on live accuracy: single:qwen" in after.reason

    # The demotion is a judgment, with the live scores that led to it.
    async with brain.engine.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT * FROM judgments WHERE id = $1", uuid.UUID(demotion["judgment"]))
    assert (row["kind"], row["origin"], row["decided_by"], row["namespace"]) == (
        "workflow_demote",
        "workflow_audit",
        "sleep",
        "ops",
    )
    inputs = json.loads(row["inputs"])
    assert inputs["live"]["n"] >= 2 and inputs["live"]["mean"] < 0.9
    assert inputs["before"]["best_chain"]["key"] == "single:qwen" and inputs["before"]["demoted"] == []
    assert inputs["after"]["demoted"] == ["single:qwen"]

    # Only a writer of the namespace may revert it; reverting puts the chain back in the choice, where
    # its scores (the live ones among them) decide: its accuracy is below the threshold now.
    with pytest.raises(NotFound):
        await brain.revert("bob", judgment_id=demotion["judgment"], reason="keep it")
    undo = await brain.revert("alice", judgment_id=demotion["judgment"], reason="the drift was a bad batch")
    assert undo["kind"] == "revert" and undo["inputs"]["workflow"]["op"] == "restore"
    restored = await cluster_of(brain, cluster_id)
    assert restored.demoted == () and restored.best_chain["key"] == "single:qwen"
    assert restored.avg_accuracy < 0.9
    with pytest.raises(ConflictError):
        await brain.revert("alice", judgment_id=demotion["judgment"])  # reverted already

    # A revert starts a fresh window: the drifted scores before it do not demote the chain again.
    httpx.post(f"{models}/_mode", json={"model": "local-good", "mode": "ok"})
    tighten(brain, workflow_route_accuracy=0.5)  # the dispatcher's threshold; learning keeps 0.9
    assert (await dispatch(brain, invoice(rng), "json")).route == "local"
    report = await learn(brain, db_dsn)
    assert report["audits"]["audited"] == 1 and report["audits"]["demoted"] == []
    assert report["audits"]["outcomes"][0]["live"]["n"] == 1
    assert (await cluster_of(brain, cluster_id)).demoted == ()

    # The revert is revertible too: demoted again.
    again = await brain.revert("alice", judgment_id=undo["id"], reason="it was right")
    assert again["inputs"]["workflow"]["op"] == "demote"
    assert (await cluster_of(brain, cluster_id)).demoted == ("single:qwen",)

    data = await flows(brain).report()
    [kind] = [k for k in data["kinds"] if k["id"] == cluster_id]
    assert kind["demoted"] == ["single:qwen"] and kind["live"]["audited"] >= 5
    assert kind["demotions"] == {"single:qwen": again["id"]}  # the judgment in force, to undo
    assert not kind["trusted"] and "not trusted" in kind["why_frontier"]
    assert data["cost_usd"]["audits"] > 0
    text = Workflows.render_report(data)
    assert f"demoted single:qwen (undo: cabrain revert --judgment {again['id']})" in text
    assert "live: " in text and "audits " in text


async def test_no_audits_at_rate_zero_and_about_the_rate_otherwise(open_brain, models, db_dsn):
    brain, rng = await learned_brain(open_brain, models, db_dsn, workflow_audit_rate=0.0)
    for _ in range(3):
        assert (await dispatch(brain, invoice(rng), "json")).route == "local"
    assert (await learn(brain, db_dsn))["audits"]["tasks"] == 0
    # Sampled by the task's id: at half the rate, about half of many tasks (and the same ones each time).
    async with brain.engine.pool.acquire() as conn:
        picked = await conn.fetchval(
            "SELECT count(*) FROM generate_series(1, 4000) g "
            "WHERE (hashtext(md5(g::text)::uuid::text)::bigint + 2147483648) % 1000000 < $1",
            500_000,
        )
    assert 1700 < picked < 2300
