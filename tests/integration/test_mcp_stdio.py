"""`cabrain mcp` over stdio, straight on the database, driven by the MCP SDK's client."""

from __future__ import annotations

import subprocess
import sys

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


async def test_every_tool_over_stdio_on_the_database(db_dsn: str, home) -> None:
    keys = await _keys(db_dsn)
    env = cli_env(database_url=db_dsn, home=str(home))
    async with stdio_session({**env, "CABRAIN_API_KEY": keys["alice"]}) as alice, stdio_session(
        {**env, "CABRAIN_API_KEY": keys["bob"]}
    ) as bob:
        await exercise_every_tool(alice, bob, "proj")


def test_mcp_without_a_key_or_with_a_bad_one_exits_with_a_clear_error(db_dsn: str, home) -> None:
    env = cli_env(database_url=db_dsn, home=str(home))
    run = lambda e: subprocess.run([sys.executable, "-m", "cabrain.cli", "mcp"], env=e, cwd=REPO,
                                   capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    missing = run(env)
    assert missing.returncode == 2 and "CABRAIN_API_KEY" in missing.stderr
    wrong = run({**env, "CABRAIN_API_KEY": "cbk_" + "x" * 43})
    assert wrong.returncode == 1 and "unknown or revoked" in wrong.stderr
