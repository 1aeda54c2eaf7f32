"""Running the service: ``cabrain up`` / ``cabrain down`` and the pieces tests and benchmarks share.

``cabrain up`` on a fresh machine: embedded PostgreSQL -> migrate -> first admin key -> a local Ray
(listeners on loopback) -> the Serve app on ``CABRAIN_API_HOST:CABRAIN_API_PORT`` -> wait until
``/v1/ready`` -> print how to call it -> block. Ctrl-C (or SIGTERM) stops what it started: the Serve
app, the local Ray, and its lease on the embedded server (the server stops when no CaBrain process
uses it any more).

With ``CABRAIN_RAY_ADDRESS`` it deploys onto that cluster instead (which needs
``CABRAIN_DATABASE_URL``: other nodes cannot reach an embedded server's unix socket) and returns;
``cabrain down`` removes the application.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import stat
import sys
import tempfile
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
from cabrain.paths import write_private
from cabrain.providers.embedders import load_embedder
from cabrain.settings import Settings, settings_for_replicas
from cabrain.store import migrations
from cabrain.store.db import check_server, connect, server_facts
from cabrain.store.embedded import EmbeddedPostgres
from cabrain.store.embedded.sockets import private_problem

log = logging.getLogger(__name__)

APP_NAME = "cabrain"
# A Ray that CaBrain starts on this machine: every process it runs listens on loopback only (Ray's
# own switch for a single-machine Ray; without it Ray binds its gRPC servers to every interface and
# its job agent to the machine's address), and every call into it carries the token of
# CABRAIN_HOME/ray/auth_token (made on first use, mode 0600), so another local user cannot submit
# jobs or drive its workers either. No usage reporting.
RAY_LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
RAY_COMMON_ENV = {
    "RAY_AUTH_MODE": "token",
    "RAY_USAGE_STATS_ENABLED": "0",
    # Serve's HTTP proxy answers in CaBrain's JSON error shape too (cabrain/serve/proxy.py)
    "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": "cabrain.serve.proxy:middlewares",
}
LOOPBACK = ("127.0.0.1", "::1", "localhost")
# The autoscaler's and the dashboard head's own Prometheus servers (fixed ports 44217 and 44227,
# no key) are not opened by a local Ray: given a port that cannot be bound, each skips its server
# (it logs the failed start in its own log file and runs on).
RAY_NO_METRICS_SERVERS = {"AUTOSCALER_METRIC_PORT": "-1", "DASHBOARD_METRIC_PORT": "-1"}


def ray_token_path(settings: Settings) -> Path:
    """The token file of the Ray this machine's CaBrain starts (made with mode 0600 on first use)."""
    return settings.ray_auth_token_file or settings.home / "ray" / "auth_token"


def ensure_ray_token(path: Path) -> Path:
    """A 256-bit token at ``path`` (Ray's own format), made now if there is none; private to this user."""
    if not path.exists():
        write_private(path, secrets.token_hex(32))
    elif stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o600)
    if not path.read_text().strip():
        raise ConfigError(
            f"the Ray token file {path} is empty", hint="delete it; a new token is made on the next start"
        )
    return path


# Ray's longest unix socket path under its temp folder: <temp>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store
# must fit a socket address (107 bytes on Linux); a pid has at most 7 digits.
_RAY_SOCKET_TAIL = len("/session_2026-12-03_03-49-41_565221_1234567/sockets/plasma_store")
_MAX_SOCKET_PATH = 107


def _private_problem(path: Path) -> str | None:
    """Why ``path`` is not a private folder of this user (None: it is one): the socket folder's rule."""
    return private_problem(path, {os.geteuid()})


