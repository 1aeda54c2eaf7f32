"""`cabrain agents ...` directly on the hot tier: keys are shown once, stored hashed, revocable;
`cabrain db shell` hands its arguments to psql."""

from __future__ import annotations

import hashlib
import re

import asyncpg
import pytest

from tests.conftest import cli_env, run_cli, run_cli_process


async def test_agents_create_list_key_revoke_disable(db_dsn: str, home) -> None:
    env = cli_env(database_url=db_dsn, home=str(home))
    made = run_cli("agents", "create", "claude-code", "--label", "laptop", env=env)
    assert made.returncode == 0, made.stderr
    key = re.search(r"key   : (cbk_\S+)", made.stdout).group(1)
    key_id = re.search(r"key id: (\S+)", made.stdout).group(1)
    assert "not shown again" in made.stderr

    conn = await asyncpg.connect(db_dsn)
    try:
        row = await conn.fetchrow("SELECT key_hash, key_prefix FROM agent_keys WHERE id = $1::uuid", key_id)
        assert bytes(row["key_hash"]) == hashlib.sha256(key.encode()).digest()
        assert row["key_prefix"] == key[:12]
        stored = await conn.fetchval("SELECT count(*) FROM agent_keys WHERE key_hash::text LIKE $1", f"%{key}%")
        assert stored == 0
    finally:
        await conn.close()

    again = run_cli("agents", "create", "claude-code", env=env)
    assert again.returncode == 1 and "already exists" in again.stderr
    bad = run_cli("agents", "create", "no spaces", env=env)
    assert bad.returncode == 1 and "not valid" in bad.stderr

    second = run_cli("agents", "key", "claude-code", env=env)
    assert second.returncode == 0 and "cbk_" in second.stdout
    listed = run_cli("agents", "list", env=env)
    assert re.search(r"claude-code\s+no\s+member\s+2\s+active", listed.stdout), listed.stdout
    made_live = run_cli("agents", "role", "claude-code", "live", env=env)
    assert made_live.returncode == 0 and "role live" in made_live.stdout
    assert re.search(r"claude-code\s+no\s+live\s+2\s+active", run_cli("agents", "list", env=env).stdout)
    assert run_cli("agents", "role", "nobody", "live", env=env).returncode == 1
    keys = run_cli("agents", "keys", "claude-code", env=env)
    assert key_id in keys.stdout and key[:12] in keys.stdout and key not in keys.stdout

    revoked = run_cli("agents", "revoke", "claude-code", key_id, env=env)
    assert revoked.returncode == 0
    assert run_cli("agents", "revoke", "claude-code", key_id, env=env).returncode == 1
    assert (
        run_cli("agents", "revoke", "claude-code", "not-a-uuid", env=env).returncode == 2
    )  # not a key id: a usage error
    assert "revoked" in run_cli("agents", "keys", "claude-code", env=env).stdout

    disabled = run_cli("agents", "disable", "claude-code", env=env)
    assert disabled.returncode == 0
    assert re.search(r"claude-code\s+no\s+live\s+1\s+disabled", run_cli("agents", "list", env=env).stdout)
    assert run_cli("agents", "key", "claude-code", env=env).returncode == 1
    assert run_cli("agents", "disable", "nobody", env=env).returncode == 1


async def test_agents_on_a_database_that_was_never_migrated_say_so(empty_dsn: str, home) -> None:
    env = cli_env(database_url=empty_dsn, home=str(home))
    for args in (("agents", "list"), ("agents", "create", "claude"), ("agents", "disable", "admin")):
        result = run_cli(*args, env=env)
        assert result.returncode == 1, result.stderr
        assert "schema is not current" in result.stderr and "cabrain migrate" in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.subprocess
async def test_db_shell_passes_its_arguments_to_psql(db_dsn: str, home) -> None:
    env = cli_env(database_url=db_dsn, home=str(home))
    tables = run_cli_process("db", "shell", "-c", r"\dt", env=env)  # as the README shows it
    assert tables.returncode == 0, tables.stderr
    assert re.search(r"\|\s*memories\s*\|", tables.stdout), tables.stdout
    one = run_cli_process("db", "shell", "--", "-At", "-c", "select 40 + 2", env=env)
    assert one.returncode == 0, one.stderr
    assert one.stdout.strip() == "42"
    failed = run_cli_process("db", "shell", "-c", "select * from no_such_table", env=env)
    assert failed.returncode != 0 and "no_such_table" in failed.stderr
