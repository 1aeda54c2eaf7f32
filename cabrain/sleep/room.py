"""How much of the cluster a sleep step asks for, so a cycle runs wherever the service runs.

The Serve replicas hold their CPUs for as long as the service runs (on a 2-core machine the default
ingress and embedder hold 1.5 of 2). A step that asked Ray for one whole CPU would then wait
forever. So unless ``CABRAIN_SLEEP_STEP_CPUS`` says otherwise, a cycle sizes its steps when it
starts, from what the nodes have free:

- one CPU each where some node has a whole one free (Ray spreads the steps over the nodes with room);
- else the most any node has free (at least ``MIN_SHARE``), so the steps run one after another there;
- else (nothing free anywhere) no reservation at all, one step at a time, beside the replicas.

A step that still waits (other work took the room meanwhile) has its run say so (``note``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIN_SHARE = 0.05  # Ray's CPU accounting is in these steps; less is no reservation at all


@dataclass(frozen=True)
class Room:
    cpus: float  # asked of Ray per step
    at_once: int | None  # steps at a time (None: as many as Ray finds room for)
    why: str

    def options(self) -> dict[str, Any]:
        return {"num_cpus": self.cpus}


def nodes_cpus() -> list[tuple[float, float]]:
    """(free, total) CPUs of every alive node of the Ray this process is connected to."""
    import ray  # heavy: only when sizing a run on Ray
    from ray._private import state

    free = state.available_resources_per_node()
    return [
        (float(free.get(n["NodeID"], {}).get("CPU", 0.0)), float(n["Resources"].get("CPU", 0.0)))
        for n in ray.nodes()
        if n.get("Alive")
    ]


def step_room(configured: float | None, nodes: list[tuple[float, float]]) -> Room:
    """What each step asks for, given ``CABRAIN_SLEEP_STEP_CPUS`` and the nodes' (free, total) CPUs."""
    if configured is not None:
        return Room(configured, None if configured > 0 else 1, f"CABRAIN_SLEEP_STEP_CPUS={configured:g}")
    most = max((free for free, _ in nodes), default=0.0)
    if most >= 1:
        return Room(1.0, None, "one CPU per step")
    share = math.floor(most / MIN_SHARE + 1e-9) * MIN_SHARE  # 0.3 / 0.05 is 5.999... in floats
    if share >= MIN_SHARE:
        total = max((t for f, t in nodes if f == most), default=0.0)
        return Room(
            round(share, 2),
            None,
            f"{share:.2g} CPU per step: the most a node has free ({most:g} of {total:g}; the Serve replicas hold the rest)",
        )
    return Room(0.0, 1, "no CPU free on any node: steps run one at a time beside the Serve replicas")


def waiting_note(step: str, namespace: str, month: str, room: Room, nodes: list[tuple[float, float]]) -> str:
    """Why a step has not started: what it asked for and what the nodes have free."""
    what = " ".join(p for p in (step, namespace or "*", month) if p)
    free = ", ".join(f"{f:g} of {t:g}" for f, t in nodes) or "no node"
    return f"waiting for room on the cluster: {what} asks for {room.cpus:g} CPU; CPUs free per node: {free}"
