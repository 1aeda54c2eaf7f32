"""Running the service: ``cabrain up`` / ``cabrain down`` and the pieces tests and benchmarks share.

``cabrain up`` on a fresh machine: embedded PostgreSQL -> migrate -> first admin key -> a local Ray
(listeners on loopback) -> the Serve app on ``CABRAIN_API_HOST:CABRAIN_API_PORT`` -> wait until
``/v1/ready`` -> print how to call it (the lines to export, and examples that run as printed) ->
block. Ctrl-C (or SIGTERM) stops what it started: the Serve app (its replicas get
``CABRAIN_SERVE_STOP_TIMEOUT_S`` to finish their requests), the local Ray, and its lease on the
embedded server (the server stops when no CaBrain process uses it any more). Ctrl-C (or SIGTERM) is
how a local ``cabrain up`` is meant to end: it exits 0, without Ray's words about the work it cut short.

With ``CABRAIN_RAY_ADDRESS`` it deploys onto that cluster instead (which needs
``CABRAIN_DATABASE_URL``: other nodes cannot reach an embedded server's unix socket) and returns;
``cabrain down`` removes the application.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from cabrain import identity
from cabrain.clock import Clock, utc_now, utc_today
from cabrain.errors import ConfigError, ServiceError
from cabrain.providers.embedders import load_embedder
from cabrain.ray_runtime import cluster_address, init_ray, ray_temp_dir
from cabrain.settings import Settings, settings_for_replicas
from cabrain.store import migrations
from cabrain.store.db import check_server, connect, server_facts
from cabrain.store.embedded import EmbeddedPostgres

log = logging.getLogger(__name__)

APP_NAME = "cabrain"


def api_url(settings: Settings) -> str:
    host = settings.api_host
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.api_port}"


async def ensure_schema(settings: Settings, dsn: str, *, clock: Clock = utc_now) -> str:
    """Migrate when needed (and create the partitions around the clock's month); returns a one-line summary."""
    conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
    try:
        check_server(await server_facts(conn))
        state = await migrations.inspect(conn, settings.schema_dir)
        if state.current:
            await migrations.ensure_partitions(conn, utc_today(clock))
            return f"schema up to date ({state.version})"
        if settings.embedding_dim is not None:
            dim = settings.embedding_dim
        else:
            dim = (await asyncio.to_thread(load_embedder, settings)).dim
        report = await migrations.migrate(
            conn,
            settings.schema_dir,
            embedding_dim=dim,
            embedding_model=settings.embedding_model,
            today=utc_today(clock),
        )
        return f"applied {len(report.applied)} migration(s)"
    finally:
        await conn.close()


async def ensure_admin(settings: Settings, dsn: str) -> identity.AdminBootstrap:
    conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
    try:
        return await identity.ensure_admin_key(conn, settings.home)
    finally:
        await conn.close()


def deploy(settings: Settings, dsn: str, app_args: dict[str, Any] | None = None) -> None:
    """Run the Serve application (replacing a running one of the same name). By default an HTTP
    proxy runs on every node (``CABRAIN_SERVE_PROXY_LOCATION=EveryNode``), so any node's address
    serves the API."""
    from ray import serve  # Ray (seconds to import) only where a command uses it

    from cabrain.serve.app import build_app  # imports Ray
    from cabrain.serve.args import AppArgs

    logging.getLogger("ray.serve").setLevel(logging.WARNING)

    args = AppArgs.model_validate(app_args or {})
    args.settings = settings_for_replicas(settings, **{"database_url": dsn, **args.settings})
    # With direct ingress the ingress replicas listen on the API's port and Serve keeps one proxy on the
    # head, which nothing here calls: on a free loopback port
    port = 0 if settings.serve_direct_ingress else settings.api_port
    serve.start(
        proxy_location=settings.serve_proxy_location,
        http_options={"host": settings.api_host, "port": port},
        logging_config={"log_level": "WARNING", "enable_access_log": False},
    )
    serve.run(build_app(args), name=APP_NAME, route_prefix="/", blocking=False)


def wait_ready(settings: Settings, *, progress: bool = True) -> dict[str, Any]:
    """Poll ``/v1/ready`` until it says ready (or the timeout passes)."""
    url = f"{api_url(settings)}/v1/ready"
    deadline = time.monotonic() + settings.serve_ready_timeout_s
    started = time.monotonic()
    last_note = 0.0
    reason = "no answer yet"
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=5)
            body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
            if response.status_code == 200 and body.get("ready"):
                return body
            reason = body.get("reason") or f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            reason = f"{type(exc).__name__}"
        if progress and time.monotonic() - last_note >= 5:
            print(
                f"  waiting for the API ({time.monotonic() - started:.0f} s): {reason}",
                file=sys.stderr,
            )
            last_note = time.monotonic()
        time.sleep(0.5)
    raise ServiceError(
        f"the API at {url} was not ready after {settings.serve_ready_timeout_s:.0f} s: {reason}",
        hint=f"see the Serve logs under {_serve_logs()}, or raise CABRAIN_SERVE_READY_TIMEOUT_S",
    )


