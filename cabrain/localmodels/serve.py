"""Start, measure, register and stop the local models of ``CABRAIN_LOCAL_MODELS``.

Each model runs in a process of its own (:mod:`cabrain.localmodels.server`: llama.cpp's server) on
127.0.0.1 at a free port, with an API key made for this start, and is registered in the model
registry (``llm_agents``) as a local model agent: its endpoint, its key's variable, its source, and
the latency and output tokens per second measured by one short answer once it has loaded. The
process that started it reaches it through the egress policy by that one port
(``127.0.0.1:<port>``) and reads its key from that one variable; stopping deactivates the agent
(routing then skips it) and ends the process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from cabrain.egress import Egress
from cabrain.errors import ConfigError
from cabrain.localmodels import sources
from cabrain.localmodels.server import KEY_VARIABLE
from cabrain.providers.llm_calls import CallPolicy, Wire, build_model
from cabrain.settings import Settings
from cabrain.settings.local_models import LocalModel
from cabrain.store import workflow_models as sql
from cabrain.workflows.registry import ModelAgent

log = logging.getLogger("cabrain.localmodels")

KEY_PREFIX = "LOCAL_MODEL_KEY_"  # the variable holding a served model's key: this, and its name
SPEED_PROMPT = "Count from one to twenty in words, separated by commas."
SPEED_TOKENS = 48
_EXIT_GRACE_S = 10.0  # how long a server that said FAILED gets to exit on its own, its log flushed


@dataclass
class Served:
    """One local model running: its process, where it answers, and the variable holding its key."""

    name: str
    source: str
    path: Path
    port: int
    process: subprocess.Popen[str]
    key_env: str

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def allow(self) -> str:
        """Its egress allowance: this one port of loopback."""
        return f"127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Speed:
    latency_ms: float  # one short answer, whole
    tokens_per_s: float  # its output tokens over that time
    tokens_out: int


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def key_env(name: str) -> str:
    return KEY_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def start(model: LocalModel, settings: Settings, *, name: str | None = None, path: Path | None = None) -> Served:
    """Start ``model``'s server (its weights at ``path`` when found already) and wait until it has
    loaded (``CABRAIN_LOCAL_MODEL_START_TIMEOUT_S``); raises :class:`ConfigError` with the server's
    own reason when it cannot."""
    path = path or sources.weights(model, settings.resolved_local_models_dir)
    assert path is not None  # assembled
    template = sources.template(model)
    name = name or sources.default_name(model, path)
    port = _free_port()
    key = secrets.token_urlsafe(32)
    command = [
        sys.executable, "-m", "cabrain.localmodels.server", "--model", str(path), "--port", str(port),
        "--threads", str(settings.local_model_threads), "--ctx", str(model.ctx), "--alias", name,
        "--parent", str(os.getpid()),
        *(("--template", str(template)) if template else ()),
    ]  # fmt: skip
    env = {**os.environ, KEY_VARIABLE: key}  # the server's key: in its environment, not its argv
    logs = settings.resolved_local_models_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{name}.log"  # llama.cpp's own log, this start's
    with log_path.open("w") as err:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True, env=env, start_new_session=True
        )
    served = Served(name, model.source, path, port, process, key_env(name))
    line = first_line(process, settings.local_model_start_timeout_s)
    if not line.startswith("READY"):
        if line.startswith("FAILED"):  # it is exiting: let it finish, so llama.cpp's log is written out whole
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(_EXIT_GRACE_S)
        stop(served)
        why = line.removeprefix("FAILED").strip() or f"it exited with {process.returncode}"
        if line == "":
            why = f"it did not load within {settings.local_model_start_timeout_s:.0f} s"
        said = _last_error(log_path)
        raise ConfigError(
            f"local model {name} ({path.name}) did not start: {why}" + (f" ({said})" if said else ""),
            hint=f"its server's log is {log_path}; check the file and CABRAIN_LOCAL_MODELS (cabrain doctor), "
            "or raise CABRAIN_LOCAL_MODEL_START_TIMEOUT_S",
        )
    os.environ[served.key_env] = key  # this process's models read it from here (CABRAIN_SECRET_ENV_ALLOW)
    log.info("local_model.started", extra={"model": name, "port": port, "file": str(path)})
    return served


def _last_error(log_path: Path) -> str:
    """The last line of a server's log that says what went wrong, if one does."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    said = [line.strip() for line in lines if re.search(r"\b(error|failed|invalid)\b", line, re.IGNORECASE)]
    return said[-1][:300] if said else ""


