"""The ``cabrain`` command line.

Exit codes: 0 success, 1 a check or operation failed (the message says why and how to fix it),
2 bad usage or settings, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import sys
from collections.abc import Callable, Sequence

from cabrain import __version__
from cabrain.errors import CabrainError, ConfigError, UsageError
from cabrain.settings import Settings, load_settings

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


# --- commands ----------------------------------------------------------------------------------
def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.providers.embedders import load_embedder
    from cabrain.store import migrations
    from cabrain.store.db import check_server, connect, describe_target, hot_tier, server_facts

    dim = settings.embedding_dim or load_embedder(settings).dim

    async def run(dsn: str) -> int:
        conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
        try:
            check_server(await server_facts(conn))
            if args.dry_run:
                state = await migrations.inspect(conn, settings.schema_dir)
                migrations.check_embedding_dim(state, dim, settings.embedding_model)
                print(f"schema: {state.version}; pending: {', '.join(state.pending) or 'none'}")
                return EXIT_FAIL if state.edited or state.unknown else EXIT_OK
            report = await migrations.migrate(
                conn, settings.schema_dir, embedding_dim=dim, embedding_model=settings.embedding_model
            )
        finally:
            await conn.close()
        if report.applied:
            print(f"applied {len(report.applied)} migration(s): {', '.join(report.applied)}")
        else:
            print(f"schema up to date ({len(report.already_applied)} migrations)")
        print(f"partitions: {', '.join(report.partitions)}")
        print(report.sleep_role)
        return EXIT_OK

    print(f"migrating {describe_target(settings)}")
    with hot_tier(settings) as dsn:
        return asyncio.run(run(dsn))


def cmd_sleep(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.sleep.cycle import STEPS, check_steps, run_cycle
    from cabrain.store.db import hot_tier

    steps = [s.strip() for s in args.steps.split(",") if s.strip()] if args.steps else list(STEPS)
    check_steps(steps)  # before Ray starts, and before a schedule waits for its first run
    if not args.schedule and (args.at or args.every or args.max_runs):
        raise UsageError("--at, --every and --max-runs go with --schedule")
    if args.every is not None and args.every <= 0:
        raise UsageError("--every must be a positive number of seconds")
    out = sys.stderr if args.json else sys.stdout  # --json: stdout holds the JSON report alone
    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=out, flush=True))
    from cabrain.service import ray_session

    with ray_session(settings, inline=args.inline, say=say), hot_tier(settings) as dsn:

        def run_once():
            return asyncio.run(
                run_cycle(
                    settings, dsn, namespaces=args.namespace or None, steps=steps, use_ray=not args.inline, progress=say
                )
            )

        if args.schedule:
            return _sleep_on_schedule(settings, args, run_once, say)
        report = run_once()
    if args.json:
        print(json.dumps(report.to_json(), indent=2, default=str))
    else:
        for step, counts in report.steps.items():
            line = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v) or "nothing to do"
            print(f"{step:12s} {line}")
        for name, why in report.skipped.items():
            print(f"skipped {name}: {why}")
        print(f"run {report.run_id}: {report.status} in {report.seconds:.1f} s (report kept in sleep_runs)")
    return EXIT_OK if report.status == "done" else EXIT_FAIL


def _sleep_on_schedule(settings: Settings, args: argparse.Namespace, run_once, say) -> int:
    from datetime import timedelta

    from cabrain.sleep.schedule import Scheduler, parse_at

    if args.every is not None:
        when = {"every": timedelta(seconds=args.every)}
    else:
        when = {"at": parse_at(args.at or settings.sleep_at)}

    def once() -> str:
        report = run_once()
        if report.status != "done":
            raise RuntimeError(f"run {report.run_id} ended {report.status} (see sleep_runs)")
        skipped = f", skipped {', '.join(report.skipped)}" if report.skipped else ""
        return f"run {report.run_id}: done in {report.seconds:.1f} s, {len(report.namespaces)} namespace(s){skipped}"

    scheduler = Scheduler(once, max_runs=args.max_runs, say=say, **when)
    scheduler.install_signal_handlers()
    say("sleep scheduler: " + (f"every {args.every:g} s" if args.every else f"daily at {when['at']:%H:%M} UTC"))
    return EXIT_OK if scheduler.loop() == 0 else EXIT_FAIL


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.doctor import Status, render, run_doctor
    from cabrain.settings import unknown_variables

    checks = asyncio.run(run_doctor(settings, unknown=unknown_variables(dict(os.environ))))
    if args.json:
        print(json.dumps([c.as_dict() for c in checks], ensure_ascii=False, indent=2))
    else:
        print(render(checks))
    failed = [c.name for c in checks if c.status is Status.FAIL]
    if failed:
        if not args.json:
            print(f"\ndoctor: {len(failed)} check(s) failed: {', '.join(failed)}", file=sys.stderr)
        return EXIT_FAIL
    if not args.json:
        print("\ndoctor: all checks passed")
    return EXIT_OK


def cmd_db_status(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.db import describe_target
    from cabrain.store.embedded import EmbeddedPostgres

    if not settings.embedded:
        print(f"hot tier: {describe_target(settings)} (external; not managed by cabrain)")
        return EXIT_OK
    status = EmbeddedPostgres.from_settings(settings).status()
    print(f"data directory : {status.data_dir} ({'initialised' if status.initialised else 'not initialised yet'})")
    print(f"server         : {'running, pid ' + str(status.pid) if status.running else 'stopped'}")
    print(f"socket         : {status.socket_dir}")
    print(f"used by        : {', '.join(map(str, status.leases)) or 'no process'}")
    return EXIT_OK


def cmd_db_stop(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.store.embedded import EmbeddedPostgres

    if not settings.embedded:
        raise ConfigError(
            "CABRAIN_DATABASE_URL is set: that server is not managed by cabrain",
            hint="stop it with its own tools, or unset the variable to manage the embedded server",
        )
    EmbeddedPostgres.from_settings(settings).stop(force=args.force)
    print("embedded PostgreSQL stopped")
    return EXIT_OK


def cmd_db_shell(settings: Settings, args: argparse.Namespace) -> int:
    import subprocess

    from cabrain.store.db import hot_tier
    from cabrain.store.embedded import wheel_install_dir

    psql = str(wheel_install_dir() / "bin" / "psql")
    with hot_tier(settings) as dsn:
        return subprocess.call([psql, dsn, *args.psql_args])


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from cabrain import eval as evaluation

    if args.dataset == "decisions":
        return _eval_decisions(settings, args)
    if args.pairs is not None or args.decider is not None:
        raise UsageError(
            f"unexpected {args.pairs or '--decider'}: a second set and --decider belong to `cabrain eval decisions SET`"
        )
    ks = _int_list(args.k, "--k")
    modes = [m for group in (args.mode or ["vector,bm25,hybrid"]) for m in group.split(",") if m]
    results = asyncio.run(evaluation.run_eval(settings, Path(args.dataset), modes=modes, ks=ks, quiet=args.quiet))
    print(evaluation.render(results, ks))
    _write_results(args.json, json.dumps(evaluation.to_json(results, settings), ensure_ascii=False, indent=2) + "\n")
    return EXIT_OK


def _eval_decisions(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from cabrain import eval_decisions

    if args.pairs is None:
        raise UsageError(
            "cabrain eval decisions needs a set: a .jsonl file of labelled pairs or a folder of them",
            hint="cabrain eval decisions eval/decisions",
        )
    if args.mode or args.k != "1,5,10,20":
        raise UsageError("--mode and --k measure recall; `cabrain eval decisions` takes --decider")
    results = asyncio.run(
        eval_decisions.run_decision_eval(
            settings, Path(args.pairs), decider=args.decider or "deterministic", quiet=args.quiet
        )
    )
    print(eval_decisions.render(results))
    _write_results(
        args.json, json.dumps(eval_decisions.to_json(results, settings), ensure_ascii=False, indent=2) + "\n"
    )
    return EXIT_OK


def cmd_bench_recall(settings: Settings, args: argparse.Namespace) -> int:

    from cabrain import bench

    if args.memories < 1 or args.queries < 1 or args.real_vectors < 1:
        raise UsageError("--memories, --queries and --real-vectors must be at least 1")
    result = asyncio.run(
        bench.run_recall_bench(
            settings,
            memories=args.memories,
            queries=args.queries,
            real_vectors=args.real_vectors,
            noise=args.noise,
            quiet=args.quiet,
        )
    )
    print(bench.render(result))
    _write_results(args.json, bench.main_json(result) + "\n")
    return EXIT_OK


def cmd_bench_all(settings: Settings, args: argparse.Namespace) -> int:
    """``cabrain bench`` without a sub-command: every measurement at every size, in one run."""
    from pathlib import Path

    from cabrain import bench_scale

    sizes = _int_list(args.sizes, "--sizes")
    levels = _int_list(args.concurrency, "--concurrency")
    if not sizes or min(sizes) < 100:
        raise UsageError("--sizes must be corpus sizes of at least 100, comma-separated")
    if not levels or min(levels) < 1 or 1 not in levels:
        raise UsageError("--concurrency must be levels of at least 1 and include 1 (the floor is compared at 1)")
    if args.namespaces < 1 or args.queries < 1 or args.retain_texts < 2 or args.real_vectors < 1:
        raise UsageError("--namespaces, --queries and --real-vectors must be at least 1, --retain-texts at least 2")
    spec = bench_scale.ScaleSpec(
        sizes=sizes,
        namespaces=args.namespaces,
        queries=args.queries,
        concurrency=levels,
        retain_texts=args.retain_texts,
        http=not args.no_http,
        keep=args.keep,
        real_vectors=args.real_vectors,
        noise=args.noise,
        maintenance_work_mem=args.maintenance_work_mem,
        app_args=_read_app_config(args.config) if args.config else None,
        out=Path(args.out),
        plot=not args.no_plot,
        quiet=args.quiet,
    )
    results = asyncio.run(bench_scale.run(settings, spec))
    print(bench_scale.render(results))
    print(
        f"\nresults written to {spec.out / 'results.json'}" + (f" and {spec.out / 'latency.png'}" if spec.plot else "")
    )
    return EXIT_OK


def cmd_bench_sleep(settings: Settings, args: argparse.Namespace) -> int:

    from cabrain import bench_sleep

    nodes = _int_list(args.nodes, "--nodes")
    if not nodes or min(nodes) < 1 or args.memories < 10 or args.namespaces < 1 or args.cpus_per_node < 1:
        raise UsageError(
            "--nodes and --cpus-per-node must be at least 1, --namespaces at least 1, --memories at least 10"
        )
    result = bench_sleep.main_run(
        settings,
        memories=args.memories,
        namespaces=args.namespaces,
        nodes=nodes,
        cpus_per_node=args.cpus_per_node,
        archive_queries=args.archive_queries,
        quiet=args.quiet,
    )
    print(bench_sleep.render_sleep(result))
    _write_results(args.json, json.dumps(result, indent=2, default=str) + "\n")
    return EXIT_OK


def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import service

    app_args = _read_app_config(args.config) if args.config else None
    service.up(settings, app_args=app_args)
    return EXIT_OK


def cmd_down(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import service

    print("removed the cabrain application" if service.down(settings) else "no cabrain application was deployed")
    return EXIT_OK


def _read_app_config(path: str) -> dict:
    """Application args from a Serve config file (its cabrain application) or a bare args file."""
    from pathlib import Path

    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if isinstance(data, dict) and "applications" in data:
        apps = [a for a in data["applications"] if a.get("import_path", "").startswith("serve_apps.app")]
        if not apps:
            raise UsageError(f"{path} has no application with import_path serve_apps.app:build_app")
        data = apps[0].get("args") or {}
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a mapping of application args")
    return data


# --- agents and keys ---------------------------------------------------------------------------
def _int_list(text: str, flag: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{flag} must be comma-separated integers, got {text!r}") from None


def _write_results(path: str | None, text: str) -> None:
    """``--json FILE``: the results, written where asked."""
    if path:
        from pathlib import Path

        Path(path).write_text(text)
        print(f"\nresults written to {path}")


def _clock_time(text: str) -> str:
    from cabrain.sleep.schedule import parse_at

    try:
        parse_at(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time of day HH:MM (24-hour, UTC)") from None
    return text.strip()


def _timestamp(text: str):
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date or time (e.g. 2026-01-31)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _remote(settings: Settings):
    from cabrain.client import Client

    if not settings.api_url:
        raise ConfigError(
            "this command talks to a running CaBrain API and CABRAIN_API_URL is not set",
            hint="export CABRAIN_API_URL=http://127.0.0.1:8000 and CABRAIN_API_KEY=<key> (cabrain up prints both)",
        )
    key = settings.api_key.get_secret_value() if settings.api_key else None
    return Client(settings.api_url, key)


def _local_db(settings: Settings, work):
    """Run ``work(conn)`` on the hot tier directly (agents commands without CABRAIN_API_URL)."""
    from cabrain.store.db import connect, hot_tier

    async def run(dsn: str):
        from cabrain.store import migrations

        conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
        try:
            await migrations.require_current(conn, settings.schema_dir)
            return await work(conn)
        finally:
            await conn.close()

    with hot_tier(settings) as dsn:
        return asyncio.run(run(dsn))


def _print_new_key(agent_id: str, key: str, key_id: str) -> None:
    print(f"agent : {agent_id}")
    print(f"key id: {key_id}")
    print(f"key   : {key}")
    print("store the key now: it is not shown again (only its SHA-256 digest is kept)", file=sys.stderr)


def cmd_agents_create(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with _remote(settings) as client:
            new = client.create_agent(
                args.name, display_name=args.display_name, is_admin=args.admin, key_label=args.label
            )
        _print_new_key(new["agent_id"], new["key"], new["key_id"])
        return EXIT_OK

    async def work(conn):
        async with conn.transaction():
            await identity.create_agent(
                conn, args.name, display_name=args.display_name, is_admin=args.admin, exist_ok=False
            )
            return await identity.create_key(conn, args.name, label=args.label)

    new = _local_db(settings, work)
    _print_new_key(new.agent_id, new.key, str(new.id))
    return EXIT_OK


def cmd_agents_key(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with _remote(settings) as client:
            new = client.create_key(args.name, label=args.label)
        _print_new_key(new["agent_id"], new["key"], new["key_id"])
        return EXIT_OK
    new = _local_db(settings, lambda conn: identity.create_key(conn, args.name, label=args.label))
    _print_new_key(new.agent_id, new.key, str(new.id))
    return EXIT_OK


def cmd_agents_list(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with _remote(settings) as client:
            agents = client.agents()
    else:
        agents = [a.__dict__ for a in _local_db(settings, identity.list_agents)]
    print(f"{'agent':<32} {'admin':<6} {'keys':>4}  state")
    for a in agents:
        state = "disabled" if a["disabled_at"] else "active"
        print(f"{a['id']:<32} {'yes' if a['is_admin'] else 'no':<6} {a['active_keys']:>4}  {state}")
    return EXIT_OK


def cmd_agents_keys(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with _remote(settings) as client:
            keys = client.keys(args.name)
    else:
        keys = [k.__dict__ for k in _local_db(settings, lambda conn: identity.list_keys(conn, args.name))]
    for k in keys:
        state = f"revoked {k['revoked_at']}" if k["revoked_at"] else "active"
        print(f"{k['id']}  {k['prefix']}...  {k['label'] or '-'}  {state}")
    return EXIT_OK


def cmd_agents_revoke(settings: Settings, args: argparse.Namespace) -> int:
    import uuid as _uuid

    from cabrain import identity
    from cabrain.errors import NotFound

    try:
        key_id = _uuid.UUID(args.key_id)
    except ValueError:
        raise UsageError(f"{args.key_id!r} is not a key id (see: cabrain agents keys {args.name})") from None
    if settings.api_url:
        with _remote(settings) as client:
            client.revoke_key(args.name, key_id)
    elif not _local_db(settings, lambda conn: identity.revoke_key(conn, key_id, agent_id=args.name)):
        raise NotFound(f"agent {args.name!r} has no active key {key_id}")
    print(f"revoked key {key_id} of {args.name}")
    return EXIT_OK


def cmd_agents_disable(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with _remote(settings) as client:
            client.disable_agent(args.name)
    else:
        _local_db(settings, lambda conn: identity.disable_agent(conn, args.name))
    print(f"disabled {args.name}: its keys no longer work; its memories stay")
    return EXIT_OK


# --- remote mode: memory commands against a running API ------------------------------------------
def cmd_remember(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import MemoryInput, Network, Visibility

    content = sys.stdin.read() if args.content == "-" else args.content
    item = MemoryInput(
        content,
        args.namespace,
        visibility=Visibility(args.visibility),
        network=Network(args.network),
        source_kind=args.source_kind or "manual",
    )
    with _remote(settings) as client:
        result = client.retain(item)
    print(f"{result.decision.value} {result.memory_id or '-'} (importance {result.importance:.2f}) {result.reason}")
    return EXIT_OK


def cmd_recall(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import ArchiveQuery, RecallQuery, archive_to_dict, recall_to_dict

    if not args.archive and (args.valid_from or args.valid_to):
        raise UsageError("--from and --to go with --archive", hint="add --archive to search the cold tier by time")
    with _remote(settings) as client:
        if args.archive:
            query = ArchiveQuery(
                args.query, args.namespace, k=args.k, valid_from=args.valid_from, valid_to=args.valid_to
            )
            result, as_dict = client.recall_archive(query), archive_to_dict
        else:
            result, as_dict = client.recall(RecallQuery(args.query, args.namespace, k=args.k)), recall_to_dict
    if args.json:
        print(json.dumps(as_dict(result), ensure_ascii=False, indent=2))
        return EXIT_OK
    for i, hit in enumerate(result.hits, 1):
        when = f" {hit.memory.valid_at:%Y-%m-%d}" if args.archive else ""
        gone = " (superseded)" if hit.memory.invalid_at else ""
        print(f"{i:>2}. [{hit.score:.3f}]{when} {hit.memory.content}{gone}  ({hit.memory.id})")
    if not result.hits:
        print("no memories matched" + (f" ({result.scanned} archived memories searched)" if args.archive else ""))
    return EXIT_OK


def cmd_get(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import history_to_dict

    with _remote(settings) as client:
        print(json.dumps(history_to_dict(client.get(args.memory_id)), ensure_ascii=False, indent=2))
    return EXIT_OK


def cmd_entities(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import entity_page_to_dict

    if not 1 <= args.limit <= 200:
        raise UsageError(f"--limit must be between 1 and 200, got {args.limit}")
    with _remote(settings) as client:
        page = client.entities(args.namespace, query=args.query, limit=args.limit, cursor=args.cursor)
    if args.json:
        print(json.dumps(entity_page_to_dict(page), ensure_ascii=False, indent=2))
        return EXIT_OK
    for e in page.entities:
        about = " ".join(e.summary.split()) if e.summary else "(no summary you may read)"
        print(f"{e.name:<32} {about[:200]}")
    if not page.entities:
        print("no entities" + (f" matching {args.query!r}" if args.query else ""))
    if page.next_cursor:
        print(
            f"more: cabrain entities {shlex.quote(args.namespace)} --cursor {shlex.quote(page.next_cursor)}"
            + (f" --query {shlex.quote(args.query)}" if args.query else "")
        )
    return EXIT_OK


def cmd_entity(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.types import entity_memories_to_dict

    if not 1 <= args.limit <= 200:
        raise UsageError(f"--limit must be between 1 and 200, got {args.limit}")
    with _remote(settings) as client:
        found = client.entity(args.namespace, args.name, history=args.history, limit=args.limit)
    if args.json:
        print(json.dumps(entity_memories_to_dict(found), ensure_ascii=False, indent=2))
        return EXIT_OK
    e = found.entity
    print(f"{e.name}  ({e.id})")
    if e.summary:
        print(f"summary ({e.summarized_at:%Y-%m-%d %H:%M}): {e.summary}")
    else:
        print("summary: none you may read")
    for m in found.memories:
        gone = " (superseded)" if m.invalid_at else ""
        print(f"- {m.valid_at:%Y-%m-%d} {m.content}{gone}  ({m.id})")
    if not found.memories:
        print("no current memory you may read mentions it" + ("" if args.history else " (--history: older ones too)"))
    return EXIT_OK


def cmd_forget(settings: Settings, args: argparse.Namespace) -> int:
    with _remote(settings) as client:
        result = client.forget(args.memory_id, reason=args.reason)
    print(f"forgotten {result.memory.id} (kept, out of recall since {result.memory.invalid_at})")
    return EXIT_OK


def cmd_judgments(settings: Settings, args: argparse.Namespace) -> int:
    with _remote(settings) as client:
        rows = client.judgments(args.memory_id, limit=args.limit)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return EXIT_OK
    if not rows:
        print(f"no judgment changed {args.memory_id}")
    for j in rows:
        state = f" (reverted by {j['reverted_by']})" if j["reverted_by"] else ""
        print(f"{j['created_at'][:19]}  {j['id']}  {j['kind']:<10} {j['origin']:<13} {j['agent'] or 'sleep'}{state}")
        print(f"    {j['reason']}")
    return EXIT_OK


def cmd_revert(settings: Settings, args: argparse.Namespace) -> int:
    with _remote(settings) as client:
        if args.judgment:
            undo = client.revert(judgment_id=args.id, reason=args.reason)
        else:
            undo = client.revert(memory_id=args.id, reason=args.reason)
    if args.json:
        print(json.dumps(undo, ensure_ascii=False, indent=2))
        return EXIT_OK
    print(
        f"reverted judgment {undo['reverts']} ({undo['inputs'].get('kind')}, {undo['inputs'].get('origin')}): "
        f"{len(undo['changes'])} memories back as they were; this revert is {undo['id']} (revert it to redo)"
    )
    return EXIT_OK


def cmd_namespaces(settings: Settings, args: argparse.Namespace) -> int:
    with _remote(settings) as client:
        if args.create:
            made = client.create_namespace(args.create)
            print(f"namespace {args.create} {'created' if made else 'already yours'}")
            return EXIT_OK
        if args.accept:
            row = client.accept_grant(args.accept)
            what = "read and write" if row["can_write"] else "read"
            print(f"accepted: you may {what} {args.accept}'s team memories, and capture may use them")
            return EXIT_OK
        if args.decline:
            gone = client.decline_grant(args.decline)
            print(f"{'declined' if gone else 'you held no grant on'} {args.decline}")
            return EXIT_OK
        for ns in client.namespaces():
            access = "rw" if ns["can_write"] else "r"
            grant = ns.get("grant")
            pending = ""
            if grant and not grant["accepted"]:
                offered = "read and write" if grant["can_write"] else "read"
                pending = (
                    f"  (offered {offered} by {grant['granted_by']}; accept: cabrain namespaces --accept {ns['name']})"
                )
            print(f"{ns['name']:<40} {access:<3} owner {ns['owner_agent_id']}{pending}")
    return EXIT_OK


def cmd_share(settings: Settings, args: argparse.Namespace) -> int:
    with _remote(settings) as client:
        if args.revoke:
            removed = client.revoke(args.namespace, args.agent)
            print(f"{'revoked' if removed else 'no grant for'} {args.agent} on {args.namespace}")
        else:
            accepted = client.share(args.namespace, args.agent, can_write=args.write)
            print(
                f"{args.agent} may now read {args.namespace}'s team memories"
                + (
                    ""
                    if accepted
                    else f"; it writes, and its capture uses them, once it accepts "
                    f"(cabrain namespaces --accept {args.namespace}, with its key)"
                )
            )
    return EXIT_OK


def cmd_bench_capture(settings: Settings, args: argparse.Namespace) -> int:

    from cabrain import bench

    if args.events < 1:
        raise UsageError("--events must be at least 1")
    app_args = _read_app_config(args.config) if args.config else None
    result = asyncio.run(bench.run_capture_bench(settings, events=args.events, app_args=app_args, quiet=args.quiet))
    print(bench.render_capture(result))
    _write_results(args.json, json.dumps(result, indent=2) + "\n")
    return EXIT_OK


def cmd_bench_http(settings: Settings, args: argparse.Namespace) -> int:

    from cabrain import bench

    levels = _int_list(args.concurrency, "--concurrency")
    if not levels or min(levels) < 1 or args.memories < 1 or args.queries < 1:
        raise UsageError("--concurrency levels, --memories and --queries must be at least 1")
    app_args = _read_app_config(args.config) if args.config else None
    result = asyncio.run(
        bench.run_http_bench(
            settings,
            memories=args.memories,
            queries=args.queries,
            concurrency=levels,
            app_args=app_args,
            quiet=args.quiet,
        )
    )
    print(bench.render_http(result))
    _write_results(args.json, json.dumps(result.as_dict(), indent=2) + "\n")
    return EXIT_OK


def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.faces.mcp import run_stdio

    asyncio.run(run_stdio(settings))
    return EXIT_OK


def cmd_capture(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.faces.capture import main as capture

    return capture(["--flush"] if args.flush else [])


def cmd_hooks(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from cabrain.faces import hooks

    path = hooks.settings_path(args.scope, Path.cwd())
    if args.hooks_command == "install":
        changed = hooks.install(path, hooks.capture_command(args.command))
        hooks.compile_hook_modules()
        print(f"{'installed' if changed else 'already installed'}: CaBrain capture hooks in {path}")
    else:
        changed = hooks.uninstall(path)
        print(f"{'removed' if changed else 'nothing to remove'}: CaBrain capture hooks in {path}")
    return EXIT_OK


# --- parser ------------------------------------------------------------------------------------
Command = Callable[[Settings, argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cabrain",
        description="CaBrain: self-hosted shared memory for AI agents. "
        "Settings come from CABRAIN_* environment variables (see README).",
    )
    parser.add_argument("--version", action="version", version=f"cabrain {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    migrate = sub.add_parser(
        "migrate",
        help="create or upgrade the database schema",
        description="Apply pending migrations from schema/ in one transaction (safe to run "
        "concurrently; re-running is a no-op), create monthly partitions and the sleep role.",
    )
    migrate.add_argument("--dry-run", action="store_true", help="list pending migrations only")
    migrate.set_defaults(func=cmd_migrate)

    sleep = sub.add_parser(
        "sleep",
        help="run the sleep cycle: consolidate, dedup, reconsolidate, decay, demote, maintain",
        description="Run one sleep cycle over every namespace (or those named) as Ray tasks: a local Ray, or "
        "the cluster at CABRAIN_RAY_ADDRESS. Progress per step and namespace; the report is kept in sleep_runs.",
    )
    sleep.add_argument("--namespace", action="append", help="only this namespace (repeatable)")
    sleep.add_argument("--steps", help="comma-separated subset, in cycle order (default: all)")
    sleep.add_argument("--inline", action="store_true", help="run the steps in this process, without Ray")
    sleep.add_argument("--json", action="store_true", help="print the report as JSON")
    sleep.add_argument("--quiet", action="store_true", help="no progress lines")
    sleep.add_argument(
        "--schedule",
        action="store_true",
        help="keep running: one cycle daily at --at (default CABRAIN_SLEEP_AT, 03:00 UTC) or every --every s",
    )
    sleep.add_argument(
        "--at", type=_clock_time, default=None, metavar="HH:MM", help="with --schedule: daily, at HH:MM UTC"
    )
    sleep.add_argument("--every", type=float, default=None, metavar="SECONDS", help="with --schedule: every SECONDS")
    sleep.add_argument("--max-runs", type=int, default=None, metavar="N", help="with --schedule: stop after N runs")
    sleep.set_defaults(func=cmd_sleep)

    doctor = sub.add_parser(
        "doctor",
        help="check the database, schema, models, cache and cold tier",
        description="Check every dependency and print a table; exits 1 if any check fails.",
    )
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.set_defaults(func=cmd_doctor)

    ev = sub.add_parser(
        "eval",
        help="measure recall quality, or the write and sleep decisions (eval decisions SET)",
        description="Load each set (a folder with corpus.jsonl and queries.jsonl, or a folder of "
        "such folders) into a scratch database and report hit@k (recall_any@k), recall_all@k, MRR, "
        "nDCG@10 and latency percentiles for every mode side by side. `cabrain eval decisions SET` "
        "instead plays labelled statement pairs (a .jsonl file or a folder of them) through retain "
        "and sleep and reports precision and recall per decision and the false-supersede rate. "
        "See docs/EVAL.md.",
    )
    ev.add_argument("dataset", help="a set folder, or a folder of set folders; or the word `decisions`")
    ev.add_argument("pairs", nargs="?", help="with `decisions`: a .jsonl file of labelled pairs, or a folder of them")
    ev.add_argument(
        "--decider",
        choices=["deterministic", "llm"],
        default=None,
        help="with `decisions`: the write decider measured (default deterministic; llm needs CABRAIN_LLM_URL)",
    )
    ev.add_argument("--k", default="1,5,10,20", help="cut-offs, comma-separated (default 1,5,10,20)")
    ev.add_argument(
        "--mode",
        action="append",
        default=None,
        help="vector, bm25, hybrid, hybrid+rerank; repeat or comma-separate (default vector,bm25,hybrid)",
    )
    ev.add_argument("--json", metavar="FILE", help="also write the full results as JSON")
    ev.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ev.set_defaults(func=cmd_eval)

    bench = sub.add_parser(
        "bench",
        help="measure performance",
        description="Without BENCH: the whole picture in one run. For each --sizes N, build a synthetic corpus (N "
        "memories in one namespace, N/100 in each of the others; mixed Arabic and English) and measure retain "
        "throughput against the bare embedder, recall p50/p95/p99 at each concurrency in process (no cache, L1 "
        "cache miss and hit, reranked when a reranker is configured) and over HTTP, the floor (query embedding, "
        "bare HNSW and BM25 probes) and the service's memory. Writes OUT/results.json and OUT/latency.png. "
        "See docs/BENCHMARKS.md.",
    )
    bench.add_argument("--sizes", default="10000,100000", help="corpus sizes, comma-separated (default 10000,100000)")
    bench.add_argument("--namespaces", type=int, default=20, help="namespaces; the first is the large one (default 20)")
    bench.add_argument("--queries", type=int, default=200, help="recalls timed per measurement (default 200)")
    bench.add_argument("--concurrency", default="1,8,32", help="levels, comma-separated, including 1 (default 1,8,32)")
    bench.add_argument("--retain-texts", type=int, default=512, help="texts retained in batches (default 512)")
    bench.add_argument("--real-vectors", type=int, default=2000, help="memories embedded for real (default 2000)")
    bench.add_argument("--noise", type=float, default=0.02, help="per-dimension noise of derived vectors")
    bench.add_argument(
        "--keep",
        action="store_true",
        help="keep each corpus in a database of its own and reuse it while its parameters match",
    )
    bench.add_argument(
        "--maintenance-work-mem",
        default="auto",
        help="PostgreSQL memory for the index builds (auto: the vector graph's size, at most a quarter of memory)",
    )
    bench.add_argument("--no-http", action="store_true", help="skip the HTTP measurements (no Ray)")
    bench.add_argument("--config", metavar="FILE", help="Serve config or app args for the HTTP measurements")
    bench.add_argument("--out", default="bench-results", help="folder for results.json and latency.png")
    bench.add_argument("--no-plot", action="store_true", help="no latency.png (matplotlib not needed)")
    bench.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    bench.set_defaults(func=cmd_bench_all)
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="BENCH")
    br = bench_sub.add_parser(
        "recall",
        help="recall latency at N memories in one namespace",
        description="Load N synthetic memories (real vectors for --real-vectors of them, derived "
        "vectors for the rest) into a scratch database and report recall p50/p95/p99 per mode, "
        "with the query embedding time apart.",
    )
    br.add_argument("--memories", type=int, default=100_000, help="corpus size (default 100000)")
    br.add_argument("--queries", type=int, default=300, help="recalls timed per mode (default 300)")
    br.add_argument("--real-vectors", type=int, default=2000, help="memories embedded for real (default 2000)")
    br.add_argument("--noise", type=float, default=0.02, help="per-dimension noise of derived vectors")
    br.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    br.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    br.set_defaults(func=cmd_bench_recall)
    bh = bench_sub.add_parser(
        "http",
        help="HTTP recall latency at several concurrencies, beside in-process",
        description="Load N synthetic memories into a scratch database, time recall in process, then start a "
        "local Ray with the Serve app on CABRAIN_API_PORT and time the same through the HTTP API.",
    )
    bh.add_argument("--memories", type=int, default=10_000, help="corpus size (default 10000)")
    bh.add_argument("--queries", type=int, default=300, help="recalls timed per concurrency level (default 300)")
    bh.add_argument("--concurrency", default="1,8,32", help="levels, comma-separated (default 1,8,32)")
    bh.add_argument("--config", metavar="FILE", help="Serve config or app args (replicas, CPUs, batch sizes)")
    bh.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bh.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    bh.set_defaults(func=cmd_bench_http)
    bc = bench_sub.add_parser(
        "capture",
        help="wall time of `cabrain capture` per Claude Code hook event, service up",
        description="Start a local Ray with the Serve app on a scratch database and time `cabrain capture` "
        "(process start to exit) for UserPromptSubmit, PostToolUse and SessionStart events.",
    )
    bc.add_argument("--events", type=int, default=100, help="events of each type (default 100)")
    bc.add_argument("--config", metavar="FILE", help="Serve config or app args")
    bc.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bc.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    bc.set_defaults(func=cmd_bench_capture)
    bs = bench_sub.add_parser(
        "sleep",
        help="sleep-cycle throughput per step on Ray clusters of 1..N nodes",
        description="Load N synthetic memories (a similarity structure that gives every step work; see "
        "cabrain/bench_sleep.py) into a scratch database once, then for each node count copy it, start a Ray "
        "cluster of that many nodes on this machine and time each sleep step over every namespace.",
    )
    bs.add_argument("--memories", type=int, default=100_000, help="corpus size (default 100000)")
    bs.add_argument("--namespaces", type=int, default=8, help="namespaces; the first holds half (default 8)")
    bs.add_argument("--nodes", default="1,2", help="comma-separated node counts (default 1,2)")
    bs.add_argument("--cpus-per-node", type=int, default=1, help="CPUs each Ray node offers (default 1)")
    bs.add_argument("--archive-queries", type=int, default=30, help="archive recalls timed after the run (default 30)")
    bs.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bs.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    bs.set_defaults(func=cmd_bench_sleep)

    up = sub.add_parser(
        "up",
        help="run CaBrain: database, Ray, the HTTP API",
        description="Start the embedded PostgreSQL (unless CABRAIN_DATABASE_URL is set), migrate, create "
        "an admin key on first run, start a local Ray (or use CABRAIN_RAY_ADDRESS) and deploy the HTTP API on "
        "CABRAIN_API_HOST:CABRAIN_API_PORT (127.0.0.1:8000). Ctrl-C stops everything it started.",
    )
    up.add_argument(
        "--config", metavar="FILE", help="Serve config (YAML) or application args: replicas, CPUs, GPUs, batch sizes"
    )
    up.set_defaults(func=cmd_up)
    down = sub.add_parser(
        "down",
        help="remove the app from the Ray cluster at CABRAIN_RAY_ADDRESS",
        description="Delete the cabrain Serve application from a cluster `cabrain up` deployed onto.",
    )
    down.set_defaults(func=cmd_down)

    agents = sub.add_parser(
        "agents",
        help="manage agents and their API keys",
        description="Agents and API keys. With CABRAIN_API_URL (and an admin CABRAIN_API_KEY) through the API; "
        "otherwise directly on the hot tier.",
    )
    agents_sub = agents.add_subparsers(dest="agents_command", metavar="ACTION", required=True)
    a_create = agents_sub.add_parser(
        "create",
        help="create an agent and print its first key (shown once)",
        description="Create an agent and print its first key (shown once).",
    )
    a_create.add_argument("name")
    a_create.add_argument("--admin", action="store_true", help="the agent manages agents, keys and grants")
    a_create.add_argument("--display-name", default=None)
    a_create.add_argument("--label", default=None, help="label of the key")
    a_create.set_defaults(func=cmd_agents_create)
    a_key = agents_sub.add_parser(
        "key",
        help="make another key for an agent (shown once)",
        description="Make another key for an agent (shown once).",
    )
    a_key.add_argument("name")
    a_key.add_argument("--label", default=None)
    a_key.set_defaults(func=cmd_agents_key)
    a_list = agents_sub.add_parser("list", help="list agents", description="List agents.")
    a_list.set_defaults(func=cmd_agents_list)
    a_keys = agents_sub.add_parser(
        "keys",
        help="list an agent's keys (ids and prefixes, never the keys)",
        description="List an agent's keys (ids and prefixes, never the keys).",
    )
    a_keys.add_argument("name")
    a_keys.set_defaults(func=cmd_agents_keys)
    a_revoke = agents_sub.add_parser(
        "revoke", help="revoke one of an agent's keys", description="Revoke one of an agent's keys."
    )
    a_revoke.add_argument("name")
    a_revoke.add_argument("key_id")
    a_revoke.set_defaults(func=cmd_agents_revoke)
    a_disable = agents_sub.add_parser(
        "disable",
        help="disable an agent (keys stop working, memories stay)",
        description="Disable an agent (keys stop working, memories stay).",
    )
    a_disable.add_argument("name")
    a_disable.set_defaults(func=cmd_agents_disable)

    mcp = sub.add_parser(
        "mcp",
        help="serve the MCP tools over stdio (for Claude Code, Claude Desktop, ...)",
        description="Serve memory_retain, memory_recall, memory_recall_archive, memory_get, memory_forget, "
        "memory_share, memory_reconsolidate, memory_namespaces, memory_create_namespace, memory_entities, "
        "memory_entity and workflow_dispatch over stdio, acting as the agent whose key is CABRAIN_API_KEY: "
        "through the service at CABRAIN_API_URL when set, otherwise straight on the database.",
    )
    mcp.set_defaults(func=cmd_mcp)

    capture = sub.add_parser(
        "capture",
        help="handle a Claude Code hook event (JSON on stdin)",
        description="Handle one Claude Code hook event read on stdin (SessionStart, UserPromptSubmit, "
        "PostToolUse, PreCompact, Stop): retain what matters, print context to inject. With CABRAIN_API_URL it "
        "hands memories to the service (queued locally while it is down); otherwise writes to the database.",
    )
    capture.add_argument("--flush", action="store_true", help="send the local queue to the service now")
    capture.set_defaults(func=cmd_capture)
    hooks_parser = sub.add_parser(
        "hooks",
        help="install or remove the capture hooks in Claude Code's settings",
        description="Add (or remove) `cabrain capture` for SessionStart, UserPromptSubmit, PostToolUse, "
        "PreCompact and Stop in Claude Code's settings file, keeping every other hook.",
    )
    hooks_sub = hooks_parser.add_subparsers(dest="hooks_command", metavar="ACTION", required=True)
    for action, text in (("install", "Add the capture hooks."), ("uninstall", "Remove the capture hooks.")):
        h = hooks_sub.add_parser(action, help=text.lower().rstrip("."), description=text)
        scope = h.add_mutually_exclusive_group()
        scope.add_argument(
            "--project",
            dest="scope",
            action="store_const",
            const="project",
            default="project",
            help="this project's .claude/settings.json (default)",
        )
        scope.add_argument(
            "--user", dest="scope", action="store_const", const="user", help="your ~/.claude/settings.json"
        )
        h.add_argument(
            "--command", default=None, help="the hook command (default: this cabrain's absolute path + capture)"
        )
        h.set_defaults(func=cmd_hooks)

    remote_note = " Talks to the API at CABRAIN_API_URL with CABRAIN_API_KEY."
    remember = sub.add_parser("remember", help="retain a memory", description="Retain one memory." + remote_note)
    remember.add_argument("content", help="the memory ('-' reads standard input)")
    remember.add_argument("--namespace", "-n", required=True)
    remember.add_argument("--visibility", default="private", choices=["private", "team", "global"])
    remember.add_argument("--network", default="experience", choices=["fact", "experience", "observation", "belief"])
    remember.add_argument("--source-kind", default=None)
    remember.set_defaults(func=cmd_remember)
    recall = sub.add_parser("recall", help="recall memories", description="Hybrid recall." + remote_note)
    recall.add_argument("query")
    recall.add_argument("--namespace", "-n", required=True)
    recall.add_argument("-k", type=int, default=5)
    recall.add_argument("--json", action="store_true", help="print the full answer as JSON")
    recall.add_argument(
        "--archive", action="store_true", help="search the cold tier (memories the sleep cycle demoted) instead"
    )
    recall.add_argument(
        "--from",
        dest="valid_from",
        type=_timestamp,
        default=None,
        metavar="WHEN",
        help="with --archive: only memories valid from WHEN (ISO 8601, e.g. 2026-01-01)",
    )
    recall.add_argument(
        "--to",
        dest="valid_to",
        type=_timestamp,
        default=None,
        metavar="WHEN",
        help="with --archive: only memories valid before WHEN",
    )
    recall.set_defaults(func=cmd_recall)
    get = sub.add_parser("get", help="show a memory with its history", description="Get a memory." + remote_note)
    get.add_argument("memory_id")
    get.set_defaults(func=cmd_get)
    entities = sub.add_parser(
        "entities",
        help="list what a namespace's memories are about, with summaries",
        description="List the entities (people, projects, tools, files ...) a namespace's "
        "memories mention, in name order, with what sleep summarised of each." + remote_note,
    )
    entities.add_argument("namespace")
    entities.add_argument("--query", "-q", default=None, help="only names containing this (any case)")
    entities.add_argument("--limit", type=int, default=50, help="entities per page (1-200, default 50)")
    entities.add_argument("--cursor", default=None, help="the next page (printed under a full page)")
    entities.add_argument("--json", action="store_true", help="print the answer as JSON")
    entities.set_defaults(func=cmd_entities)
    entity = sub.add_parser(
        "entity",
        help="show one entity: its summary and the memories that mention it",
        description="Show one entity (by name, in any case, or id): its summary and the "
        "memories that mention it, newest first." + remote_note,
    )
    entity.add_argument("namespace")
    entity.add_argument("name", help="the entity's name or id")
    entity.add_argument("--history", action="store_true", help="also superseded and forgotten memories")
    entity.add_argument("--limit", type=int, default=20, help="memories shown at most (1-200, default 20)")
    entity.add_argument("--json", action="store_true", help="print the answer as JSON")
    entity.set_defaults(func=cmd_entity)
    forget = sub.add_parser("forget", help="soft-forget a memory", description="Forget (never delete)." + remote_note)
    forget.add_argument("memory_id")
    forget.add_argument("--reason", default=None)
    forget.set_defaults(func=cmd_forget)
    judged = sub.add_parser(
        "judgments",
        help="why a memory changed: supersessions, merges, corrections, reverts",
        description="List the judgments that changed a memory, newest first." + remote_note,
    )
    judged.add_argument("memory_id")
    judged.add_argument("--limit", type=int, default=50, help="at most this many (1-500, default 50)")
    judged.add_argument("--json", action="store_true", help="print them as JSON")
    judged.set_defaults(func=cmd_judgments)
    revert = sub.add_parser(
        "revert",
        help="undo a supersession, invalidation or merge",
        description="Undo the latest judgment that changed MEMORY_ID (or, with --judgment, the "
        "judgment ID): the memories it changed get back exactly their state before it. The revert "
        "is recorded and can be reverted in turn. Needs write access to the namespace." + remote_note,
    )
    revert.add_argument("id", help="a memory id (or a judgment id with --judgment)")
    revert.add_argument("--judgment", action="store_true", help="ID is a judgment id")
    revert.add_argument("--reason", default=None, help="why it is undone")
    revert.add_argument("--json", action="store_true", help="print the revert as JSON")
    revert.set_defaults(func=cmd_revert)
    namespaces = sub.add_parser(
        "namespaces",
        help="list or create namespaces; accept or decline grants",
        description="List your namespaces (and grants offered to you), create one, or "
        "accept or decline a grant." + remote_note,
    )
    namespaces_action = namespaces.add_mutually_exclusive_group()
    namespaces_action.add_argument("--create", metavar="NAME", default=None, help="create a namespace you own")
    namespaces_action.add_argument(
        "--accept",
        metavar="NAME",
        default=None,
        help="accept the grant you were offered on NAME (writing, and capture, need it)",
    )
    namespaces_action.add_argument(
        "--decline", metavar="NAME", default=None, help="decline (or give up) your grant on NAME"
    )
    namespaces.set_defaults(func=cmd_namespaces)
    share = sub.add_parser(
        "share",
        help="grant (or revoke) an agent access to a namespace",
        description="Share a namespace's team memories." + remote_note,
    )
    share.add_argument("namespace")
    share.add_argument("agent")
    share.add_argument("--write", action="store_true", help="also allow writing")
    share.add_argument("--revoke", action="store_true", help="remove the grant instead")
    share.set_defaults(func=cmd_share)

    from cabrain.workflows.cli import add_parser as add_workflows

    add_workflows(sub)

    db = sub.add_parser(
        "db",
        help="manage the embedded PostgreSQL",
        description="Inspect or control the embedded PostgreSQL (used when CABRAIN_DATABASE_URL is unset).",
    )
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    status = db_sub.add_parser(
        "status",
        help="show where it lives and whether it runs",
        description="Show the data directory, server pid and the processes using it.",
    )
    status.set_defaults(func=cmd_db_status)
    stop = db_sub.add_parser(
        "stop",
        help="stop the server now",
        description="Stop the embedded server; refuses while other CaBrain processes use it.",
    )
    stop.add_argument("--force", action="store_true", help="stop it even while in use")
    stop.set_defaults(func=cmd_db_stop)
    shell = db_sub.add_parser(
        "shell",
        help="open psql on the hot tier",
        description="Run psql against the hot tier (starting the embedded server meanwhile).",
    )
    shell.add_argument("psql_args", nargs=argparse.REMAINDER, help="extra arguments for psql")
    shell.set_defaults(func=cmd_db_shell)
    return parser


def _explain(exc: CabrainError) -> str:
    """The error, and what to do about it in this command line's terms (cabrain/fixes.py)."""
    hint = exc.hint_for("cli")
    return exc.message + (f"\n  fix: {hint}" if hint else "")


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    # SIGTERM unwinds like Ctrl-C, so context managers release the embedded server.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        settings = load_settings()
        from cabrain import logs
        from cabrain.settings import describe_unknown, unknown_variables

        logs.configure(settings.log_level)
        unknown = unknown_variables(dict(os.environ))
        if unknown and args.func is not cmd_doctor:  # doctor reports them as one of its checks
            print(f"cabrain: warning: {describe_unknown(unknown)}", file=sys.stderr)
        return args.func(settings, args)
    except (ConfigError, UsageError) as exc:
        print(f"cabrain: {_explain(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except CabrainError as exc:
        print(f"cabrain: {_explain(exc)}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("cabrain: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a failure nobody turned into a CabrainError: one line, not a traceback
        import asyncpg

        if isinstance(exc, asyncpg.PostgresError | OSError):
            print(f"cabrain: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_FAIL
        raise


if __name__ == "__main__":
    raise SystemExit(main())