def _serve_logs() -> str:
    """Where this Ray's Serve logs are (a local Ray's session is under CABRAIN_HOME/ray)."""
    worker: Any = sys.modules.get("ray._private.worker")
    node = getattr(worker, "_global_node", None)
    if node is None:
        return "the head node's Ray session folder, logs/serve"
    return str(Path(node.get_session_dir_path()) / "logs" / "serve")


def admin_line(admin: identity.AdminBootstrap) -> str:
    if admin.made_now:
        return f"admin key: {admin.path} (created now; keep it safe)"
    if admin.active:
        return f"admin key: {admin.path}" + ("" if admin.path.exists() else " (moved away; any admin key works)")
    return (
        "admin key: none is active (the admin agents were disabled or their keys revoked, and stay so); "
        "make one with: cabrain agents create NAME --admin"
    )


def cabrain_command() -> str:
    """How a shell calls this installation's ``cabrain``: the bare name when ``PATH`` finds this very
    one, else its absolute path (a virtual environment's, after ``scripts/run``)."""
    here = Path(sys.executable).parent / "cabrain"  # not resolved: a venv's python is a link out of it
    if not here.is_file():
        return "cabrain"  # run as `python -m cabrain.cli` from an installation without the script
    found = shutil.which("cabrain")
    return "cabrain" if found and Path(found).resolve() == here.resolve() else str(here)


def exports(settings: Settings, admin: identity.AdminBootstrap) -> list[str]:
    """The shell lines that point the ``cabrain`` commands (and ``curl``) at this service: its URL,
    the first admin's key (while it works) and, when ``PATH`` does not find ``cabrain``, its folder."""
    lines = [f"export CABRAIN_API_URL={api_url(settings)}"]
    if admin.active and admin.path.exists():
        lines.append(f"export CABRAIN_API_KEY=$(cat {admin.path})")
    command = cabrain_command()
    if command != "cabrain":
        lines.append(f'export PATH="{Path(command).parent}:$PATH"  # cabrain is {command}')
    return lines


def usage(settings: Settings, admin: identity.AdminBootstrap) -> str:
    """What ``cabrain up`` prints once the API answers: where it is, the lines to export, and
    examples that run as printed once those lines ran."""
    url = api_url(settings)
    lines = [
        f"CaBrain is up at {url}  (API described at {url}/openapi.json)",
        f"console: {url}/console  (sign in with an API key)",
        admin_line(admin),
        "",
        "point your shell at it (the cabrain commands read these):",
        *(f"  {line}" for line in exports(settings, admin)),
        "",
        "try it:",
        f'  curl -s -H "Authorization: Bearer $CABRAIN_API_KEY" {url}/v1/whoami',
        "  curl -s -H \"Authorization: Bearer $CABRAIN_API_KEY\" -H 'content-type: application/json' \\",
        f'       -d \'{{"name": "notes"}}\' {url}/v1/namespaces',
        "  curl -s -H \"Authorization: Bearer $CABRAIN_API_KEY\" -H 'content-type: application/json' \\",
        f'       -d \'{{"content": "We chose pgvector.", "namespace": "notes"}}\' {url}/v1/memories',
        "  curl -s -H \"Authorization: Bearer $CABRAIN_API_KEY\" -H 'content-type: application/json' \\",
        f'       -d \'{{"query": "which vector store?", "namespace": "notes"}}\' {url}/v1/recall',
        f"  {cabrain_command()} agents create my-agent      # a key for each agent",
    ]
    return "\n".join(lines)


