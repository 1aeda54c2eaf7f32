"""A Ray for CaBrain: the cluster at ``CABRAIN_RAY_ADDRESS`` (or the one a Ray job runs in), or a
local Ray on loopback with token authentication, its sessions in a private folder. Used by
``cabrain up`` (:mod:`cabrain.service`), by the commands that spread work over Ray (sleep,
connector syncs, workflow learning) and by the tests and benchmarks."""

from __future__ import annotations

import logging
import os
import secrets
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cabrain.errors import ConfigError, ServiceError
from cabrain.paths import write_private
from cabrain.settings import Settings
from cabrain.store.embedded.sockets import private_problem

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
    env.update(direct_ingress_environment(settings))
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


def direct_ingress_environment(settings: Settings) -> dict[str, str]:
    """Ray Serve's switches for ``CABRAIN_SERVE_DIRECT_INGRESS``: each node's ingress replica listens on
    the API's port itself (the one port of its range), so a request skips the hop through Serve's proxy.
    Serve reads them when its controller and replicas start, from their processes' environment."""
    if not settings.serve_direct_ingress:
        return {}
    port = settings.api_port
    return {
        "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + 1),  # the range's end is not a port of it
        # a port freed by a replica that stopped is held back for HAProxy's workers, which CaBrain does not
        # run: without this, the replica that replaces a dead one waits 150 s for the node's port
        "RAY_SERVE_PORT_QUARANTINE_S": "0",
    }


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
