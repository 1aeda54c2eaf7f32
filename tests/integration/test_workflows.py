"""Workflow learning end to end, against a scripted model server on loopback (tests/fakes/llm_server.py)
playing the frontier model, a local model that is good at one kind of task and bad at another,
and a judge."""

import json
import random

import httpx
import pytest

from cabrain.errors import AccessDenied, InputError, NotFound
from cabrain.workflows import chains, clusters
from cabrain.workflows.facade import TaskRequest, Workflows

FRONTIER_PRICE = (0.015, 0.075)
LOCAL_PRICE = (0.0001, 0.0002)


@pytest.fixture
async def models(llm_server):
    httpx.post(f"{llm_server}/_reset")
    return llm_server


def invoice(rng: random.Random) -> str:
    company = rng.choice(["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Wonka"])
    currency = rng.choice(["USD", "EUR", "GBP"])
    return (
        f"Extract the invoice number, total and currency as JSON: invoice {rng.randint(1000, 9999)} from "
        f"{company} totals {rng.randint(10, 5000)}.{rng.randint(10, 99)} {currency}."
    )


def risk(rng: random.Random) -> str:
    project = rng.choice(["Falcon", "Heron", "Osprey", "Kestrel", "Condor", "Merlin"])
    return (
        f"Write a risk note for project {project}: budget {rng.randint(50, 900) * 1000}, "
        f"{rng.randint(3, 60)} days of slack, one sentence."
    )


def flows(brain) -> Workflows:
    """The workflows facade over a test's Brain's engine."""
    return Workflows(brain.engine)


async def setup_brain(open_brain, server: str, **overrides):
    brain = await open_brain(workflow_judge="judge", **overrides)
    await brain.create_agent("alice")
    await brain.create_agent("bob")
    await brain.create_namespace("alice", "ops")
    for name, layer, model, price in (
        ("claude", "frontier", "frontier-large", FRONTIER_PRICE),
        ("qwen", "local", "local-good", LOCAL_PRICE),
        ("judge", "local", "judge-1", (0, 0)),
    ):
        await flows(brain).add_model(
            {
                "name": name,
                "layer": layer,
                "provider": "openai",
                "model": model,
                "endpoint": f"{server}/v1",
                "cost_in_per_1k": price[0],
                "cost_out_per_1k": price[1],
            }
        )
    return brain


async def dispatch(brain, text: str, task_type: str, **flags):
    return await flows(brain).dispatch("alice", TaskRequest("ops", text, task_type=task_type, **flags))


async def learn(brain, dsn: str):
    """The learning iterations, inline, with the brain's current settings."""
    return await Workflows.learn(brain.settings, dsn, use_ray=False)


def tighten(brain, **settings) -> None:
    """Change the settings the brain's engine runs with (the next dispatch sees them)."""
    brain.engine.settings = brain.settings.model_copy(update=settings)