def up(
    settings: Settings,
    *,
    app_args: dict[str, Any] | None = None,
    stop: threading.Event | None = None,
) -> bool:
    """``cabrain up``: see the module docstring. Returns when stopped (local) or deployed (cluster):
    True when Ctrl-C or SIGTERM stopped it (everything it started is stopped then)."""
    remote = bool(cluster_address(settings))
    stopping_since: list[float] = []  # when Ctrl-C came
    if remote and settings.embedded:
        raise ConfigError(
            "deploying onto a Ray cluster needs a shared database",
            hint="set CABRAIN_DATABASE_URL to a PostgreSQL every node can reach",
        )
    with ExitStack() as stack:
        if settings.embedded:
            print(
                f"starting the embedded PostgreSQL under {settings.embedded_pg_dir}",
                file=sys.stderr,
            )
            server = EmbeddedPostgres.from_settings(settings)
            dsn = server.acquire(service=True)
            stack.callback(server.release)
            stack.callback(print, "releasing the embedded PostgreSQL", file=sys.stderr, flush=True)
            healing = threading.Event()
            stack.enter_context(_supervised(server, healing, settings.embedded_pg_reaper_interval_s))
        else:
            dsn = settings.database_url.get_secret_value()  # type: ignore[union-attr]
        print(asyncio.run(ensure_schema(settings, dsn)), file=sys.stderr)
        admin = asyncio.run(ensure_admin(settings, dsn))
        if settings.local_models:
            settings = _local_models(settings, dsn, stack, remote)
        print(
            "starting Ray (loopback only, token authentication)"
            if not remote
            else f"connecting to Ray at {cluster_address(settings)}",
            file=sys.stderr,
        )
        started_ray = init_ray(settings)
        if started_ray:
            stack.callback(stop_ray, settings)
        print("deploying the CaBrain Serve application (loading models)", file=sys.stderr)
        deploy(settings, dsn, app_args)  # returns once every replica runs
        if remote:  # the API is on the cluster's nodes, not necessarily on this machine
            where = "every node" if settings.serve_proxy_location == "EveryNode" else "the head node"
            print(
                f"deployed onto the cluster: the API answers on port {settings.api_port} of {where} "
                f"(GET /v1/ready says when its models are loaded)\n"
                f"{admin_line(admin)}\n"
                f"remove it with: cabrain down (CABRAIN_RAY_ADDRESS={cluster_address(settings)})",
                flush=True,
            )
            return False
        wait_ready(settings)
        if threading.current_thread() is threading.main_thread():
            # it says Ctrl-C stops it: so it does, even when started with SIGINT ignored (a background job);
            # SIGTERM (a service manager's stop) the same way, in place of the handler Ray put there
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.default_int_handler)
        print(usage(settings, admin), flush=True)
        print("\nCtrl-C stops everything.", flush=True)
        try:
            (stop or threading.Event()).wait()
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: how a local `cabrain up` is meant to stop, not an error
            stopping_since.append(time.monotonic())
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGINT, signal.SIGTERM):  # a second one does not cut the stop short
                    signal.signal(signum, signal.SIG_IGN)
            print("\nstopping what cabrain up started", file=sys.stderr, flush=True)
    if stopping_since:
        print(f"stopped in {time.monotonic() - stopping_since[0]:.1f} s", file=sys.stderr, flush=True)
    return bool(stopping_since)


