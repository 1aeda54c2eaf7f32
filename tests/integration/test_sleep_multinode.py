"""The sleep cycle fans out over a real multi-node Ray cluster: steps run on an added node, and
the result is the same as on one node."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cabrain.brain import Brain
from cabrain.types import MemoryInput, MemoryType, Network, Visibility
from tests.conftest import REPO, _create_database, _drop_database, make_scratch_dir
from tests.integration.test_sleep import SESSIONS

NAMESPACES = ["ops", "web", "data", "infra"]


@pytest.fixture
async def twin_databases(pg_server, template_db, settings_for, embedder):
    """Two databases with the same memories (the second is a copy of the first)."""
    first = await _create_database(pg_server, template_db)
    now = datetime.now(UTC)
    brain = await Brain.open(settings_for(pg_server.dsn(first)), dsn=pg_server.dsn(first), embedder=embedder)
    try:
        await brain.create_agent("alice")
        for ns in NAMESPACES:
            await brain.create_namespace("alice", ns)
            for n, session in enumerate(SESSIONS):  # sessions over three months, long ago
                items = [
                    MemoryInput(
                        f"{text} ({ns})",
                        ns,
                        visibility=Visibility.TEAM,
                        source_kind="chat",
                        valid_at=now - timedelta(days=40 + 30 * (n % 3), hours=n),
                    )
                    for text in session
                ]
                await brain.retain("alice", items, decide=False)
            for days, limit in ((3, 100), (1, 250)):  # a fact, then the fact that contradicts it
                await brain.retain(
                    "alice",
                    [
                        MemoryInput(
                            f"The {ns} API rate limit is {limit} requests per minute.",
                            ns,
                            network=Network.FACT,
                            memory_type=MemoryType.SEMANTIC,
                            valid_at=now - timedelta(days=days),
                        )
                    ],
                    decide=False,
                )
    finally:
        await brain.close()
    conn = await asyncpg.connect(pg_server.dsn(first))
    try:
        await conn.execute(
            "UPDATE memories SET created_at = created_at - interval '120 days' WHERE valid_at < now() - interval '30 days'"
        )
    finally:
        await conn.close()
    second = await _create_database(pg_server, first)
    yield pg_server.dsn(first), pg_server.dsn(second)
    await _drop_database(pg_server, first)
    await _drop_database(pg_server, second)


def _same_hot(one: list, two: list) -> bool:
    """Hot rows agree, importance up to the decay of the seconds between the two runs."""
    return len(one) == len(two) and all(
        a[:4] == b[:4] and abs(float(a[4]) - float(b[4])) < 1e-3 for a, b in zip(one, two, strict=True)
    )


@pytest.mark.ray
def test_steps_run_on_an_added_node_with_the_same_result(twin_databases) -> None:
    dsn_one, dsn_two = twin_databases
    home = make_scratch_dir("cabrain-sleep-multinode-")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration.scripts.sleep_multinode", dsn_one, dsn_two, str(home)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    seen = json.loads(lines[-1].removeprefix("RESULT "))
    one, two = seen["one"], seen["two"]
    assert one["nodes"] == [seen["head"]]  # one node: everything ran on the head
    assert seen["worker"] in two["nodes"]  # the added node took steps
    assert one["tasks"] == two["tasks"] > len(NAMESPACES) * 5
    # the work was real...
    assert one["steps"]["consolidate"]["facts_created"] >= len(NAMESPACES)
    assert one["steps"]["demote"]["demoted"] >= len(NAMESPACES) * 5
    assert one["steps"]["reconsolidate"]["superseded"] == len(NAMESPACES)
    # ...and did not depend on where it ran
    assert one["steps"]["consolidate"] == two["steps"]["consolidate"]
    assert one["steps"]["demote"] == two["steps"]["demote"]
    assert one["steps"]["reconsolidate"] == two["steps"]["reconsolidate"]
    for part in ("facts", "cold", "entities"):
        assert one["summary"][part] == two["summary"][part], part
    assert _same_hot(one["summary"]["hot"], two["summary"]["hot"])