async def test_the_loop_learns_to_route_one_kind_locally_and_keeps_the_other_on_the_frontier(
    open_brain, models, db_dsn
):
    brain = await setup_brain(open_brain, models)
    rng = random.Random(3)
    first = [await dispatch(brain, invoice(rng), "json") for _ in range(20)]
    first += [await dispatch(brain, risk(rng), "text") for _ in range(6)]
    assert {r.route for r in first} == {"frontier"}
    assert "no local chain learned" in first[0].reason
    assert json.loads(first[0].output)["currency"] in ("USD", "EUR", "GBP")
    invoice_cluster, risk_cluster = first[0].cluster["id"], first[-1].cluster["id"]
    assert {r.cluster["id"] for r in first[:20]} == {invoice_cluster}  # one kind, by embedding
    assert {r.cluster["id"] for r in first[20:]} == {risk_cluster} != {invoice_cluster}

    report = await learn(brain, db_dsn)
    assert report["runs"] == 26 and report["failed"] == 0
    async with brain.engine.pool.acquire() as conn:
        good = await clusters.get(conn, invoice_cluster)
        bad = await clusters.get(conn, risk_cluster)
        attempts = await conn.fetch("SELECT chain_kind, chain_key, score, complete FROM chain_attempts")
    assert good.best_chain["key"] == "single:qwen" and good.samples == 20 and good.avg_accuracy > 0.95
    assert good.trusted(0.95, 0.90)
    assert not bad.trusted(0.95, 0.90) and (bad.avg_accuracy or 0) < 0.5
    # The bad kind went through every chain, simplest first; the judge is never one of them.
    # (but the one held to a JSON or label shape: a note has none)
    assert {a["chain_kind"] for a in attempts if a["score"] < 0.5} == set(chains.KINDS) - {"constrained"}
    assert not any("judge" in a["chain_key"] for a in attempts) and all(a["complete"] for a in attempts)

    later = [await dispatch(brain, invoice(rng), "json") for _ in range(5)]
    later += [await dispatch(brain, risk(rng), "text") for _ in range(3)]
    assert [r.route for r in later] == ["local"] * 5 + ["frontier"] * 3
    assert later[0].chain["key"] == "single:qwen" and json.loads(later[0].output)["total"] > 0
    assert "not trusted locally yet" in later[-1].reason

    data = await flows(brain).report()
    async with brain.engine.pool.acquire() as conn:
        # Savings from the recorded costs alone: each local task avoided its kind's mean frontier
        # cost and paid for its local calls.
        mean_frontier = await conn.fetchval(
            "SELECT avg(r.cost_usd)::float8 FROM frontier_runs r JOIN workflow_tasks t ON t.id = r.task_id "
            "WHERE t.cluster_id = $1",
            invoice_cluster,
        )
        local_paid = await conn.fetchval("SELECT sum(cost_usd)::float8 FROM llm_calls WHERE purpose = 'local'")
        frontier_paid = await conn.fetchval("SELECT sum(cost_usd)::float8 FROM llm_calls WHERE purpose = 'frontier'")
        calls = await conn.fetchval("SELECT count(*) FROM llm_calls WHERE cost_usd IS NULL OR tokens_in IS NULL")
    assert calls == 0  # every call priced from its tokens
    assert data["tasks"] == {
        "done": 34,
        "frontier": 29,
        "local": 5,
        "fallback": 0,
        "failed": 0,
        "local_share": round(5 / 34, 4),
    }
    assert data["cost_usd"]["saved"] == pytest.approx(5 * mean_frontier - local_paid, rel=1e-6)
    assert data["cost_usd"]["frontier"] == pytest.approx(frontier_paid, rel=1e-6)
    assert data["cost_usd"]["saved"] > 0 and data["cost_usd"]["learning"] > 0
    assert data["agents"]["alice"]["local"] == 5
    assert data["models"]["qwen"]["calls"] > 0 and data["models"]["claude"]["layer"] == "frontier"
    assert data["accuracy_by_day"][0]["attempts"] == len(attempts)
    assert data["routed_by_day"][0] == {
        "day": data["routed_by_day"][0]["day"],
        "local": 5,
        "fallback": 0,
        "pass_rate": 1.0,
    }


async def learned_brain(open_brain, server: str, dsn: str, samples: int = 2, **overrides):
    """Invoice tasks learned from ``samples`` references, with thresholds low enough to trust them."""
    settings = {"workflow_route_confidence": 0.5, **overrides}
    brain = await setup_brain(open_brain, server, **settings)
    rng = random.Random(11)
    for _ in range(samples):
        await dispatch(brain, invoice(rng), "json")
    await learn(brain, dsn)
    return brain, rng


async def test_a_local_output_failing_validation_is_redone_by_the_frontier_model_and_costs_confidence(
    open_brain, models, db_dsn
):
    brain, rng = await learned_brain(open_brain, models, db_dsn)
    assert (await dispatch(brain, invoice(rng), "json")).route == "local"
    httpx.post(f"{models}/_mode", json={"model": "local-good", "mode": "broken"})
    result = await dispatch(brain, invoice(rng), "json")
    assert result.route == "fallback" and "not JSON" in result.local_error
    assert json.loads(result.output)["invoice"] > 0  # the frontier model's answer
    assert result.agents == ["qwen", "claude"]
    async with brain.engine.pool.acquire() as conn:
        cluster = await clusters.get(conn, result.cluster["id"])
    assert cluster.failures == 1 and cluster.confidence < 0.5  # 2 / (2 + 1 + 3 * 1)
    assert (await dispatch(brain, invoice(rng), "json")).route == "frontier"  # no longer trusted


