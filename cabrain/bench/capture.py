"""``cabrain bench capture``: the wall time of ``cabrain capture`` per Claude Code hook event
(process start to exit, as Claude Code sees it) against the service on a scratch database."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

from cabrain import identity
from cabrain.bench.corpus import AGENT, NAMESPACE
from cabrain.bench.measure import local_service, machine_facts
from cabrain.bench.progress import say
from cabrain.eval import percentiles
from cabrain.faces.hooks import capture_command, compile_hook_modules
from cabrain.providers.embedders import load_embedder
from cabrain.scratch import scratch_brain
from cabrain.settings import Settings

CAPTURE_EVENTS: dict[str, Callable[[int], dict[str, Any]]] = {
    "UserPromptSubmit": lambda i: {"prompt": f"How do we rotate the staging credentials, case {i}?"},
    "PostToolUse": lambda i: {
        "tool_name": "Edit",
        "tool_input": {"file_path": f"/src/app/mod{i}.py", "old_string": "retries = 3", "new_string": f"retries = {i}"},
        "tool_response": {},
    },
    "SessionStart": lambda i: {"source": "startup"},
}


async def run_capture_bench(
    settings: Settings, *, events: int, app_args: dict[str, Any] | None = None, quiet: bool = False
) -> dict[str, Any]:
    """Wall time of ``cabrain capture`` per hook event (process start to exit, as Claude Code sees
    it) against the service on a scratch database, per event type."""
    command = capture_command()  # exactly what `cabrain hooks install` puts in Claude Code's settings
    compile_hook_modules()  # as `cabrain hooks install` does
    embedder = load_embedder(settings)
    async with scratch_brain(settings, embedder, prefix="cabrain_capturebench") as (brain, facts, dsn):
        await brain.create_agent(AGENT)
        async with brain.engine.pool.acquire() as conn:
            key = (await identity.create_key(conn, AGENT, label="bench")).key
        async with local_service(settings, dsn, app_args, quiet=quiet) as url:
            home = tempfile.mkdtemp(prefix="cabrain-capturebench-")
            try:
                env = {k: v for k, v in os.environ.items() if not k.startswith("CABRAIN_")}
                env.update(
                    CABRAIN_API_URL=url, CABRAIN_API_KEY=key, CABRAIN_HOME=home, CABRAIN_CAPTURE_NAMESPACE=NAMESPACE
                )
                times: dict[str, list[float]] = {name: [] for name in CAPTURE_EVENTS}
                for i in range(events):
                    for name, fields in CAPTURE_EVENTS.items():
                        event = {"session_id": f"bench-{i}", "cwd": home, "hook_event_name": name, **fields(i)}
                        t0 = time.perf_counter()
                        done = await asyncio.to_thread(
                            subprocess.run,
                            command,
                            shell=True,
                            input=json.dumps(event),
                            env=env,
                            capture_output=True,
                            text=True,
                            timeout=60,
                            check=False,
                        )
                        times[name].append((time.perf_counter() - t0) * 1000)
                        if done.returncode != 0:
                            raise RuntimeError(f"cabrain capture failed on {name}: {done.stderr.strip()}")
                    if not quiet and (i + 1) % 25 == 0:
                        say(f"  {i + 1}/{events} rounds", quiet)
            finally:  # the hooks' home, whatever happened
                shutil.rmtree(home, ignore_errors=True)
    every = [t for ts in times.values() for t in ts]
    return {
        "events_per_type": events,
        "per_type_ms": {name: percentiles(ts) for name, ts in times.items()},
        "all_ms": percentiles(every),
        "machine": machine_facts(facts),
    }


def render_capture(result: dict[str, Any]) -> str:
    lines = [
        f"cabrain capture wall time per hook event ({result['events_per_type']} of each), service up",
        f"{'event':<20} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}",
    ]
    for name, p in [*result["per_type_ms"].items(), ("all", result["all_ms"])]:
        lines.append(f"{name:<20} {p['p50']:8.1f} {p['p95']:8.1f} {p['p99']:8.1f}")
    return "\n".join(lines)