def _private_folder(path: Path) -> Path:
    """``path`` as a folder of ours, mode 0700 (made when missing), or a clear error."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.is_symlink() and path.is_dir() and os.lstat(path).st_uid == os.geteuid():
        path.chmod(0o700)
    problem = _private_problem(path)
    if problem is not None:
        raise ConfigError(f"{path} is not a private folder: {problem}", hint="remove it; CaBrain makes it again, 0700")
    return path


def ray_temp_dir(settings: Settings) -> Path:
    """The temp folder of the local Ray (its sessions, logs and sockets, which Ray makes open to
    everyone): inside ``home/ray`` (0700), so no other local user can reach them; where that path
    is too long for Ray's unix sockets, inside a private folder made by :func:`tempfile.mkdtemp`
    (0700, recorded in ``home/ray/temp_dir`` and used again while it is still ours and 0700).
    Never the shared ``/tmp/ray``."""
    top = _private_folder(settings.home / "ray")
    own = top / "t"
    if len(str(own)) + _RAY_SOCKET_TAIL <= _MAX_SOCKET_PATH:
        return own
    record = top / "temp_dir"
    try:
        fd = os.open(record, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd) as f:
            recorded = Path(f.read().strip())
        if recorded.is_absolute() and _private_problem(recorded) is None:
            if len(str(recorded / "t")) + _RAY_SOCKET_TAIL <= _MAX_SOCKET_PATH:
                return recorded / "t"
    except (OSError, ValueError):
        pass
    base = tempfile.gettempdir()
    if len(base) > 40:
        base = "/tmp"
    made = Path(tempfile.mkdtemp(prefix="cabrain-ray-", dir=base))  # 0700, ours, a name no one knew
    write_private(record, str(made))
    return made / "t"


def ray_environment(settings: Settings, *, local: bool) -> dict[str, str]:
    """The environment a Ray of CaBrain's runs with (``local``: one this machine starts, on loopback;
    otherwise a cluster's, whose token comes from CABRAIN_RAY_AUTH_TOKEN_FILE or Ray's own lookup:
    RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token)."""
    env = dict(RAY_COMMON_ENV)
    if local:
        env.update(RAY_LOOPBACK_ENV)
        env["RAY_AUTH_TOKEN_PATH"] = str(ensure_ray_token(ray_token_path(settings)))
        # Ray's Prometheus port answers anyone on the host, without a key: off unless asked for
        env["RAY_enable_metrics_collection"] = "1" if settings.ray_metrics_export else "0"
        env.update(RAY_NO_METRICS_SERVERS)
    elif settings.ray_auth_token_file is not None:
        if not settings.ray_auth_token_file.is_file():
            raise ConfigError(
                f"CABRAIN_RAY_AUTH_TOKEN_FILE {settings.ray_auth_token_file} does not exist",
                hint="copy the cluster's token there (the head's ~/.ray/auth_token, see README 'Scale-out')",
            )
        env["RAY_AUTH_TOKEN_PATH"] = str(settings.ray_auth_token_file)
    return env


def apply_ray_environment(env: dict[str, str]) -> None:
    """Set ``env`` in this process (Ray's processes inherit it). Ray reads the loopback switch once,
    when it is first imported: a process that imported Ray earlier gets the same value set here."""
    os.environ.update(env)
    if "ray._private.ray_constants" in sys.modules and env.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0":
        constants: Any = sys.modules["ray._private.ray_constants"]
        constants.ENABLE_RAY_CLUSTER = False
    if "ray._raylet" in sys.modules:  # the token mode and file are read into Ray's C++ config once
        from ray._raylet import (  # type: ignore[attr-defined]  # the compiled module's stub lacks them
            AuthenticationTokenLoader,
            Config,
        )

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def cluster_address(settings: Settings) -> str | None:
    """The Ray cluster to use: CABRAIN_RAY_ADDRESS, or the one a Ray job runs in (RAY_ADDRESS)."""
    return settings.ray_address or os.environ.get("RAY_ADDRESS") or None


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


def init_ray(settings: Settings) -> bool:
    """Connect to ``CABRAIN_RAY_ADDRESS`` (or the cluster of the Ray job this runs in) or start a
    local Ray on loopback with token authentication; True when it started one."""
    address = cluster_address(settings)
    import ray  # Ray (seconds to import) only where a command uses it

    if ray.is_initialized():
        return False
    quiet: dict[str, Any] = {
        "log_to_driver": False,
        "logging_level": logging.WARNING,
        "include_dashboard": False,
    }
    if address:
        apply_ray_environment(ray_environment(settings, local=False))
        try:
            ray.init(address=address, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ServiceError(
                f"cannot connect to the Ray cluster at {address}: {exc}",
                hint="check CABRAIN_RAY_ADDRESS, that `ray status` works on the head node, and that this machine has "
                "the cluster's Ray token (CABRAIN_RAY_AUTH_TOKEN_FILE or ~/.ray/auth_token)",
            ) from exc
        return False
    apply_ray_environment(ray_environment(settings, local=True))
    ray.init(
        # always a new local Ray: never whatever /tmp/ray/ray_current_cluster names (another user's
        # cluster, or a dead one's leftover file)
        address="local",
        num_cpus=settings.ray_num_cpus,
        object_store_memory=settings.ray_object_store_bytes,
        _node_ip_address="127.0.0.1",
        _temp_dir=str(ray_temp_dir(settings)),  # never the shared /tmp/ray another user can write
        **quiet,
    )
    node_ip = ray.util.get_node_ip_address()
    if node_ip not in LOOPBACK:  # never serve a local Ray on the network
        ray.shutdown()
        raise ServiceError(
            f"the local Ray came up on {node_ip}, not on loopback",
            hint="unset RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER and RAY_ADDRESS in this environment",
        )
    return True


@contextmanager
def ray_session(settings: Settings, *, inline: bool, say: Callable[[str], None]) -> Iterator[None]:
    """Ray for one command's tasks (``cabrain sleep``, ``cabrain workflows learn``): the cluster at
    ``CABRAIN_RAY_ADDRESS``, or a local Ray started for the command and stopped after it; nothing
    when the command runs ``inline``."""
    started = False
    if not inline:
        started = init_ray(settings)
        say("connected to the Ray cluster" if not started else "started a local Ray for this run")
    try:
        yield
    finally:
        if started:
            import ray  # Ray (seconds to import) only where a command uses it

            ray.shutdown()


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
    serve.start(
        proxy_location=settings.serve_proxy_location,
        http_options={"host": settings.api_host, "port": settings.api_port},
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


def usage(settings: Settings, admin: identity.AdminBootstrap) -> str:
    url = api_url(settings)
    key_file = admin.path
    lines = [
        f"CaBrain is up at {url}  (API described at {url}/openapi.json)",
        f"console: {url}/console  (sign in with an API key)",
        admin_line(admin),
        "",
        "try it:",
        f"  export CABRAIN_API_KEY=$(cat {key_file})",
        f'  curl -s -H "Authorization: Bearer $CABRAIN_API_KEY" {url}/v1/whoami',
        "  curl -s -H \"Authorization: Bearer $CABRAIN_API_KEY\" -H 'content-type: application/json' \\",
        f'       -d \'{{"name": "notes"}}\' {url}/v1/namespaces',
        "  curl -s -H \"Authorization: Bearer $CABRAIN_API_KEY\" -H 'content-type: application/json' \\",
        f'       -d \'{{"content": "We chose pgvector.", "namespace": "notes"}}\' {url}/v1/memories',
        "  curl -s -H \"Authorization: Bearer $CABRAIN_API_KEY\" -H 'content-type: application/json' \\",
        f'       -d \'{{"query": "which vector store?", "namespace": "notes"}}\' {url}/v1/recall',
        "  cabrain agents create my-agent      # a key for each agent",
    ]
    return "\n".join(lines)


def up(
    settings: Settings,
    *,
    app_args: dict[str, Any] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """``cabrain up``: see the module docstring. Returns when stopped (local) or deployed (cluster)."""
    remote = bool(cluster_address(settings))
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
        print(
            "starting Ray (loopback only, token authentication)"
            if not remote
            else f"connecting to Ray at {cluster_address(settings)}",
            file=sys.stderr,
        )
        started_ray = init_ray(settings)
        if started_ray:
            stack.callback(_stop_ray)
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
            return
        wait_ready(settings)
        if threading.current_thread() is threading.main_thread():
            # it says Ctrl-C stops it: so it does, even when started with SIGINT ignored (a background job)
            signal.signal(signal.SIGINT, signal.default_int_handler)
        print(usage(settings, admin), flush=True)
        print("\nCtrl-C stops everything.", flush=True)
        (stop or threading.Event()).wait()


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


def _stop_ray() -> None:
    import ray  # Ray (seconds to import) only where a command uses it
    from ray import serve

    try:
        print("stopping the Serve application", file=sys.stderr, flush=True)
        serve.shutdown()  # lets replicas finish their requests, 30 s at most
    finally:
        print("stopping Ray", file=sys.stderr, flush=True)
        ray.shutdown()


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