async def test_thresholds_decide_what_is_trusted(open_brain, models, db_dsn):
    brain, rng = await learned_brain(open_brain, models, db_dsn, samples=3)  # confidence 3 / (3 + 1) = 0.75
    assert (await dispatch(brain, invoice(rng), "json")).route == "local"
    for stricter, why in (
        ({"workflow_route_confidence": 0.8}, "of 0.8"),  # its confidence
        ({"workflow_route_accuracy": 0.99}, "accuracy 0.9"),
        ({"workflow_max_local_ms": 0.001}, "ms over 0"),  # the chain's latency
    ):
        tighten(brain, **{"workflow_route_confidence": 0.5, "workflow_route_accuracy": 0.9, **stricter})
        done = await dispatch(brain, invoice(rng), "json")
        assert done.route == "frontier" and why in done.reason and "single:qwen" in done.reason


async def test_destructive_and_review_flagged_tasks_always_go_to_the_frontier_model(open_brain, models, db_dsn):
    brain, rng = await learned_brain(open_brain, models, db_dsn)
    assert (await dispatch(brain, invoice(rng), "json")).route == "local"
    destructive = await dispatch(brain, invoice(rng), "json", destructive=True)
    review = await dispatch(brain, invoice(rng), "json", needs_review=True)
    assert destructive.route == review.route == "frontier"
    assert "destructive" in destructive.reason and "review" in review.reason


async def test_a_task_needs_write_access_to_its_namespace_and_a_sound_request(open_brain, models):
    brain = await setup_brain(open_brain, models)
    with pytest.raises(AccessDenied):
        await flows(brain).dispatch("bob", TaskRequest("ops", "Extract anything", task_type="json"))
    for bad, words in (
        (TaskRequest("ops", "  "), "empty"),
        (TaskRequest("ops", "x", task_type="yaml"), "task_type"),
        (TaskRequest("ops", "x\x00y"), "NUL"),
    ):
        with pytest.raises(InputError, match=words):
            await flows(brain).dispatch("alice", bad)
    async with brain.engine.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM workflow_tasks") == 0
        assert await conn.fetchval("SELECT count(*) FROM llm_calls") == 0


async def test_the_facade_checks_who_may_do_what(open_brain, models):
    brain = await setup_brain(open_brain, models)
    wf = flows(brain)
    task = {"namespace": "ops", "description": "Extract the total as JSON: 5 USD.", "task_type": "json"}
    # Dispatching and queueing need write access to the namespace: refused as retaining is.
    for call in (wf.dispatch, wf.enqueue):
        with pytest.raises(AccessDenied, match="agent 'bob' may not write to namespace 'ops'") as info:
            await call("bob", task)
        assert info.value.fix.action == "request_write"
    await brain.share("alice", "ops", "bob", can_write=True)  # offered, not accepted yet
    with pytest.raises(AccessDenied, match=r"offered write access .* but has not accepted it"):
        await wf.dispatch("bob", task)
    with pytest.raises(AccessDenied, match="'mallory' is unknown or disabled"):
        await wf.enqueue("mallory", task)
    with pytest.raises(InputError, match="unknown task field"):
        await wf.dispatch("alice", {**task, "colour": "red"})
    # A queued task is read by its namespace's readers only; for others it does not exist.
    item = await wf.enqueue("alice", task, priority=2)
    await brain.decline_grant("bob", "ops")
    with pytest.raises(NotFound):
        await wf.queued("bob", item["id"])
    assert (await wf.queued("alice", item["id"]))["priority"] == 2
    # The registry is read by anyone and changed by the operator or an admin.
    with pytest.raises(AccessDenied, match="'alice' is not an admin"):
        await wf.update_model("qwen", {"active": False}, agent="alice")
    await brain.create_agent("root", is_admin=True)
    assert not (await wf.update_model("qwen", {"active": False}, agent="root")).active
    assert [m.name for m in await wf.list_models(active_only=True)] == ["claude", "judge"]
    # The report covers what an agent may read; an admin's and the operator's cover everything.
    assert (await wf.report("bob"))["namespaces"] == []
    assert (await wf.report("alice", namespaces=["ops", "elsewhere"]))["namespaces"] == ["ops"]
    assert (await wf.report("root"))["namespaces"] is None and (await wf.report())["namespaces"] is None
    assert await wf.queue_counts("ops") == {"pending": 1, "picked": 0, "done": 0, "failed": 0}
    async with brain.engine.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM workflow_tasks") == 0