def first_line(process: subprocess.Popen[str], timeout_s: float) -> str:
    """The server's first line on stdout ("" if none came in time), its output drained after."""
    lines: list[str] = []
    got = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if not got.is_set():
                lines.append(line.strip())
                got.set()
        got.set()

    threading.Thread(target=read, name="cabrain-local-model-out", daemon=True).start()
    got.wait(timeout_s)
    return lines[0] if lines else ""


def stop(served: Served, timeout_s: float = 20.0) -> None:
    """End ``served``'s process (SIGTERM, then SIGKILL) and forget its key."""
    os.environ.pop(served.key_env, None)
    if served.process.poll() is None:
        served.process.terminate()
        try:
            served.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            served.process.kill()
            served.process.wait()
    log.info("local_model.stopped", extra={"model": served.name})


def egress_for(settings: Settings, served: list[Served]) -> Settings:
    """``settings`` with the served models' ports allowed and their keys' variables readable."""
    return settings.model_copy(
        update={
            "egress_allow": [*settings.egress_allow, *(s.allow for s in served)],
            "secret_env_allow": [*settings.secret_env_allow, *(s.key_env for s in served)],
        }
    )


async def measure(served: Served, settings: Settings) -> Speed:
    """One short answer's latency and output tokens per second (after one to warm it up)."""
    settings = egress_for(settings, [served])
    policy = CallPolicy(settings.local_model_start_timeout_s, 0, 0.0, Egress.of(settings, os.environ))
    model = build_model(Wire.OPENAI.value, served.endpoint, served.name, api_key_env=served.key_env, policy=policy)
    await model.complete("", "Say ready.", max_tokens=4)
    answer = await model.complete("", SPEED_PROMPT, max_tokens=SPEED_TOKENS)
    tokens = answer.tokens_out or 0
    return Speed(answer.duration_ms, tokens / max(answer.duration_ms / 1000, 1e-9), tokens)


async def register(conn: asyncpg.Connection, served: Served, speed: Speed) -> ModelAgent:
    """``served`` as an active local model agent (made, or brought up to date when CaBrain served it
    before); a model agent of that name registered by hand is left alone: a clear error."""
    row = await conn.fetchrow(
        sql.SERVE_LOCAL,
        served.name,
        served.name,
        served.endpoint,
        served.key_env,
        speed.latency_ms,
        speed.tokens_per_s,
        served.source,
    )
    if row is None:
        raise ConfigError(
            f"a model agent named {served.name!r} was registered by hand: the local model would replace it",
            hint="give the local model another name in CABRAIN_LOCAL_MODELS",
        )
    return ModelAgent.from_row(row)


async def retire(conn: asyncpg.Connection, served: list[Served]) -> None:
    """The served models' agents deactivated (their processes are stopping)."""
    await conn.execute(sql.RETIRE_LOCAL, [s.name for s in served])


async def register_all(settings: Settings, dsn: str, served: list[Served]) -> list[dict[str, Any]]:
    """Measure and register every served model; what was registered, for the operator."""
    from cabrain.store.db import connect

    out = []
    conn = await connect(dsn)
    try:
        for one in served:
            speed = await measure(one, settings)
            await register(conn, one, speed)
            out.append(describe(one, speed))
    finally:
        await conn.close()
    return out


async def retire_all(dsn: str, served: list[Served]) -> None:
    from cabrain.store.db import connect

    conn = await connect(dsn)
    try:
        await retire(conn, served)
    finally:
        await conn.close()


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[list[Served]]:
    """Start every model of ``CABRAIN_LOCAL_MODELS`` (two with one name are refused), stopping those
    started when one fails; all are stopped when the block ends."""
    served: list[Served] = []
    names: set[str] = set()
    try:
        for model in settings.local_models:
            path = sources.weights(model, settings.resolved_local_models_dir)
            assert path is not None  # assembled
            name = sources.default_name(model, path)
            if name in names:
                raise ConfigError(
                    f"two local models are named {name!r}", hint="give each a name of its own in CABRAIN_LOCAL_MODELS"
                )
            names.add(name)
            print(f"starting local model {name} ({path.name})", file=sys.stderr, flush=True)
            served.append(start(model, settings, name=name, path=path))
        yield served
    finally:
        for one in reversed(served):
            stop(one)


def describe(served: Served, speed: Speed) -> dict[str, Any]:
    return {
        "name": served.name,
        "endpoint": served.endpoint,
        "file": str(served.path),
        "latency_ms": round(speed.latency_ms, 1),
        "tokens_per_s": round(speed.tokens_per_s, 1),
    }


__all__ = [
    "Served",
    "Speed",
    "describe",
    "egress_for",
    "first_line",
    "key_env",
    "measure",
    "register",
    "register_all",
    "retire",
    "retire_all",
    "serving",
    "start",
    "stop",
]