def _local_models(settings: Settings, dsn: str, stack: ExitStack, remote: bool) -> Settings:
    """Start ``CABRAIN_LOCAL_MODELS`` beside the service (stopped with it, their agents deactivated
    first) and register them; the settings the service runs with then reach each one's port and read
    its key (:mod:`cabrain.localmodels.serve`). Before Ray starts, so that its workers have the keys."""
    from cabrain.localmodels import serve

    if remote:
        raise ConfigError(
            "CABRAIN_LOCAL_MODELS runs models on this machine's loopback, which a Ray cluster's nodes cannot reach",
            hint="serve the model where the cluster reaches it and register it: cabrain workflows agents add",
        )
    served = stack.enter_context(serve.serving(settings))
    stack.callback(asyncio.run, serve.retire_all(dsn, served))
    for line in asyncio.run(serve.register_all(settings, dsn, served)):
        print(
            f"local model {line['name']} at {line['endpoint']}: {line['tokens_per_s']} tokens/s, "
            f"{line['latency_ms']:.0f} ms a short answer",
            file=sys.stderr,
            flush=True,
        )
    return serve.egress_for(settings, served)


@contextmanager
def _supervised(server: Any, stop: threading.Event, interval_s: float) -> Iterator[None]:
    """While the service runs: restart its embedded PostgreSQL if it dies (and the watchdog that
    does the same, if that dies). The watchdog usually gets there first; either is enough."""

    def loop() -> None:
        while not stop.wait(max(interval_s, 0.5)):
            try:
                server.heal()
            except Exception as exc:  # noqa: BLE001 - keep supervising; say why this round failed
                log.error("embedded_pg.heal_failed", extra={"error": str(exc)})

    thread = threading.Thread(target=loop, name="cabrain-pg-supervisor", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def stop_ray(settings: Settings, *, tell: bool = True) -> None:
    """Stop the Serve application, giving its replicas ``CABRAIN_SERVE_STOP_TIMEOUT_S`` to finish
    their requests, then the local Ray (saying so on stderr with ``tell``). What Ray says about the
    work it cuts short (the controller's shutdown task "failed ... retries remaining") goes to a
    log file beside the Ray's own logs, not to the terminal."""
    import ray  # Ray (seconds to import) only where a command uses it
    from ray.serve import context as serve_context  # serve.shutdown() waits 30 s; its client takes a limit

    with _ray_quiet(ray_temp_dir(settings) / "cabrain-stop.log") as say:
        try:
            if tell:
                say("stopping the Serve application")
            client = serve_context._get_global_client(raise_if_no_controller_running=False)
            if client is not None:
                client.shutdown(timeout_s=settings.serve_stop_timeout_s)
        finally:
            if tell:
                say("stopping Ray")
            ray.shutdown()


@contextmanager
def _ray_quiet(log_path: Path) -> Iterator[Callable[[str], None]]:
    """While Ray stops: its Python loggers and this process's stdout and stderr (where its C++ core
    writes, and where it relays what the raylet says) go to ``log_path``; yields how to still tell
    the terminal something (on stderr)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    ray_logger = logging.getLogger("ray")
    level, propagate = ray_logger.level, ray_logger.propagate
    try:
        target = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        target = os.open(os.devnull, os.O_WRONLY)
    for fd in saved:
        os.dup2(target, fd)
    os.close(target)
    ray_logger.setLevel(logging.CRITICAL)
    ray_logger.propagate = False

    def say(text: str) -> None:
        os.write(saved[2], f"{text}\n".encode())

    try:
        yield say
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        ray_logger.setLevel(level)
        ray_logger.propagate = propagate


def down(settings: Settings) -> bool:
    """``cabrain down``: delete the application from the cluster at ``CABRAIN_RAY_ADDRESS``."""
    if not settings.ray_address:
        raise ConfigError(
            "cabrain down removes the app from a Ray cluster; CABRAIN_RAY_ADDRESS is not set",
            hint="a local `cabrain up` stops with Ctrl-C",
        )
    import ray  # Ray (seconds to import) only where a command uses it
    from ray import serve

    connected_here = not ray.is_initialized()
    init_ray(settings)
    try:
        if APP_NAME not in serve.status().applications:
            return False
        serve.delete(APP_NAME)
        return True
    finally:
        if connected_here:
            ray.shutdown()