@pytest.mark.ray
async def test_learning_runs_as_ray_tasks_from_the_command_line(open_brain, models, db_dsn, home, ray_cluster):
    import asyncio

    from tests.conftest import cli_env, run_cli, run_main

    brain = await setup_brain(open_brain, models)
    rng = random.Random(21)
    for _ in range(2):
        await dispatch(brain, invoice(rng), "json")
    await dispatch(brain, risk(rng), "text")
    env = cli_env(
        database_url=db_dsn,
        home=str(home),
        workflow_judge="judge",
    )
    done = await asyncio.to_thread(run_cli, "workflows", "learn", "--json", env=env)  # on the session's Ray
    assert done.returncode == 0, done.stderr[-3000:]
    assert "learning from 3 reference run(s) on Ray" in done.stdout
    report = json.loads(done.stdout[done.stdout.index("\n{") + 1 :])
    assert report["runs"] == 3 and report["learned"] == 3 and report["failed"] == 0
    by_kind = sorted(len(o["attempts"]) for o in report["outcomes"])
    assert by_kind == [1, 1, 6]  # invoices: the first chain passes; the risk note: every chain, none passes
    # a chain held to the kind's shape, for invoices (JSON, with another reference to shape it), not for notes
    assert sorted(o["budget"]["chains"] for o in report["outcomes"]) == [6, 7, 7]
    assert all(o["budget"]["allowed"] == 12 and o["budget"]["models"] == 1 for o in report["outcomes"])
    # The Ray job entrypoint (what `ray job submit -- python -m jobs.workflow_learn` runs) is the same command.
    from cabrain.jobs import workflow_learn

    again = await asyncio.to_thread(run_main, workflow_learn.main, "--inline", "--json", "--quiet", env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["runs"] == 0  # nothing new to learn from
    bad = await asyncio.to_thread(run_cli, "workflows", "learn", "--limit", "0", env=env)
    assert bad.returncode == 2 and "--limit" in bad.stderr
    # On a schedule: a run every --every seconds until stopped (here after two).
    kept = await asyncio.to_thread(
        run_cli, "workflows", "learn", "--inline", "--every", "0.2", "--max-runs", "2", env=env
    )
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert "learning every 0.2 s" in kept.stdout and kept.stdout.count("0 run(s): 0 learned") == 2
    loose = await asyncio.to_thread(run_cli, "workflows", "learn", "--max-runs", "2", env=env)
    assert loose.returncode == 2 and "goes with --every" in loose.stderr


async def test_a_newer_answer_to_the_same_task_supersedes_the_old_reference_and_its_examples(
    open_brain, models, db_dsn
):
    brain = await setup_brain(open_brain, models, workflow_route_confidence=0.6)  # 2 samples: 0.67
    rng = random.Random(31)
    texts = [invoice(rng) for _ in range(2)]
    for text in texts:
        await dispatch(brain, text, "json")
    await learn(brain, db_dsn)
    async with brain.engine.pool.acquire() as conn:
        [cluster_id] = {r["cluster_id"] for r in await conn.fetch("SELECT cluster_id FROM workflow_tasks")}
        before = await clusters.get(conn, cluster_id)
        old_memory = await conn.fetchval(
            "SELECT r.memory_id FROM frontier_runs r JOIN workflow_tasks t ON t.id = r.task_id "
            "WHERE t.description = $1",
            texts[0],
        )
    assert before.samples == 2 and old_memory is not None
    again = await dispatch(brain, texts[0], "json", needs_review=True)  # the same task, answered anew
    assert again.route == "frontier"
    async with brain.engine.pool.acquire() as conn:
        refs = await conn.fetch(
            "SELECT r.superseded_at IS NOT NULL AS old, r.learned_at IS NOT NULL AS learned "
            "FROM frontier_runs r JOIN workflow_tasks t ON t.id = r.task_id WHERE t.description = $1 "
            "ORDER BY r.created_at",
            texts[0],
        )
        stale = await conn.fetchval("SELECT count(*) FROM chain_attempts WHERE superseded_at IS NOT NULL")
        after = await clusters.get(conn, cluster_id)
    assert [(r["old"], r["learned"]) for r in refs] == [(True, True), (False, False)]
    assert stale == 1 and after.samples == 1 and after.confidence < before.confidence
    forgotten = await brain.get("alice", old_memory)
    assert forgotten.memory.invalid_at is not None  # the old answer no longer recalled as an example


async def test_the_command_line_manages_models_dispatches_and_reports(open_brain, models, db_dsn, home):
    import asyncio

    from tests.conftest import cli_env, run_cli

    brain = await open_brain()
    await brain.create_agent("alice")
    await brain.create_namespace("alice", "ops")
    env = cli_env(database_url=db_dsn, home=str(home))

    def cli(*args: str):
        return asyncio.to_thread(run_cli, "workflows", *args, env=env)

    added = await cli(
        "agents",
        "add",
        "claude",
        "--layer",
        "frontier",
        "--provider",
        "openai",
        "--model",
        "frontier-c",
        "--endpoint",
        f"{models}/v1",
        "--cost-in",
        "0.01",
        "--cost-out",
        "0.02",
        "--capabilities",
        "json,code",
    )
    assert added.returncode == 0, added.stderr
    bad = await cli(
        "agents", "add", "x", "--layer", "frontier", "--provider", "openai", "--model", "m", "--endpoint", "ftp://x"
    )
    assert bad.returncode == 1 and "http(s) URL" in bad.stderr
    listed = await cli("agents", "list", "--json")
    [agent] = json.loads(listed.stdout)
    assert agent["capabilities"] == ["json", "code"] and agent["cost_in_per_1k"] == 0.01 and agent["active"]
    nothing = await cli("agents", "set", "claude")
    assert nothing.returncode == 2 and "nothing to change" in nothing.stderr

    done = await cli(
        "dispatch",
        "--agent",
        "alice",
        "-n",
        "ops",
        "--type",
        "json",
        "--json",
        "Extract the invoice number, total and currency as JSON: invoice 77 from Acme totals 5.50 USD.",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["route"] == "frontier" and json.loads(result["output"])["invoice"] == 77
    denied = await cli("dispatch", "--agent", "mallory", "-n", "ops", "anything")
    assert denied.returncode == 1 and "unknown or disabled" in denied.stderr

    queued = await cli("enqueue", "--agent", "alice", "-n", "ops", "--priority", "3", "--json", "Say done.")
    qid = json.loads(queued.stdout)["id"]
    shown = await cli("queue", qid, "--agent", "alice", "--json")
    assert json.loads(shown.stdout)["status"] == "pending"
    counts = await cli("queue", "--json")
    assert json.loads(counts.stdout) == {"pending": 1, "picked": 0, "done": 0, "failed": 0}

    off = await cli("agents", "set", "claude", "--active", "false")
    assert off.returncode == 0
    refused = await cli("dispatch", "--agent", "alice", "-n", "ops", "Say done.")
    assert refused.returncode == 2 and "no active frontier model" in refused.stderr  # a configuration problem

    report = await cli("report")
    assert report.returncode == 0 and "tasks done 1: frontier 1" in report.stdout and "per model" in report.stdout
