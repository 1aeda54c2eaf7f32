"""Syncs run by the operator: ``cabrain connectors sync`` without a service, and the
``connector_sync`` Ray job.

Each named (or due) connector syncs as its own agent. With Ray, a sync whose listing finds more
changed items than ``CABRAIN_CONNECTOR_FAN_OUT_ITEMS`` splits them into shards of that many, one
Ray task each, spread over the cluster's nodes; each task opens its own engine (database pool,
embedder) and reads the credential from its own environment (give Ray workers the variable with the
job's runtime environment). The process that planned the sync keeps the connector's lock and
forgets what is gone once every shard is done.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from cabrain.connectors.base import ItemRef
from cabrain.connectors.facade import Connectors, FanOut
from cabrain.connectors.sync import Counts
from cabrain.engine import Engine
from cabrain.errors import CabrainError, NotFound
from cabrain.progress import Progress, Say, as_progress
from cabrain.settings import Settings, load_settings, settings_for_replicas
from cabrain.store import connectors as sql

__all__ = ["ray_fan_out", "sync_here"]

log = logging.getLogger("cabrain.connectors")


def sync_here(
    settings: Settings,
    names: Sequence[str],
    *,
    due: bool = False,
    use_ray: bool = False,
    dry_run: bool = False,
    say: Say | None = None,
) -> list[dict[str, Any]]:
    """Sync ``names`` (and, with ``due``, every connector whose schedule is due) on the hot tier;
    a report per connector, failures included (the others still run). ``say`` gets the progress
    (bars on a terminal: :func:`cabrain.progress.for_terminal`); ``dry_run``: what each sync would
    do, writing nothing (here, never on Ray)."""
    from cabrain.ray_runtime import ray_session  # Ray only where asked
    from cabrain.store.db import hot_tier

    progress = as_progress(say)
    with ray_session(settings, inline=not use_ray or dry_run, say=progress), hot_tier(settings) as dsn:
        return asyncio.run(
            _sync_all(settings, dsn, names, due=due, use_ray=use_ray and not dry_run, dry_run=dry_run, say=progress)
        )


async def _sync_all(
    settings: Settings,
    dsn: str,
    names: Sequence[str],
    *,
    due: bool,
    use_ray: bool,
    dry_run: bool,
    say: Progress,
) -> list[dict[str, Any]]:
    engine = await Engine.open(settings, dsn=dsn)
    try:
        hub = Connectors(engine, environ=os.environ, local_roots=None)
        chosen: list[sql.Connector] = []
        for name in names:
            async with engine.pool.acquire() as conn:
                connector = await sql.by_name(conn, name)
            if connector is None:
                raise NotFound(f"no connector named {name!r}", hint="see: cabrain connectors list")
            chosen.append(connector)
        if due:
            chosen += [c for c in await hub.due() if c.name not in set(names)]
            if not chosen:
                say("no connector is due")
        fan_out = ray_fan_out(settings, dsn, say) if use_ray else None
        reports = []
        for connector in chosen:
            try:
                if dry_run:
                    reports.append((await hub.dry_run(connector.agent_id, connector.name, say=say)).to_json())
                    continue
                report = await hub.sync(connector.agent_id, connector.name, say=say, fan_out=fan_out)
                reports.append(report.to_json())
            except CabrainError as exc:
                say(f"{connector.name}: FAILED: {exc.message}")
                reports.append({"connector": connector.name, "status": "failed", "error": exc.message})
        return reports
    finally:
        await engine.close()


def ray_fan_out(settings: Settings, dsn: str, say: Callable[[str], None] = lambda line: None) -> FanOut:
    """Shards of a sync's changed items as Ray tasks over the cluster."""
    import ray  # heavy: only a sync on Ray loads it

    @ray.remote(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")
    def connector_shard(settings_dict: dict[str, Any], dsn: str, name: str, refs: list[ItemRef]) -> dict[str, Any]:
        return asyncio.run(_shard(load_settings(**settings_dict), dsn, name, refs))

    shipped = settings_for_replicas(settings)
    size = settings.connector_fan_out_items

    async def fan_out(connector: sql.Connector, refs: list[ItemRef]) -> Counts:
        shards = [refs[i : i + size] for i in range(0, len(refs), size)]
        log.info("connector fan out", extra={"connector": connector.name, "items": len(refs), "shards": len(shards)})
        say(f"{connector.name}: {len(refs)} changed items in {len(shards)} Ray tasks")
        results = await asyncio.gather(*(connector_shard.remote(shipped, dsn, connector.name, s) for s in shards))
        total = Counts()
        for result in results:
            total.add(Counts(**{k: v for k, v in result.items() if k != "node"}))
        nodes = sorted({r["node"] for r in results if r.get("node")})
        say(f"{connector.name}: the shards ran on {len(nodes)} node(s)")
        return total

    return fan_out


async def _shard(settings: Settings, dsn: str, name: str, refs: list[ItemRef]) -> dict[str, Any]:
    engine = await Engine.open(settings, dsn=dsn)
    try:
        async with engine.pool.acquire() as conn:
            connector = await sql.by_name(conn, name)
        if connector is None:
            raise NotFound(f"connector {name!r} was removed during its sync")
        hub = Connectors(engine, environ=os.environ, local_roots=None)
        counts: dict[str, Any] = (await hub.apply_shard(connector, refs)).to_json()
    finally:
        await engine.close()
    import ray

    counts["node"] = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    return counts
