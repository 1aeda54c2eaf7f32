"""`cabrain mcp` over stdio, straight on the database, driven by the MCP SDK's client."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cabrain import identity
from cabrain.store.db import connect
from tests.conftest import REPO, cli_env
from tests.mcp_helpers import exercise_every_tool, stdio_session


async def _keys(dsn: str) -> dict[str, str]:
    conn = await connect(dsn)
    try:
        keys = {}
        for agent in ("alice", "bob"):
            await identity.create_agent(conn, agent)
            keys[agent] = (await identity.create_key(conn, agent)).key
        await conn.execute("INSERT INTO namespaces (name, owner_agent_id) VALUES ('proj', 'alice')")
        return keys
    finally:
        await conn.close()


@pytest.mark.subprocess
async def test_every_tool_over_stdio_on_the_database(db_dsn: str, home) -> None:
    keys = await _keys(db_dsn)
    env = cli_env(database_url=db_dsn, home=str(home))
    async with (
        stdio_session({**env, "CABRAIN_API_KEY": keys["alice"]}) as alice,
        stdio_session({**env, "CABRAIN_API_KEY": keys["bob"]}) as bob,
    ):
        await exercise_every_tool(alice, bob, "proj")


@pytest.mark.subprocess
def test_mcp_without_a_key_or_with_a_bad_one_exits_with_a_clear_error(db_dsn: str, home) -> None:
    env = cli_env(database_url=db_dsn, home=str(home))

    def run(e):
        return subprocess.run(
            [sys.executable, "-m", "cabrain.cli", "mcp"],
            env=e,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    missing = run(env)
    assert missing.returncode == 2 and "CABRAIN_API_KEY" in missing.stderr
    wrong = run({**env, "CABRAIN_API_KEY": "cbk_" + "x" * 43})
    assert wrong.returncode == 1 and "unknown or revoked" in wrong.stderr


async def test_a_task_handed_to_a_model_over_stdio(db_dsn: str, home, llm_server) -> None:
    from cabrain.workflows import registry
    from tests.mcp_helpers import call, call_error

    keys = await _keys(db_dsn)
    conn = await connect(db_dsn)
    try:
        await registry.add(
            conn,
            name="claude",
            layer="frontier",
            provider="openai",
            model="frontier-m",
            endpoint=f"{llm_server}/v1",
            cost_in_per_1k=0.01,
            cost_out_per_1k=0.02,
        )
    finally:
        await conn.close()
    env = cli_env(database_url=db_dsn, home=str(home))
    async with (
        stdio_session({**env, "CABRAIN_API_KEY": keys["alice"]}) as alice,
        stdio_session({**env, "CABRAIN_API_KEY": keys["bob"]}) as bob,
    ):
        task = "Extract the invoice number, total and currency as JSON: invoice 31 from Acme totals 9.90 GBP."
        done = await call(alice, "workflow_dispatch", description=task, namespace="proj", task_type="json")
        assert done["route"] == "frontier" and done["agents"] == ["claude"] and '"invoice": 31' in done["output"]
        assert done["cost_usd"] > 0 and "no local chain learned" in done["reason"]
        assert "may not write" in await call_error(bob, "workflow_dispatch", description=task, namespace="proj")
        await call_error(alice, "workflow_dispatch", description=task, namespace="proj", task_type="yaml")


@pytest.mark.subprocess
async def test_a_sleep_run_is_reverted_and_redone_over_stdio(brain, db_dsn: str, home, settings_for) -> None:
    """memory_revert with run_id undoes a whole sleep run (its merge here); its revert redoes it."""
    from cabrain.sleep.cycle import run_cycle
    from cabrain.types import MemoryInput, Network, Visibility
    from tests.mcp_helpers import call, call_error

    wordings = (
        "The staging database runs PostgreSQL 16 on host db-stg-1.",
        "The staging database runs PostgreSQL 16 on the host db-stg-1.",
    )
    stored = [
        (
            await brain.retain(
                "alice", [MemoryInput(t, "proj", network=Network.FACT, visibility=Visibility.TEAM)], decide=False
            )
        )[0]
        for t in wordings
    ]
    report = await run_cycle(settings_for(db_dsn), db_dsn, namespaces=["proj"], steps=["dedup"], use_ray=False)
    assert report.steps["dedup"]["merged"] == 1
    keys = {a: (await brain.create_key(a)).key for a in ("alice", "bob")}
    env = cli_env(database_url=db_dsn, home=str(home))
    async with (
        stdio_session({**env, "CABRAIN_API_KEY": keys["alice"]}) as alice,
        stdio_session({**env, "CABRAIN_API_KEY": keys["bob"]}) as bob,
    ):
        assert "does not exist or is not visible" in await call_error(bob, "memory_revert", run_id=str(report.run_id))
        assert "give one of" in await call_error(alice, "memory_revert", run_id=str(report.run_id), memory_id="x")
        [undo] = (await call(alice, "memory_revert", run_id=str(report.run_id), reason="two hosts"))["reverts"]
        assert undo["inputs"]["run"] == str(report.run_id) and undo["inputs"]["kinds"] == ["merge"]
        both = [(await call(alice, "memory_get", memory_id=str(s.memory_id)))["memory"] for s in stored]
        assert all(m["invalid_at"] is None for m in both)  # the merge is undone
        assert "nothing to revert" in await call_error(alice, "memory_revert", run_id=str(report.run_id))
        redo = await call(alice, "memory_revert", judgment_id=undo["id"])
        assert redo["reverts"] == undo["id"]
        later = (await call(alice, "memory_get", memory_id=str(stored[1].memory_id)))["memory"]
        assert later["superseded_by"] == str(stored[0].memory_id)  # merged again
